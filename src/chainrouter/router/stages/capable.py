"""Stage: only nodes that can answer the call are tried (router/capabilities.py)."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import NOTHING
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.context import CallContext


class CapableRoutes:
    """The routes whose node falls short of what the call needs are dropped from the order;
    with none left, the call is refused with the error that names the requirement and the best
    that is available (-32011, -32012, -32007, -32005, -32013), unbilled."""

    def __init__(self, book: CapabilityBook) -> None:
        self._book = book

    def run(self, call: CallContext) -> None:
        book = self._book
        if call.needs is NOTHING and not book.any_missing_methods:
            return  # most calls: nothing to check
        method = call.call.method
        candidates = call.ordered
        able, lacking = book.eligible(candidates, call.needs, method)
        if not lacking:
            return
        call.ordered = able
        if able:
            return
        refusal = book.refusal(candidates, call.needs, method, call.request.chain_id, lacking)
        call.end(
            Scenario.INCAPABLE, refusal.http_status, error_response(refusal, call.call.id_json)
        )
