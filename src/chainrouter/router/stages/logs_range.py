"""Stage: the router's own `eth_getLogs` block-range limit: wide ranges are refused before they
reach a node.

A range is checked when both ends are known (domain/requirements.py): hex block numbers,
`earliest` (0), and `latest`, `safe`, `finalized` or `pending` (the chain head, when the health
checker knows it). Queries by `blockHash`, and ends the router cannot read, are left to the
nodes. Each node's own, narrower limit is a capability (router/capabilities.py).
"""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import logs_span
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.capabilities import logs_range_refusal
from chainrouter.router.context import CallContext

LOGS_METHOD = "eth_getLogs"  # the one method the rule applies to


class LogsRange:
    """A range over `max_range` blocks is answered -32005 "... try a block range of at most N
    blocks" with `data` N, and HTTP 200 like a node's own answer, so that clients (and libraries
    that split ranges on this message) see the code and the hint."""

    def __init__(self, max_range: int) -> None:
        self._max_range = max_range

    def run(self, call: CallContext) -> None:
        if call.call.method != LOGS_METHOD:
            return
        span = logs_span(call.needs)
        if span is not None and span > self._max_range:
            problem = logs_range_refusal(span, self._max_range)
            call.end(Scenario.REFUSED, 200, error_response(problem, call.call.id_json))
