"""Running the stages: the request stages in order, then each call through the call stages.

The pipeline is a program (contract.py): it does no I/O itself, and awaits only what its stages
await, plus `Gather` to serve the calls of a batch at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work, work_of
from chainrouter.jsonrpc.encode import encode_call
from chainrouter.jsonrpc.envelope import InvalidCall, RpcCall
from chainrouter.jsonrpc.errors import RpcError
from chainrouter.jsonrpc.responses import batch_response, error_response
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.contract import Gather
from chainrouter.router.forwards import Forwardable
from chainrouter.router.replay import Replayable
from chainrouter.router.stages import CallStage, RequestStage

_OK = 200


SPLIT_HEADER = "x-logs-split-ranges"  # how many ranges split eth_getLogs calls were asked in
CACHE_HEADER = "x-cache"  # HIT, MISS or PARTIAL (a batch answered from the cache in part)


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes
    batch_id: str
    headers: tuple[tuple[str, str], ...] = ()  # beyond the ones every answer carries
    request: RequestContext | None = None  # the request served, when requests are logged
    # Set when the native server may give this answer again itself (router/replay.py).
    replayable: Replayable | None = None
    # Set when the native server may send this call to the same node again (router/forwards.py).
    forwardable: Forwardable | None = None


def combined_status(statuses: Sequence[int]) -> int:
    """HTTP status of a batch: 200, unless every item failed in the same way (then that status).

    Clients such as viem and ethers fail a whole batch on a non-2xx status, so a batch with any
    answered item stays 200 and each item carries its own error.
    """
    first = statuses[0]
    if first != _OK and all(status == first for status in statuses):
        return first
    return _OK


class Pipeline:
    def __init__(
        self,
        request_stages: Sequence[RequestStage],
        call_stages: Sequence[CallStage],
        closing_stages: Sequence[CallStage],
        *,
        keep_requests: bool = False,
        cache_header: bool = False,
    ) -> None:
        self.request_stages = tuple(request_stages)
        self.call_stages = tuple(call_stages)
        self.closing_stages = tuple(closing_stages)
        # Hand each request and its ended calls back with the reply, for the request log.
        self.keep_requests = keep_requests
        # Say in `X-Cache` whether the answers came from the cache (docs/cache.md).
        self.cache_header = cache_header

    async def serve(self, request: RequestContext) -> Reply:
        # One coroutine for the whole request: each more would cost every request its frame.
        kept = None
        if self.keep_requests:
            request.ended = []
            kept = request
        for stage in self.request_stages:
            pending = stage.run(request)
            if pending is not None:
                await pending
            refusal = request.refusal
            if refusal is not None:
                return Reply(
                    refusal.http_status,
                    _refused(request, refusal),
                    request.batch_id,
                    _retry_after(refusal.http_status, refusal.retry_after_s),
                    kept,
                )
        if not request.is_batch:
            status, answer, retry_s = await self._call(request, request.calls[0], request.body)
            headers = _headers(request, status, retry_s, self.cache_header)
            replayable = _replayable(request) if request.free_hits and kept is None else None
            return Reply(
                status, answer, request.batch_id, headers, kept, replayable, request.forwardable
            )
        results: list[tuple[int, bytes, float | None]] = await Gather(
            [self._call(request, call, None) for call in request.calls]
        )
        status = combined_status([status for status, _, _ in results])
        # Every item refused alike: retry when the last of them could succeed.
        retry_s = max((r for _, _, r in results if r is not None), default=None)
        return Reply(
            status,
            batch_response([answer for _, answer, _ in results]),
            request.batch_id,
            _headers(request, status, retry_s, self.cache_header),
            kept,
            _replayable(request) if request.free_hits and kept is None else None,
        )

    async def _call(
        self, request: RequestContext, call: RpcCall | InvalidCall, body: bytes | None
    ) -> tuple[int, bytes, float | None]:
        """One call's HTTP status, answer and, when it was refused for a limit, the seconds
        until a retry could succeed. `body` is the call as sent (a single request goes to its
        node byte for byte); None for a batch item, encoded on its own."""
        if isinstance(call, InvalidCall):
            return call.failure.http_status, error_response(call.failure, call.id_json), None
        context = CallContext(request, call, encode_call(call) if body is None else body)
        try:
            for stage in self.call_stages:
                pending = stage.run(context)
                if pending is not None:
                    await pending
                if context.scenario is not None:
                    break
            else:
                raise RuntimeError("no call stage ended the call")
        finally:
            for closing in self.closing_stages:
                closing.run(context)
            if request.ended is not None:
                request.ended.append(context)
        if context.repeat_within_s is not None and body is not None and request.ended is None:
            request.forwardable = _forwardable(context)
        return context.status, context.answer, context.retry_after_s


def _replayable(request: RequestContext) -> Replayable | None:
    """Whether the native server may give this answer again to the same request (every call a
    free hit of a final answer, a key without a rate limit of its own: router/replay.py)."""
    access = request.access
    calls = request.calls
    if access is None or request.free_hits != len(calls) or access.rate_limit > 0:
        return None
    methods = tuple(call.method for call in calls if isinstance(call, RpcCall))
    if len(methods) != len(calls):
        return None
    return Replayable(access.customer_id, access.key_id, request.chain_id, methods)


def _forwardable(call: CallContext) -> Forwardable | None:
    """Whether the native server may repeat this call's forward (router/forwards.py): it was
    the whole decision for a single call, served by its first route at the first try; the key
    has no rate limit of its own; the answer is never kept (a kept one comes from the cache
    next time, at the cache's price); not a split `eth_getLogs`; not an `eth_chainId`, whose
    answer the pipeline checks against the chain; a read the router knows (a method it does not
    know may be a write, as for hedges: a call whose repeat failed is sent again by the
    pipeline)."""
    request, route, within_s = call.request, call.served_by, call.repeat_within_s
    access = request.access
    if (
        access is None
        or route is None
        or within_s is None
        or access.rate_limit > 0
        or call.scenario is not Scenario.FIRST_CHOICE
        or call.cache_pin is not None
        or call.split_size
        or call.charged_nano is not None
        or call.call.method == "eth_chainId"
    ):
        return None
    work = work_of(call.call.method)
    if work is Work.UNKNOWN or work is Work.WRITE:
        return None
    return Forwardable(
        access.customer_id,
        access.key_id,
        request.chain_id,
        call.call.method,
        access.bypass_credit_check,
        route,
        work,
        call.needs.at_head,
        call.body,
        within_s,
        call.cache_key if call.flight is not None else None,
        tuple(r.node.node_id for r in call.routes if r.node.node_id != route.node.node_id),
        call.repeat_at_hedge,
    )


def _refused(request: RequestContext, refusal: RpcError) -> bytes:
    """A refused request's answer: once its calls are read (a limit refuses after that), under
    each call's id, a batch as a batch; before, one error with id null."""
    calls = request.calls
    if not calls:
        return error_response(refusal)
    if not request.is_batch:
        return error_response(refusal, calls[0].id_json)
    return batch_response(
        [
            error_response(call.failure if isinstance(call, InvalidCall) else refusal, call.id_json)
            for call in calls
        ]
    )


def _headers(
    request: RequestContext, status: int, retry_s: float | None, cache_header: bool
) -> tuple[tuple[str, str], ...]:
    headers = _retry_after(status, retry_s)
    if request.split_ranges:
        headers += ((SPLIT_HEADER, str(request.split_ranges)),)
    if cache_header:
        hits = request.cache_hits
        state = "MISS" if not hits else "HIT" if hits == len(request.calls) else "PARTIAL"
        headers += ((CACHE_HEADER, state),)
    return headers


def _retry_after(status: int, seconds: float | None) -> tuple[tuple[str, str], ...]:
    """`Retry-After` on a 429 that knows when a retry could succeed: whole seconds, at least 1."""
    if status != 429 or seconds is None:
        return ()
    return (("retry-after", str(max(1, math.ceil(seconds)))),)
