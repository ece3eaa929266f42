"""Customer routes: `/api-keys` and `/usage`, for the customer a management token belongs to."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import AwareDatetime, Field
from starlette.concurrency import run_in_threadpool

from chainrouter.api.common import (
    ChainIdOut,
    CreditsOut,
    NumberOut,
    OutModel,
    PathId,
    credits_out,
)
from chainrouter.api.deps import Caller, Context
from chainrouter.api.errors import ErrorBody
from chainrouter.api.jsonio import ExactJsonRoute, respond
from chainrouter.api.usage_out import UsageReportOut
from chainrouter.contracts.api_keys import ApiKeyCreate, ApiKeyLookup, ApiKeyUpdate
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.records import ApiKey
from chainrouter.management import api_keys, latency, usage
from chainrouter.management.errors import InvalidInputError
from chainrouter.operator_config.model import MAX_ROW_ID, ChainId

router = APIRouter(route_class=ExactJsonRoute, tags=["customer"])

_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing, invalid or revoked management token."},
    422: {"model": ErrorBody, "description": "Invalid input."},
}


class ApiKeyOut(OutModel):
    id: int = Field(description="Numeric ID, used by usage filters and PATCH.")
    customer_id: int
    name: str
    x_hint: str = Field(
        serialization_alias="X-Hint",
        description="Identifies the key in place of its secret (spec section 2): its prefix and "
        "last characters.",
    )
    key_hint: str = Field(description="The same hint, under the name earlier clients read.")
    allowed_domains: list[str]
    routing_strategy: RoutingStrategy
    active: bool
    bypass_credit_check: bool
    rate_limit: int = Field(description="Calls per rate_limit_interval_sec; 0: no limit.")
    rate_limit_interval_sec: int
    spend_alert: CreditsOut = Field(
        description="Credits per UTC day above which an alert is raised; 0: none."
    )
    verified: bool = Field(
        description="Every provable answer proven before it is served (docs/integrity.md)."
    )
    max_price_per_call: CreditsOut = Field(description="The most one call may cost; 0: no cap.")
    spent_today: CreditsOut = Field(
        description="Credits spent since 00:00 UTC, as routers have written it (5 s behind)."
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, key: ApiKey, spent_today_nano: int = 0) -> ApiKeyOut:
        return cls(
            id=key.id,
            customer_id=key.customer_id,
            name=key.name,
            x_hint=key.key_hint,
            key_hint=key.key_hint,
            allowed_domains=list(key.allowed_domains),
            routing_strategy=key.routing_strategy,
            active=key.active,
            bypass_credit_check=key.bypass_credit_check,
            rate_limit=key.rate_limit,
            rate_limit_interval_sec=key.rate_limit_interval_sec,
            spend_alert=credits_out(key.spend_alert_nano),
            verified=key.verified,
            max_price_per_call=credits_out(key.max_price_per_call_nano),
            spent_today=credits_out(spent_today_nano),
            created_at=key.created_at,
            updated_at=key.updated_at,
        )


class CreatedApiKeyOut(ApiKeyOut):
    api_key: str = Field(description="The secret. Shown in this response only; store it now.")


@router.post(
    "/api-keys",
    status_code=201,
    response_model=CreatedApiKeyOut,
    responses={
        **_AUTH_ERRORS,
        409: {"model": ErrorBody, "description": "The customer holds the most keys allowed."},
    },
    summary="Create an API key (the secret is returned once)",
)
async def create_api_key(body: ApiKeyCreate, caller: Caller, ctx: Context) -> Response:
    created = await run_in_threadpool(
        api_keys.create_api_key,
        ctx.engine,
        caller.customer_id,
        name=body.name,
        allowed_domains=list(dict.fromkeys(body.allowed_domains)),
        routing_strategy=body.routing_strategy,
        rate_limit=body.rate_limit,
        rate_limit_interval_sec=body.rate_limit_interval_sec,
        spend_alert_nano=body.spend_alert,
        verified=body.verified,
        max_price_per_call_nano=body.max_price_per_call,
    )
    out = CreatedApiKeyOut(**ApiKeyOut.of(created.record).model_dump(), api_key=created.secret)
    return respond(out, 201, headers={"Cache-Control": "no-store"})


@router.get(
    "/api-keys",
    response_model=list[ApiKeyOut],
    responses=_AUTH_ERRORS,
    summary="List your API keys (never their secrets)",
)
async def list_api_keys(caller: Caller, ctx: Context) -> Response:
    keys = await run_in_threadpool(api_keys.list_api_keys, ctx.engine, caller.customer_id)
    spent = await run_in_threadpool(api_keys.spent_today, ctx.engine, caller.customer_id)
    return respond([ApiKeyOut.of(key, spent.get(key.id, 0)) for key in keys])


@router.patch(
    "/api-keys/{key_id}",
    response_model=ApiKeyOut,
    responses={**_AUTH_ERRORS, 404: {"model": ErrorBody, "description": "Not your key."}},
    summary="Change name, active, allowed domains, routing strategy or rate limit of a key",
)
async def update_api_key(
    key_id: PathId, body: ApiKeyUpdate, caller: Caller, ctx: Context
) -> Response:
    changes = api_keys.ApiKeyChanges(
        name=body.name,
        active=body.active,
        allowed_domains=None
        if body.allowed_domains is None
        else list(dict.fromkeys(body.allowed_domains)),
        routing_strategy=body.routing_strategy,
        rate_limit=body.rate_limit,
        rate_limit_interval_sec=body.rate_limit_interval_sec,
        spend_alert_nano=body.spend_alert,
        verified=body.verified,
        max_price_per_call_nano=body.max_price_per_call,
    )
    updated = await run_in_threadpool(
        api_keys.update_api_key, ctx.engine, caller.customer_id, key_id, changes
    )
    spent = await run_in_threadpool(api_keys.spent_today, ctx.engine, caller.customer_id)
    return respond(ApiKeyOut.of(updated, spent.get(updated.id, 0)))


@router.post(
    "/api-keys/lookup",
    response_model=ApiKeyOut,
    responses={**_AUTH_ERRORS, 404: {"model": ErrorBody, "description": "Not your key."}},
    summary="Find one of your keys by its secret (to learn its id)",
)
async def find_api_key(body: ApiKeyLookup, caller: Caller, ctx: Context) -> Response:
    found = await run_in_threadpool(
        api_keys.find_api_key_by_secret, ctx.engine, caller.customer_id, body.api_key
    )
    spent = await run_in_threadpool(api_keys.spent_today, ctx.engine, caller.customer_id)
    return respond(ApiKeyOut.of(found, spent.get(found.id, 0)))


def _sections(include: str | None) -> frozenset[usage.Section] | None:
    if include is None:
        return None
    names = [part.strip() for part in include.split(",") if part.strip()]
    known = {s.value for s in usage.Section}
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise InvalidInputError(
            f"include: unknown section {', '.join(unknown) or '(empty)'}; "
            f"sections are {', '.join(s.value for s in usage.Section)}",
            details=[{"field": "include", "message": f"unknown section {n!r}"} for n in unknown],
        )
    return frozenset(usage.Section(name) for name in names)


@router.get(
    "/usage",
    response_model=UsageReportOut,
    response_model_exclude_none=True,
    responses=_AUTH_ERRORS | {404: {"model": ErrorBody, "description": "Not your API key."}},
    summary="Usage and spend over a window of at most 90 days",
)
async def get_usage(
    caller: Caller,
    ctx: Context,
    start: Annotated[
        AwareDatetime | None,
        Query(alias="from", description="RFC 3339 start; default 30 days before `to`."),
    ] = None,
    end: Annotated[
        AwareDatetime | None, Query(alias="to", description="RFC 3339 end; default now.")
    ] = None,
    include: Annotated[
        str | None,
        Query(
            description="Comma-separated sections: summary, balance, by_chain, by_api_key, "
            "by_api_key_chain, top_methods, time_series, by_scenario, time_series_by_chain, "
            "time_series_by_method, time_series_by_api_key, time_series_by_scenario, failures. "
            "Default summary,balance (none when group_by is given)."
        ),
    ] = None,
    group_by: Annotated[usage.GroupBy | None, Query(description="Fills `groups`.")] = None,
    granularity: Annotated[
        usage.Granularity, Query(description="Buckets of time_series.")
    ] = usage.Granularity.DAY,
    chain_id: Annotated[ChainId | None, Query(description="Only this chain.")] = None,
    api_key_id: Annotated[
        int | None, Query(ge=1, le=MAX_ROW_ID, description="Only this key (its numeric id).")
    ] = None,
    limit: Annotated[
        int | None,
        Query(
            ge=1,
            description="Rows per section or grouping, not time_series or group_by=day; "
            "values per broken-down series (the rest summed as `other`); "
            "default and maximum configured.",
        ),
    ] = None,
) -> Response:
    settings = ctx.settings
    if limit is not None and limit > settings.usage_max_rows:
        raise InvalidInputError(
            f"limit may be at most {settings.usage_max_rows}",
            details=[{"field": "limit", "message": f"must be <= {settings.usage_max_rows}"}],
        )
    query = usage.make_query(
        caller.customer_id,
        start=start,
        end=end,
        sections=_sections(include),
        group_by=group_by,
        granularity=granularity,
        chain_id=chain_id,
        api_key_id=api_key_id,
        limit=limit or settings.usage_default_rows,
    )
    report = await run_in_threadpool(usage.build_report, ctx.engine, query)
    return respond(UsageReportOut.of(report), exclude_none=True)


class ChainLatencyOut(OutModel):
    chain_id: ChainIdOut
    name: str
    nodes: int = Field(description="Enabled, in-sync nodes whose latency routers measured.")
    fastest_ms: NumberOut = Field(description="The fastest node's latency, milliseconds.")
    median_ms: NumberOut
    slowest_ms: NumberOut
    as_of: datetime = Field(description="The latest of the routers' reports it was read from.")


@router.get(
    "/latency",
    response_model=list[ChainLatencyOut],
    responses=_AUTH_ERRORS,
    summary="How fast each chain's nodes answer, as the routers measure them now",
)
async def get_latency(
    caller: Caller,
    ctx: Context,
    chain_id: Annotated[ChainId | None, Query(description="Only this chain.")] = None,
) -> Response:
    """Per chain, the fastest, median and slowest of its nodes' latencies as routers last
    reported them (smoothed over recent quick calls and health checks; docs/dashboard.md)."""
    found = await run_in_threadpool(latency.chain_latencies, ctx.engine, chain_id)
    return respond(
        [
            ChainLatencyOut(
                chain_id=str(row.chain_id),
                name=row.name,
                nodes=row.nodes,
                fastest_ms=row.fastest_ms,
                median_ms=row.median_ms,
                slowest_ms=row.slowest_ms,
                as_of=row.as_of,
            )
            for row in found
        ]
    )
