"""Running the stages: the request stages in order, then each call through the call stages.

The pipeline is a program (contract.py): it does no I/O itself, and awaits only what its stages
await, plus `Gather` to serve the calls of a batch at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from chainrouter.jsonrpc.encode import encode_call
from chainrouter.jsonrpc.envelope import InvalidCall, RpcCall
from chainrouter.jsonrpc.errors import RpcError
from chainrouter.jsonrpc.responses import batch_response, error_response
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.contract import Gather
from chainrouter.router.stages import CallStage, RequestStage

_OK = 200


SPLIT_HEADER = "x-logs-split-ranges"  # how many ranges split eth_getLogs calls were asked in
VERIFIED_HEADER = "x-verified"  # proof or agreement: every answer was checked (router/proving.py)
CACHE_HEADER = "x-cache"  # HIT, MISS or PARTIAL (a batch answered from the cache in part)


@dataclass(slots=True)
class Reply:
    status: int
    body: bytes
    batch_id: str
    headers: tuple[tuple[str, str], ...] = ()  # beyond the ones every answer carries
    request: RequestContext | None = None  # the request served, when requests are logged
    # The request served, with its ended calls, when the native server may apply their
    # decisions to later calls (router/fast/decisions.py): keyed, and not logged call by call.
    decidable: RequestContext | None = None


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
        answered_stages: Sequence[CallStage] = (),
        *,
        keep_requests: bool = False,
        hand_decisions: bool = False,
        cache_header: bool = False,
    ) -> None:
        self.request_stages = tuple(request_stages)
        self.call_stages = tuple(call_stages)
        self.closing_stages = tuple(closing_stages)
        # After a call stage ended the call, before the closing ones: they may withhold its
        # answer (the bounds), and may await.
        self.answered_stages = tuple(answered_stages)
        # Hand each request and its ended calls back with the reply, for the request log.
        self.keep_requests = keep_requests
        # Hand them back for decisions (an executor that applies them), when not logged.
        self.hand_decisions = hand_decisions and not keep_requests
        # Say in `X-Cache` whether the answers came from the cache (docs/cache.md).
        self.cache_header = cache_header

    async def serve(self, request: RequestContext) -> Reply:
        # One coroutine for the whole request: each more would cost every request its frame.
        kept = decidable = None
        if self.keep_requests:
            request.ended = []
            kept = request
        elif self.hand_decisions:
            request.ended = []
            decidable = request
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
            status, answer, retry_s = await self._call(request, request.calls[0], request.body, 0)
            headers = _headers(request, status, retry_s, self.cache_header)
            return Reply(status, answer, request.batch_id, headers, kept, decidable)
        results: list[tuple[int, bytes, float | None]] = await Gather(
            [self._call(request, call, None, i) for i, call in enumerate(request.calls)]
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
            decidable,
        )

    async def _call(
        self, request: RequestContext, call: RpcCall | InvalidCall, body: bytes | None, index: int
    ) -> tuple[int, bytes, float | None]:
        """One call's HTTP status, answer and, when it was refused for a limit, the seconds
        until a retry could succeed. `body` is the call as sent (a single request goes to its
        node byte for byte); None for a batch item, encoded on its own."""
        if isinstance(call, InvalidCall):
            return call.failure.http_status, error_response(call.failure, call.id_json), None
        context = CallContext(request, call, encode_call(call) if body is None else body, index)
        try:
            for stage in self.call_stages:
                pending = stage.run(context)
                if pending is not None:
                    await pending
                if context.scenario is not None:
                    break
            else:
                raise RuntimeError("no call stage ended the call")
            for answered in self.answered_stages:
                pending = answered.run(context)
                if pending is not None:
                    await pending
        finally:
            for closing in self.closing_stages:
                closing.run(context)
            if request.ended is not None:
                request.ended.append(context)
        return context.status, context.answer, context.retry_after_s


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
    verified = request.verified_calls
    if verified and verified == len(request.calls):
        how = "proof" if request.proven_calls == verified else "agreement"
        headers += ((VERIFIED_HEADER, how),)
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
