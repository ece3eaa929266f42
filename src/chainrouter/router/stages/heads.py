"""Stage: a node serves only what it can have (design notes, "Integrity"; router/health.py keeps
each node's head and the chain's).

- A call pinned to block N (a number, `earliest`, a log range's upper end, `latest` in a log
  range read as the chain's head) goes only to nodes whose head is at or past N. Past every
  node's head, it goes to the nodes at the highest head, and the client gets what they answer
  (`null`, or their own error): not yet, rather than a router's error.
- A call that reads the head (`latest`, `pending`, no block, `eth_blockNumber`) goes only to
  nodes not lagging, that is no more than the chain's `max_block_lag` behind its head.
- What an answer must then show to be believed (router/belief.py): an `eth_blockNumber` of at
  least the chain's head less that lag; an absence (`null`, no logs) only from a node at the
  chain's head.
Where no node qualifies the order stands: the client gets an answer rather than an error.
"""

from __future__ import annotations

from chainrouter.domain.requirements import AT_HEAD, NOTHING
from chainrouter.router import epochs
from chainrouter.router.belief import ABSENT_WHEN, HEAD_METHOD, Expected
from chainrouter.router.context import CallContext
from chainrouter.router.epochs import Epochs
from chainrouter.router.health import HealthMonitor


class HasTheBlock:
    def __init__(self, health: HealthMonitor, epoch_store: Epochs) -> None:
        self._node_head = health.node_head
        self._chain_head = health.chain_head
        self._lagging = health.lagging  # a live view; a change raises the node's epoch
        self._max_lag = health.max_lag
        self._epochs = epoch_store

    def run(self, call: CallContext) -> None:
        needs, method = call.needs, call.call.method
        absence = method in ABSENT_WHEN
        if needs is NOTHING and not absence:
            return  # most calls: nothing pinned, nothing read at the head
        chain_id = call.request.chain_id
        # Read before what they count: a change in between drops the decision at first use.
        call.read_epoch(self._epochs, epochs.chain_heads(chain_id))
        chain_head = self._chain_head(chain_id)
        if chain_head is None:
            return  # no node has told its head yet: nothing to hold a node to
        newest = max(needs.blocks, default=None) if needs is not AT_HEAD else None
        if newest is not None:
            self._at_or_past(call, newest)
        elif needs.at_head:
            self._not_lagging(call)
        head_from = chain_head - self._max_lag(chain_id) if method == HEAD_METHOD else None
        present_from = chain_head if absence else None
        if head_from is not None or present_from is not None:
            call.expected = Expected(head_from=head_from, present_from=present_from)

    def _at_or_past(self, call: CallContext, block: int) -> None:
        node_head = self._node_head
        ordered = call.ordered
        heads = [node_head(route.node.node_id) for route in ordered]
        if all(head is not None and head >= block for head in heads):
            return  # the usual case: every node has it
        having = [
            route for route, head in zip(ordered, heads, strict=True) if (head or -1) >= block
        ]
        if not having:  # past every node's head: those at the highest say what they have
            highest = max((head for head in heads if head is not None), default=None)
            if highest is None:
                return
            having = [route for route, head in zip(ordered, heads, strict=True) if head == highest]
        call.ordered = having

    def _not_lagging(self, call: CallContext) -> None:
        lagging = self._lagging
        if not lagging:
            return
        ordered = call.ordered
        keeping = [route for route in ordered if route.node.node_id not in lagging]
        if keeping and len(keeping) < len(ordered):
            call.ordered = keeping
