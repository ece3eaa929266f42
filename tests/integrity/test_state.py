"""State reads proven with eth_getProof (integrity/state.py): the balance, nonce, code and
storage of real accounts (a funded sender, a contract with code and storage, an account that
delegates its code, one that never existed) verify against the block's stateRoot; a forged
answer, a proof of another block or address, or a proof node changed raises ProofError."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.integrity import (
    ProofError,
    proof_request,
    verify_account,
    verify_state_answer,
    verify_storage,
)
from tests.integrity.conftest import ABSENT, BLOBBER, DELEGATOR, OTHER, SENDER, Chain

READS: list[tuple[str, list[Any]]] = [
    ("eth_getBalance", []),
    ("eth_getTransactionCount", []),
    ("eth_getCode", []),
    ("eth_getStorageAt", ["0x0"]),
    ("eth_getStorageAt", ["0x1"]),
]


def _accounts(chain: Chain) -> list[str]:
    return [SENDER, OTHER, DELEGATOR, chain.contract, ABSENT]


def _root(chain: Chain, number: int) -> bytes:
    return bytes.fromhex(chain.block(number)["stateRoot"][2:])


def _answer_and_proof(
    chain: Chain, method: str, params: list[Any], number: int
) -> tuple[Any, dict[str, Any]]:
    """What the node answers, and the proof proof_request asks for, at block `number`."""
    result = chain.read(method, [*params, hex(number)])
    proof_method, proof_params = proof_request(method, params, chain.block(number)["hash"])
    return result, chain.read(proof_method, proof_params)


def test_every_state_read_of_real_accounts_verifies(chain: Chain) -> None:
    root = _root(chain, chain.several)
    seen = set()
    for address in _accounts(chain):
        for method, extra in READS:
            params = [address, *extra]
            result, proof = _answer_and_proof(chain, method, params, chain.several)
            verify_state_answer(method, params, result, proof, root)
            seen.add((method, result))
    # The accounts are not all alike: real balances, nonces, code and storage were proven.
    assert ("eth_getStorageAt", "0x" + "00" * 30 + "1234") in seen
    assert len({result for method, result in seen if method == "eth_getCode"}) == 3


def test_the_proven_account_is_what_the_state_holds(chain: Chain) -> None:
    root = _root(chain, chain.several)
    _, proof = _answer_and_proof(chain, "eth_getStorageAt", [chain.contract, "0x1"], chain.several)
    account = verify_account(root, chain.contract, proof)
    assert account.nonce == 1  # a contract starts at nonce 1
    assert not account.empty
    assert verify_storage(account, "0x1", proof["storageProof"][0]) == 0x1234
    _, absent = _answer_and_proof(chain, "eth_getBalance", [ABSENT], chain.several)
    assert verify_account(root, ABSENT, absent).empty


def test_what_a_proof_answer_states_beside_its_proof_is_not_read(chain: Chain) -> None:
    root = _root(chain, chain.several)
    result, proof = _answer_and_proof(chain, "eth_getBalance", [SENDER], chain.several)
    stated = {**proof, "balance": hex(int(result, 16) + 1), "nonce": "0x0"}
    verify_state_answer("eth_getBalance", [SENDER], result, stated, root)
    with pytest.raises(ProofError):
        verify_state_answer("eth_getBalance", [SENDER], stated["balance"], stated, root)


def _forged(method: str, result: str) -> str:
    if method == "eth_getCode":
        return result + "00" if result != "0x" else "0x00"
    if method == "eth_getStorageAt":
        return "0x" + (int(result, 16) + 1).to_bytes(32, "big").hex()
    return hex(int(result, 16) + 1)


@pytest.mark.parametrize(("method", "extra"), READS)
def test_a_forged_answer_of_any_account_fails(chain: Chain, method: str, extra: list[Any]) -> None:
    root = _root(chain, chain.several)
    for address in _accounts(chain):
        params = [address, *extra]
        result, proof = _answer_and_proof(chain, method, params, chain.several)
        with pytest.raises(ProofError):
            verify_state_answer(method, params, _forged(method, result), proof, root)


def test_an_absent_account_claimed_present_fails(chain: Chain) -> None:
    root = _root(chain, chain.several)
    _, proof = _answer_and_proof(chain, "eth_getBalance", [ABSENT], chain.several)
    with pytest.raises(ProofError, match="balance"):
        verify_state_answer("eth_getBalance", [ABSENT], "0x1", proof, root)
    # A proof of a present account's balance does not stand for the absent one.
    _, other = _answer_and_proof(chain, "eth_getBalance", [SENDER], chain.several)
    with pytest.raises(ProofError, match="another address"):
        verify_state_answer("eth_getBalance", [ABSENT], "0x1", {**other}, root)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(claimed=st.integers(0, 2**256 - 1))
def test_only_the_proven_balance_verifies(chain: Chain, claimed: int) -> None:
    root = _root(chain, chain.several)
    result, proof = _answer_and_proof(chain, "eth_getBalance", [SENDER], chain.several)
    if claimed == int(result, 16):
        verify_state_answer("eth_getBalance", [SENDER], hex(claimed), proof, root)
    else:
        with pytest.raises(ProofError):
            verify_state_answer("eth_getBalance", [SENDER], hex(claimed), proof, root)


def test_a_proof_of_another_block_does_not_prove_this_one(chain: Chain) -> None:
    # The blob's sender paid between the two blocks: the old proof and the old answer agree
    # with each other, but not with the later root.
    result, proof = _answer_and_proof(chain, "eth_getBalance", [BLOBBER], chain.several)
    verify_state_answer("eth_getBalance", [BLOBBER], result, proof, _root(chain, chain.several))
    with pytest.raises(ProofError):
        verify_state_answer("eth_getBalance", [BLOBBER], result, proof, _root(chain, chain.blob))


@pytest.mark.parametrize("where", ["accountProof", "storageProof"])
def test_a_changed_proof_node_reaches_no_root(chain: Chain, where: str) -> None:
    root = _root(chain, chain.several)
    params = [chain.contract, "0x0"]
    result, proof = _answer_and_proof(chain, "eth_getStorageAt", params, chain.several)
    if where == "accountProof":
        nodes = list(proof["accountProof"])
        nodes[-1] = nodes[-1][:-2] + ("00" if nodes[-1][-2:] != "00" else "01")
        changed = {**proof, "accountProof": nodes}
    else:
        entry = proof["storageProof"][0]
        nodes = [node[:-2] + ("00" if node[-2:] != "00" else "01") for node in entry["proof"]]
        changed = {**proof, "storageProof": [{**entry, "proof": nodes}]}
    with pytest.raises(ProofError, match="does not reach the root"):
        verify_state_answer("eth_getStorageAt", params, result, changed, root)


def test_a_proof_of_another_slot_does_not_prove_this_one(chain: Chain) -> None:
    root = _root(chain, chain.several)
    _, proof = _answer_and_proof(chain, "eth_getStorageAt", [chain.contract, "0x1"], chain.several)
    with pytest.raises(ProofError, match="slot"):
        verify_state_answer(
            "eth_getStorageAt", [chain.contract, "0x0"], "0x" + "00" * 32, proof, root
        )


def test_the_proof_request_names_the_account_its_slot_and_the_block() -> None:
    block_hash = "0x" + "ab" * 32
    assert proof_request("eth_getBalance", [OTHER, "latest"], block_hash) == (
        "eth_getProof",
        [OTHER, [], {"blockHash": block_hash}],
    )
    assert proof_request("eth_getStorageAt", [OTHER, "0x1", "latest"], 7) == (
        "eth_getProof",
        [OTHER, ["0x" + "00" * 31 + "01"], "0x7"],
    )
    with pytest.raises(ValueError, match="eth_call"):
        proof_request("eth_call", [{}], 7)
