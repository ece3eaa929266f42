"""Stage of consistent heads: a key that saw block N reads the head from a node at or past N,
and is never told an older head (router/seen_heads.py; the ledger records what each key saw:
router/ledger.py; what an answer must show: router/belief.py)."""

from __future__ import annotations

from dataclasses import replace

from chainrouter.router import epochs
from chainrouter.router.belief import HEAD_METHOD
from chainrouter.router.context import CallContext
from chainrouter.router.epochs import Epochs
from chainrouter.router.health import HealthMonitor
from chainrouter.router.seen_heads import SeenHeads


class NotBehindSeen:
    """A call that reads the head (`latest`, `pending`, no block, `eth_blockNumber`) from a key
    that has seen block N goes only to nodes known to be at or past N, while there is one; if
    none is, the order stands (the client gets an answer rather than an error). An
    `eth_blockNumber` older than N is not believed while another node may answer."""

    def __init__(self, seen: SeenHeads, health: HealthMonitor, epoch_store: Epochs) -> None:
        self._seen = seen
        self._node_head = health.node_head
        self._epochs = epoch_store

    def run(self, call: CallContext) -> None:
        access = call.request.access
        if access is None or not call.needs.at_head:
            return
        chain_id = call.request.chain_id
        # Read before what they count: a change in between drops the decision at first use.
        call.read_epoch(self._epochs, epochs.seen(access.key_id))
        call.read_epoch(self._epochs, epochs.chain_heads(chain_id))
        seen = call.seen_head = self._seen.seen(access.key_id, chain_id)
        if seen is None:
            return
        if call.call.method == HEAD_METHOD:
            expected = call.expected
            if expected.head_from is None or expected.head_from < seen:
                call.expected = replace(expected, head_from=seen)
        node_head = self._node_head
        ordered = call.ordered
        if (node_head(ordered[0].node.node_id) or -1) >= seen:
            return  # the usual case: the first choice is caught up
        caught_up = [r for r in ordered if (node_head(r.node.node_id) or -1) >= seen]
        if caught_up and len(caught_up) < len(ordered):
            call.ordered = caught_up
