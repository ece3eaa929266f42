"""Stage: the body is a JSON-RPC 2.0 request or batch (spec section 2; jsonrpc/envelope.py)."""

from __future__ import annotations

from chainrouter.jsonrpc.envelope import parse_payload
from chainrouter.jsonrpc.errors import RpcError
from chainrouter.router.context import RequestContext


class ParsePayload:
    """Not JSON: HTTP 400, -32700; not a request or a batch of them, an empty batch, or a batch
    over `max_batch` calls: HTTP 400, -32600. An invalid item of a batch is answered alone."""

    def __init__(self, max_batch: int) -> None:
        self._max_batch = max_batch

    def run(self, request: RequestContext) -> None:
        try:
            payload = parse_payload(request.body, max_batch=self._max_batch)
        except RpcError as failure:
            request.refusal = failure
            return
        request.calls = payload.calls
        request.is_batch = payload.is_batch
