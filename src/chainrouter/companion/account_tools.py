"""The four customer tools, offered when a management token is configured: usage, and the API
keys of the token's customer. Secrets of existing keys are never shown; a new key's secret is
shown once, in the answer to `create_api_key`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator, Field, model_validator

from chainrouter.companion.management_calls import (
    management_list,
    management_object,
    unexpected_answer,
)
from chainrouter.companion.remote import ManagementClient
from chainrouter.companion.toolkit import CamelArguments, Result, ToolError, ToolSpec
from chainrouter.contracts.api_keys import ApiKeyCreate, ApiKeySecret, ApiKeyUpdate
from chainrouter.management.usage import (
    DEFAULT_WINDOW,
    MAX_WINDOW,
    Granularity,
    GroupBy,
    Section,
)
from chainrouter.operator_config.model import ChainId

USAGE_ROWS_DEFAULT, USAGE_ROWS_MAX = 20, 100
_KEY_FIELDS = (
    "id",
    "name",
    "key_hint",
    "active",
    "allowed_domains",
    "routing_strategy",
    "rate_limit",
    "rate_limit_interval_sec",
    "max_price_per_call",
    "verified",
    "created_at",
    "updated_at",
)


def _split_sections(value: Any) -> Any:
    if isinstance(value, str):  # "summary,by_chain" as the HTTP endpoint takes it
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class UsageArgs(CamelArguments):
    from_: AwareDatetime | None = Field(
        default=None,
        alias="from",
        description="RFC 3339 start, e.g. 2026-11-01T00:00:00Z; default 30 days before `to`.",
    )
    to: AwareDatetime | None = Field(default=None, description="RFC 3339 end; default now.")
    include: Annotated[
        list[Section] | None,
        BeforeValidator(_split_sections),
        Field(min_length=1, description="Report sections; default summary and balance."),
    ] = None
    group_by: GroupBy | None = Field(
        default=None, description="Fills `groups`; when given, `include` is not used."
    )
    chain_id: ChainId | None = Field(default=None, description="Only this chain.")
    api_key_id: int | None = Field(
        default=None, ge=1, description="Only this key (its id from list_api_keys)."
    )
    granularity: Granularity = Field(default=Granularity.DAY, description="time_series buckets.")
    limit: int = Field(
        default=USAGE_ROWS_DEFAULT,
        ge=1,
        le=USAGE_ROWS_MAX,
        description="Rows per section; time_series and groupBy day are never cut.",
    )

    @model_validator(mode="after")
    def _window_in_order(self) -> UsageArgs:
        if self.from_ is not None and self.to is not None:
            if self.from_ >= self.to:
                raise ValueError("`from` must be before `to`")
            if self.to - self.from_ > MAX_WINDOW:
                raise ValueError(f"the window may span at most {MAX_WINDOW.days} days")
        return self


class UpdateApiKeyArgs(ApiKeyUpdate):
    api_key: ApiKeySecret = Field(
        description="The full secret (crk_...) of the key to change; never a shortened hint."
    )

    @model_validator(mode="after")
    def _something_to_change(self) -> UpdateApiKeyArgs:
        if not self.model_fields_set - {"api_key"}:
            raise ValueError(
                "give at least one of name, active, allowed_domains, routing_strategy, "
                "rate_limit, rate_limit_interval_sec, spend_alert, max_price_per_call, verified"
            )
        return self


def _key_view(record: dict[str, Any]) -> dict[str, Any]:
    return {name: record[name] for name in _KEY_FIELDS if name in record}


class AccountTools:
    def __init__(self, management: ManagementClient) -> None:
        self._management = management

    async def usage(self, args: UsageArgs) -> Result:
        end = args.to or datetime.now(UTC)
        start = args.from_ or end - DEFAULT_WINDOW
        if start >= end or end - start > MAX_WINDOW:
            raise ToolError(
                f"get_usage: the window {start.isoformat()} to {end.isoformat()} must run "
                f"forwards and span at most {MAX_WINDOW.days} days"
            )
        params = {
            "from": start.isoformat(),
            "to": end.isoformat(),
            "granularity": args.granularity.value,
            "limit": str(args.limit),
        }
        if args.group_by is not None:
            params["group_by"] = args.group_by.value
        elif args.include is not None:
            params["include"] = ",".join(dict.fromkeys(s.value for s in args.include))
        if args.chain_id is not None:
            params["chain_id"] = str(args.chain_id)
        if args.api_key_id is not None:
            params["api_key_id"] = str(args.api_key_id)
        report: Result = await management_object(self._management, "GET", "/usage", params=params)
        return report

    async def list_keys(self, _: CamelArguments) -> Result:
        keys = await management_list(self._management, "GET", "/api-keys")
        return {"apiKeys": [_key_view(record) for record in keys]}

    async def create_key(self, args: ApiKeyCreate) -> Result:
        created = await management_object(
            self._management, "POST", "/api-keys", body=args.model_dump(mode="json")
        )
        return {
            **_key_view(created),
            "api_key": created["api_key"],
            "notice": "This is the only time the secret is shown: hand it to the user to keep.",
        }

    async def update_key(self, args: UpdateApiKeyArgs) -> Result:
        found = await management_object(
            self._management, "POST", "/api-keys/lookup", body={"api_key": args.api_key}
        )
        key_id = found.get("id")
        if not isinstance(key_id, int) or isinstance(key_id, bool):
            raise unexpected_answer("POST", "/api-keys/lookup")
        changes = args.model_dump(mode="json", exclude_unset=True, exclude={"api_key"})
        updated = await management_object(
            self._management, "PATCH", f"/api-keys/{key_id}", body=changes
        )
        return _key_view(updated)


def account_tools(management: ManagementClient) -> list[ToolSpec[Any]]:
    tools = AccountTools(management)
    return [
        ToolSpec(
            "get_usage",
            "Get usage and balance",
            "Calls, credits spent and balance over a window (default the last 30 days, at most "
            "90): sections summary, balance, by_chain, by_api_key, by_api_key_chain, "
            "top_methods, time_series, by_scenario; or groupBy for one grouping. Credits are "
            "exact decimal strings (1 credit = 1 USD).",
            UsageArgs,
            tools.usage,
        ),
        ToolSpec(
            "list_api_keys",
            "List API keys",
            "Your API keys: id, name, hint, active, allowed domains, routing strategy and "
            "timestamps. Secrets are never shown.",
            CamelArguments,
            tools.list_keys,
        ),
        ToolSpec(
            "create_api_key",
            "Create an API key",
            "A new RPC API key. Its secret is returned once, in this answer only.",
            ApiKeyCreate,
            tools.create_key,
            read_only=False,
            idempotent=False,
        ),
        ToolSpec(
            "update_api_key",
            "Update an API key",
            "Change the name, active flag, allowed domains or routing strategy of one of your "
            "keys, named by its full secret. active=false stops the key at once.",
            UpdateApiKeyArgs,
            tools.update_key,
            read_only=False,
            destructive=True,
        ),
    ]
