"""Stage: the body is declared as JSON.

A web page can make a browser POST to any site without asking it first, as long as the body is
declared `text/plain`, a form, or nothing at all (a CORS "simple request"). Requiring
`application/json`, which no page can send elsewhere without the router's consent to a
preflight, keeps other sites' pages from spending a visitor's key through the visitor's browser.
Every JSON-RPC client sends it (docs/security.md).
"""

from __future__ import annotations

from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.context import RequestContext

_JSON = "application/json"


def is_json(content_type: str | None) -> bool:
    """`application/json`, in any case, with or without parameters such as a charset."""
    if content_type is None:
        return False
    return content_type.split(";", 1)[0].strip().lower() == _JSON


class JsonContentType:
    """HTTP 415, -32600 unless the request declares `Content-Type: application/json`."""

    def run(self, request: RequestContext) -> None:
        if not is_json(request.content_type):
            request.refusal = RpcError(
                415,
                RpcCode.INVALID_REQUEST,
                "invalid request: the body must be sent as Content-Type: application/json",
            )
