"""Stages of consistent heads: a key that saw block N reads the head from a node at or past N
(router/seen_heads.py)."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.router.context import CallContext
from chainrouter.router.health import HealthMonitor
from chainrouter.router.seen_heads import SeenHeads

HEAD_METHOD = "eth_blockNumber"  # the answers that tell a key's head
_SERVED = (Scenario.FIRST_CHOICE, Scenario.FAILOVER, Scenario.HEDGED)
_JOINED = Scenario.CACHE  # eth_blockNumber is never kept: a cache answer to it is a joined one


class NotBehindSeen:
    """A call that reads the head (`latest`, `pending`, no block, `eth_blockNumber`) from a key
    that has seen block N goes only to nodes known to be at or past N, while there is one; if
    none is, the order stands (the client gets an answer rather than an error)."""

    def __init__(self, seen: SeenHeads, health: HealthMonitor) -> None:
        self._seen = seen
        self._node_head = health.node_head
        self._chain_head = health.chain_head

    def run(self, call: CallContext) -> None:
        access = call.request.access
        if access is None or not call.needs.at_head:
            return
        chain_id = call.request.chain_id
        seen = self._seen.seen(access.key_id, chain_id)
        if seen is None:
            return
        chain_head = self._chain_head(chain_id)
        if chain_head is None or chain_head < seen:
            return  # no node is known to be at or past it: the order stands
        node_head = self._node_head
        ordered = call.ordered
        if (node_head(ordered[0].node.node_id) or -1) >= seen:
            return  # the usual case: the first choice is caught up
        caught_up = [r for r in ordered if (node_head(r.node.node_id) or -1) >= seen]
        if caught_up and len(caught_up) < len(ordered):
            call.ordered = caught_up


class SeeHead:
    """Closing: an `eth_blockNumber` a node served tells the key's newest block, and that
    node's head; one answered by joining an identical call in flight tells the key's block."""

    def __init__(self, seen: SeenHeads) -> None:
        self._seen = seen

    def run(self, call: CallContext) -> None:
        served_by = call.served_by
        access = call.request.access
        if access is None or call.call.method != HEAD_METHOD:
            return
        # Served by a node, or by joining an identical call in flight (no node of its own).
        if not ((call.scenario in _SERVED and served_by is not None) or call.scenario is _JOINED):
            return
        block = head_in(call.answer)
        if block is None:
            return
        seen = self._seen.seen(access.key_id, call.request.chain_id)
        if seen is None or block > seen:  # else nothing new: no write
            node = None if served_by is None else served_by.node
            self._seen.saw(access.key_id, call.request.chain_id, block, node)


def head_in(answer: bytes) -> int | None:
    """The block number of an `eth_blockNumber` answer, read without a JSON parse: the answer
    is small and its result the one hex string after `"result":`."""
    start = answer.find(b'"result":"0x')
    if start < 0:
        return None
    start += len(b'"result":"0x')
    end = answer.find(b'"', start)
    digits = answer[start:end]
    if not 0 < len(digits) <= 16:
        return None
    try:
        return int(digits, 16)
    except ValueError:
        return None
