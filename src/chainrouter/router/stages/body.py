"""Stage: the request body is within the size limit."""

from __future__ import annotations

from chainrouter.jsonrpc.errors import body_too_large
from chainrouter.router.context import RequestContext


class BodyWithinLimit:
    """HTTP 413, -32600 for a body over `max_bytes` (the servers also stop reading there)."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes

    def run(self, request: RequestContext) -> None:
        if len(request.body) > self._max_bytes:
            request.refusal = body_too_large(self._max_bytes)
