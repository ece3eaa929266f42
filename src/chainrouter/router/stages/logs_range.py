"""Stage: the `eth_getLogs` block-range rule: wide ranges are refused before they reach a node.

A range is checked when both ends are known: hex block numbers, `earliest` (0), and `latest`,
`safe`, `finalized` or `pending` (the chain head, when the health checker knows it). Queries by
`blockHash`, and ends the router cannot read, are left for the node to judge.
"""

from __future__ import annotations

from typing import Any

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.envelope import RpcCall
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext
from chainrouter.router.health import HealthMonitor

LOGS_METHOD = "eth_getLogs"  # the one method the rule applies to
_HEAD_TAGS = frozenset({"latest", "safe", "finalized", "pending"})


def _block(value: Any, head: int | None) -> int | None:
    if not isinstance(value, str):
        return None
    if value in _HEAD_TAGS:
        return head
    if value == "earliest":
        return 0
    if value.startswith("0x") and 2 < len(value) <= 18:
        try:
            return int(value, 16)
        except ValueError:
            return None
    return None


def logs_range_problem(call: RpcCall, max_range: int, head: int | None) -> RpcError | None:
    """What is wrong with an `eth_getLogs` call's range, if anything."""
    params = call.params
    if not isinstance(params, list) or not params or not isinstance(params[0], dict):
        return None
    query: dict[str, Any] = params[0]
    if "blockHash" in query:
        return None
    start = _block(query.get("fromBlock", "latest"), head)
    end = _block(query.get("toBlock", "latest"), head)
    if start is None or end is None or end < start:
        return None
    span = end - start + 1
    if span <= max_range:
        return None
    return RpcError(
        200,
        RpcCode.LOG_RANGE_TOO_LARGE,
        f"eth_getLogs over {span} blocks exceeds the limit; "
        f"try a block range of at most {max_range} blocks",
        data=max_range,
    )


class LogsRange:
    """A range over `max_range` blocks is answered -32005 "... try a block range of at most N
    blocks" with `data` N, and HTTP 200 like a node's own answer, so that clients (and libraries
    that split ranges on this message) see the code and the hint."""

    def __init__(self, max_range: int, health: HealthMonitor) -> None:
        self._max_range = max_range
        self._health = health

    def run(self, call: CallContext) -> None:
        if call.call.method != LOGS_METHOD:
            return
        chain_head = self._health.chain_head(call.request.chain_id)
        problem = logs_range_problem(call.call, self._max_range, chain_head)
        if problem is not None:
            call.end(Scenario.REFUSED, 200, error_response(problem, call.call.id_json))
