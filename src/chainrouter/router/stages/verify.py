"""Stage: what a call's answer is checked by before it is served (design notes, "Integrity",
Proofs; router/proving.py): by the chain's `verify` setting, a proof for an answer the cache will
keep (or every provable answer), or two providers' agreement where the chain offers no proof. A
key that asks for verified answers gets `always`, whatever the chain's setting.

After the stages that read the block and the cache (what a call is pinned to, whether its answer
is kept), before the attempt, which carries the check out. A call to be checked is never handed
to the native server as a decision (router/stages/attempt.py): each answer needs its own proof.
"""

from __future__ import annotations

from chainrouter.domain.verification import VerifyMode
from chainrouter.router.context import CallContext
from chainrouter.router.proving import Prover, plan


class Verify:
    def __init__(self, prover: Prover) -> None:
        self._mode = prover.mode

    def run(self, call: CallContext) -> None:
        access = call.request.access
        if access is not None and access.verified:
            call.proof = plan(call, VerifyMode.ALWAYS)
        else:
            call.proof = plan(call, self._mode(call.request.chain_id))
