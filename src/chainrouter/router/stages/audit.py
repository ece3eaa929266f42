"""Closing stage: a sampled share of the answers nodes gave is audited (router/audits.py): asked
again of another provider's node, off the answer's path; the client's answer never waits for it.

The stage must see every call (design notes, "The fast path: scoped decisions"), the calls the
native server serves under decisions too, which the pipeline never sees. It does, without a
second copy of its rule: the decision carries the share the stage chose for its node
(`Decision.audit_every`, from `every` here), the server only counts the calls it serves under the
decision and hands every n-th to the ledger as a `Receipt` with the call's bytes, however plain
the node's answer, and the settling (router/fast/settle.py) hands each one it serves to
`receipt` here. The pipeline's own calls are drawn at the node's rate as they close (`run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import BadParamsError, needs_anything, needs_of
from chainrouter.domain.routing import NodeInfo
from chainrouter.router.audits import Auditor, Sample, comparable
from chainrouter.router.context import CallContext
from chainrouter.router.contract import Receipt
from chainrouter.router.ledger import Booking

_SERVED = frozenset({Scenario.FIRST_CHOICE, Scenario.FAILOVER, Scenario.HEDGED})
_UNKNOWN_DEPTH = 64  # blocks behind the chain's head taken as final when finality is unknown


class Audit:
    """Closing: offer a sampled share of the answers nodes gave to the auditor."""

    def __init__(
        self,
        auditor: Auditor,
        finalized: Callable[[int], int | None],
    ) -> None:
        self.auditor = auditor
        self._finalized = finalized  # each chain's finalized block (router/finality.py)

    def run(self, call: CallContext) -> None:
        route = call.served_by
        if (
            route is None
            or call.scenario not in _SERVED
            or call.status != 200
            or call.split_size
            or call.tx_hash is not None
        ):
            return
        node = route.node
        if not self.auditor.draws(node):
            return
        rpc = call.call
        self._offer(call.request.chain_id, rpc.method, rpc.params, call.body, call.answer, node)

    def every(self, node: NodeInfo, method: str, params: Any) -> int:
        """What a decision for this call on this node carries: every n-th call it serves is
        sampled (0: none, for a call whose answers are never compared)."""
        if not comparable(method, params):
            return 0
        return self.auditor.every(node)

    def receipt(self, receipt: Receipt) -> None:
        """A call the native server served under a decision, sampled by it (`audited`)."""
        body, answer = receipt.audited, receipt.answer
        booking = receipt.decision.booking
        if body is None or answer is None or not isinstance(booking, Booking):
            return
        node = booking.node
        if node is None:
            return
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return
        if not isinstance(parsed, dict):
            return
        self._offer(booking.chain_id, booking.method, parsed.get("params"), body, answer, node)

    def _offer(
        self, chain_id: int, method: str, params: Any, body: bytes, answer: bytes, node: NodeInfo
    ) -> None:
        if not comparable(method, params):
            return
        final = self._final(chain_id, method, params)
        self.auditor.offer(Sample(chain_id, method, params, body, answer, node, final))

    def _final(self, chain_id: int, method: str, params: Any) -> bool:
        """Whether every block the call names is at or below the chain's finalized block."""
        if not needs_anything(method):
            return True
        try:
            blocks = needs_of(method, params, None).blocks
        except BadParamsError:
            return False
        if not blocks:
            return True  # named by hash: what it names never changes
        finalized = self._finalized(chain_id)
        return finalized is not None and max(blocks) <= finalized


def finalized_from(
    finality: Callable[[int], int | None] | None, chain_head: Callable[[int], int | None]
) -> Callable[[int], int | None]:
    """The chains' finalized blocks: the cache's finality where there is one, else a fixed depth
    behind the chain's head."""
    if finality is not None:
        return finality

    def behind_head(chain_id: int) -> int | None:
        head = chain_head(chain_id)
        return None if head is None else head - _UNKNOWN_DEPTH

    return behind_head
