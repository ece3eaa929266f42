"""Calls to the management API on the user's behalf, with its error answers turned into tool
errors that keep the API's code, message and per-field details."""

from __future__ import annotations

from typing import Any

from chainrouter.companion.remote import ManagementClient, ServiceUnavailableError
from chainrouter.companion.toolkit import ToolError


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
        return answer.body
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
