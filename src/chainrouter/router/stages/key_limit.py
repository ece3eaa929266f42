"""Stage: the API key's own rate limit, when its owner set one (docs/router.md, "Rate limits")."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from chainrouter.domain.access import KeyAccess
from chainrouter.jsonrpc.envelope import RpcCall
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.ratelimit.window import Bucket
from chainrouter.router.context import RequestContext
from chainrouter.router.contract import Acquire


class KeyRateLimit:
    """Each valid call of the request (every item of a batch) counts against the key's limit, at
    most `rate_limit` in any window of `rate_limit_interval_s`; over it, the whole request is
    HTTP 429, -32031, with `Retry-After`, and takes nothing. Taken once per call, before any
    attempt: failover and hedges spend no more of it. A key without a limit costs no command."""

    def run(self, request: RequestContext) -> Coroutine[Any, Any, None] | None:
        access = request.access
        if access is None or access.rate_limit <= 0:
            return None
        calls = sum(isinstance(call, RpcCall) for call in request.calls)
        return self._take(request, access, calls) if calls else None

    async def _take(self, request: RequestContext, access: KeyAccess, calls: int) -> None:
        limit, interval_s = access.rate_limit, access.rate_limit_interval_s
        if wait_s := await Acquire([Bucket(f"key:{access.key_id}", limit, interval_s, calls)]):
            too_big = calls > limit
            request.refusal = RpcError(
                429,
                RpcCode.KEY_RATE_LIMITED,
                f"this API key's rate limit: at most {limit} calls per {interval_s} s"
                + (f"; this batch alone has {calls}: split it" if too_big else ""),
                # A batch larger than the limit never fits: no Retry-After, which clients obey
                # by sending it again and again.
                retry_after_s=None if too_big else wait_s,
            )
