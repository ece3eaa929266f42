"""Stage: only nodes that can answer the call are tried (router/capabilities.py)."""

from __future__ import annotations

from collections.abc import Sequence

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import AT_HEAD, NOTHING, logs_span
from chainrouter.domain.routing import Route
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.capabilities import CapabilityBook, Shortfall
from chainrouter.router.context import CallContext


class CapableRoutes:
    """The routes whose node falls short of what the call needs are dropped from the order;
    with none left, the call is refused with the error that names the requirement and the best
    that is available (-32011, -32012, -32007, -32005, -32013), unbilled.

    An `eth_getLogs` range that every node lacks only because it is wider than each node's own
    limit is split instead, in ranges as wide as the widest limit, when that takes at most
    `split_max_parts` ranges (the attempt stage asks them; router/stages/attempt.py)."""

    def __init__(self, book: CapabilityBook, split_max_parts: int) -> None:
        self._book = book
        self._split_max_parts = split_max_parts

    def run(self, call: CallContext) -> None:
        book = self._book
        needs = call.needs
        if (needs is NOTHING or needs is AT_HEAD) and not book.any_missing_methods:
            return  # most calls: nothing to check
        method = call.call.method
        candidates = call.ordered
        able, lacking = book.eligible(candidates, call.needs, method)
        if not lacking:
            return
        call.ordered = able
        if able:
            return
        if self._split(call, candidates, lacking):
            return
        refusal = book.refusal(candidates, call.needs, method, call.request.chain_id, lacking)
        call.end(
            Scenario.INCAPABLE, refusal.http_status, error_response(refusal, call.call.id_json)
        )

    def _split(
        self, call: CallContext, candidates: Sequence[Route], lacking: list[frozenset[Shortfall]]
    ) -> bool:
        if call.call.method != "eth_getLogs" or any(m != _RANGE_ONLY for m in lacking):
            return False
        span = logs_span(call.needs)
        widest = max((self._book.of(r.node).logs_max_range or 0) for r in candidates)
        if span is None or widest < 1 or -(-span // widest) > self._split_max_parts:
            return False
        call.split_size = widest
        call.ordered = candidates
        return True


_RANGE_ONLY = frozenset({Shortfall.LOGS_RANGE})
