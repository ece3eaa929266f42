"""Stages of the public free tier: it is open, and the caller's IP and the tier have room."""

from __future__ import annotations

from dataclasses import dataclass

from chainrouter.jsonrpc.envelope import RpcCall
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.net.client_ip import client_block
from chainrouter.ratelimit.window import Bucket
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.contract import Acquire


@dataclass(frozen=True, slots=True)
class FreeTierLimits:
    enabled: bool
    ip_requests: int
    ip_interval_s: float
    capacity_per_s: int
    signup_url: str | None
    ip_answer_bytes: int = 1024 * 1024  # per `ip_interval_s`

    @property
    def signup_hint(self) -> str:
        signup = f" at {self.signup_url}" if self.signup_url else ""
        return f"sign up for an API key{signup} for higher limits"


class FreeTierOpen:
    """HTTP 503, -32030 when the operator has turned the free tier off."""

    def __init__(self, limits: FreeTierLimits) -> None:
        self._limits = limits

    def run(self, request: RequestContext) -> None:
        if not self._limits.enabled:
            request.refusal = RpcError(
                503,
                RpcCode.PUBLIC_CAPACITY_EXHAUSTED,
                f"the public free tier is not available here; {self._limits.signup_hint}",
            )


class FreeTierRoom:
    """Each valid call counts against the client IP's limit (HTTP 429, -32029), then against the
    tier's total capacity (HTTP 429, -32030). A refusal by the first spends nothing of the
    second. A refusal says when to retry (`Retry-After`): when the request's calls fit again."""

    def __init__(self, limits: FreeTierLimits) -> None:
        self._limits = limits

    async def run(self, request: RequestContext) -> None:
        limits = self._limits
        calls = sum(isinstance(call, RpcCall) for call in request.calls)
        if calls == 0:
            return
        per_ip = Bucket(
            f"free:ip:{client_block(request.client_ip)}",
            limits.ip_requests,
            limits.ip_interval_s,
            calls,
        )
        capacity = Bucket("free:capacity", limits.capacity_per_s, 1.0, calls)
        if wait_s := await Acquire([per_ip]):
            request.refusal = RpcError(
                429,
                RpcCode.PUBLIC_RATE_LIMITED,
                f"public free tier: at most {limits.ip_requests} calls per "
                f"{limits.ip_interval_s:g} s per IP; {limits.signup_hint}",
                retry_after_s=wait_s,
            )
        elif wait_s := await Acquire([capacity]):
            request.refusal = RpcError(
                429,
                RpcCode.PUBLIC_CAPACITY_EXHAUSTED,
                f"the public free tier is at capacity; {limits.signup_hint}",
                retry_after_s=wait_s,
            )


class FreeTierAnswerBytes:
    """After each free-tier call ends, its answer's bytes count against the client IP's budget
    of answer bytes (beside its calls: one call can be answered with megabytes); an answer that
    does not fit is withheld: HTTP 429, -32029 with the budget in `data` and when to retry. An
    answer larger than the whole budget never fits."""

    def __init__(self, limits: FreeTierLimits) -> None:
        self._limits = limits

    async def run(self, call: CallContext) -> None:
        limits = self._limits
        size = len(call.answer)
        if call.scenario is None or not size:
            return
        bucket = Bucket(
            f"free:bytes:{client_block(call.request.client_ip)}",
            limits.ip_answer_bytes,
            limits.ip_interval_s,
            size,
        )
        if wait_s := await Acquire([bucket]):
            refusal = RpcError(
                429,
                RpcCode.PUBLIC_RATE_LIMITED,
                f"public free tier: at most {limits.ip_answer_bytes} bytes of answers per "
                f"{limits.ip_interval_s:g} s per IP, and this answer has {size}; "
                f"{limits.signup_hint}",
                {"ip_answer_bytes": limits.ip_answer_bytes},
            )
            call.withhold(429, error_response(refusal, call.call.id_json), wait_s)
