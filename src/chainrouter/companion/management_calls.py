"""Calls to the management API on the user's behalf, with its error answers turned into tool
errors that keep the API's code, message and per-field details."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from chainrouter.companion.remote import ManagementClient, ServiceUnavailableError
from chainrouter.companion.toolkit import ToolError

# Credit amounts in the API's answers. It writes them as exact JSON numbers, read here as Decimal,
# or as integers when whole (a price of 0); the tools give every one as a decimal string.
MONEY_KEYS = frozenset(
    {
        "amount",
        "cost",
        "credits",
        "credits_consumed",
        "credits_per_request",
        "credits_per_unit",  # a deposit asset's rate, and its minimum (get_deposit_address)
        "minimum",
        "overage_price",
        "price",
        "rate_limit_cr",
    }
)


def credits_as_strings(value: Any, key: str | None = None) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if key in MONEY_KEYS and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, dict):
        return {name: credits_as_strings(item, name) for name, item in value.items()}
    if isinstance(value, list):
        return [credits_as_strings(item) for item in value]
    return value


def unexpected_answer(method: str, path: str) -> ToolError:
    return ToolError(f"the management API answered {method} {path} with an unexpected shape")


async def management_object(client: ManagementClient, method: str, path: str, **kwargs: Any) -> Any:
    """`management_call` for routes that answer one JSON object."""
    body = await management_call(client, method, path, **kwargs)
    if not isinstance(body, dict):
        raise unexpected_answer(method, path)
    return body


async def management_list(client: ManagementClient, method: str, path: str, **kwargs: Any) -> Any:
    """`management_call` for routes that answer an array of JSON objects."""
    body = await management_call(client, method, path, **kwargs)
    if not isinstance(body, list) or not all(isinstance(item, dict) for item in body):
        raise unexpected_answer(method, path)
    return body


async def management_call(
    client: ManagementClient,
    method: str,
    path: str,
    *,
    params: dict[str, str] | None = None,
    body: Any = None,
) -> Any:
    """The JSON body of a 2xx answer; anything else raises `ToolError`."""
    try:
        answer = await client.request(method, path, params=params, body=body)
    except ServiceUnavailableError as exc:
        raise ToolError(str(exc)) from None
    if 200 <= answer.status < 300 and answer.is_json:
        return credits_as_strings(answer.body)
    error = answer.body.get("error") if isinstance(answer.body, dict) else None
    if isinstance(error, dict):
        raise ToolError(
            f"the management API refused {method} {path}: HTTP {answer.status} "
            f"{error.get('code')}: {error.get('message')}",
            {"httpStatus": answer.status, "error": error},
        )
    raise ToolError(
        f"the management API answered {method} {path} with HTTP {answer.status}",
        {"httpStatus": answer.status, "body": answer.raw_text},
    )
