"""The table of what is provable (integrity/methods.py), which the pipeline reads: every check
it names is a public function of the package, every state read is one proof_request serves, and
what is not provable says why."""

from __future__ import annotations

import chainrouter.integrity as integrity
from chainrouter.integrity import PROOFS, ProofKind, proof_request


def test_every_check_the_table_names_is_a_public_function_of_the_package() -> None:
    for method, plan in PROOFS.items():
        if plan.kind in (ProofKind.NONE, ProofKind.SELF):
            assert plan.check is None, method
        else:
            assert plan.check is not None, method
            assert getattr(integrity, plan.check.__name__) is plan.check, method
        assert plan.why, method


def test_the_state_reads_are_proven_by_the_get_proof_that_proof_request_names() -> None:
    state = [m for m, plan in PROOFS.items() if plan.kind is ProofKind.STATE and plan.fetch]
    assert sorted(state) == sorted(
        ["eth_getBalance", "eth_getCode", "eth_getStorageAt", "eth_getTransactionCount"]
    )
    for method in state:
        assert PROOFS[method].fetch == (proof_request(method, ["0x" + "11" * 20, "0x1"], 1)[0],)


def test_execution_and_heads_are_not_provable() -> None:
    for method in ("eth_call", "eth_estimateGas", "eth_blockNumber"):
        assert PROOFS[method].kind is ProofKind.NONE
