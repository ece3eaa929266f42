"""Stage: what a call's answer is checked by before it is served (design notes, "Integrity",
Proofs; router/proving.py): by the chain's `verify` setting, a proof for an answer the cache will
keep (or every provable answer), or two providers' agreement where the chain offers no proof. A
key that asks for verified answers gets `always`, whatever the chain's setting.

A read of `latest` to be proven is pinned to the lowest head among its nodes first (what
`latest` then reads: router/proving.py). After the stages that read the block and the cache
(what a call is pinned to, whether its answer is kept) and that choose its nodes by their
heads, before the attempt, which carries the check out. A call to be checked is never handed
to the native server as a decision (router/stages/attempt.py): each answer needs its own proof.
"""

from __future__ import annotations

from chainrouter.domain.verification import VerifyMode
from chainrouter.router.context import CallContext
from chainrouter.router.health import HealthMonitor
from chainrouter.router.proving import Prover, latest_block, pin_latest, plan


class Verify:
    def __init__(self, prover: Prover, health: HealthMonitor) -> None:
        self._mode = prover.mode
        self._node_head = health.node_head

    def run(self, call: CallContext) -> None:
        access = call.request.access
        if access is not None and access.verified:
            mode = VerifyMode.ALWAYS
        else:
            mode = self._mode(call.request.chain_id)
        latest = None
        if mode is VerifyMode.ALWAYS and call.needs.at_head:
            latest = latest_block(call, self._node_head)
        proof = call.proof = plan(call, mode, latest)
        if proof is not None and proof.pins_latest:
            assert isinstance(proof.block, int)
            pin_latest(call, proof.block)
