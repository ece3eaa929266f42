"""Whatever shape a node's answer takes, a check ends in a verdict: it holds, or ProofError
says why not. Any one value anywhere in a real block, its receipts, a transaction or a proof
replaced by any JSON value never raises anything else."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.integrity import (
    ProofError,
    proof_request,
    verify_header,
    verify_logs,
    verify_receipt,
    verify_receipts,
    verify_state_answer,
    verify_transaction,
    verify_transactions,
    verify_withdrawals,
)
from tests.integrity.conftest import Chain

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.sampled_from(["", "0x", "0x0", "0x00", "0xzz", "0x" + "ab" * 32, "latest"])
    | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=5,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value, the value itself first."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    changed = copy.deepcopy(value)
    place = changed
    for step in path[:-1]:
        place = place[step]
    place[path[-1]] = new
    return changed


def _judged(check: Callable[[], object]) -> None:
    reason = "holds"
    try:
        check()
    except ProofError as error:
        reason = error.reason
    except Exception as error:
        raise AssertionError(f"not a verdict: {error!r}") from error
    assert reason


SETTINGS = settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(data=st.data(), new=JSON)
def test_a_block_of_any_shape_is_judged(chain: Chain, data: st.DataObject, new: Any) -> None:
    block = chain.block(chain.several, full=True)
    path = data.draw(st.sampled_from(_paths(block)))
    changed = _replaced(block, path, new)
    _judged(lambda: verify_header(changed))
    _judged(lambda: verify_transactions(changed))
    _judged(lambda: verify_withdrawals(changed))
    tx = block["transactions"][0]
    claimed = _replaced(tx, data.draw(st.sampled_from(_paths(tx))), new)
    _judged(lambda: verify_transaction(block, tx["hash"], claimed))


@SETTINGS
@given(data=st.data(), new=JSON)
def test_receipts_of_any_shape_are_judged(chain: Chain, data: st.DataObject, new: Any) -> None:
    block, receipts = chain.block(chain.several, full=True), chain.receipts(chain.several)
    path = data.draw(st.sampled_from(_paths(receipts)))
    changed = _replaced(receipts, path, new)
    _judged(lambda: verify_receipts(block, changed))
    tx_hash = receipts[2]["transactionHash"]
    claimed = changed[2] if isinstance(changed, list) and len(changed) > 2 else changed
    _judged(lambda: verify_receipt(block, receipts, tx_hash, claimed))
    _judged(lambda: verify_receipt(block, changed, tx_hash, receipts[2]))


@pytest.mark.parametrize("method", ["eth_getBalance", "eth_getStorageAt", "eth_getCode"])
@SETTINGS
@given(data=st.data(), new=JSON)
def test_a_proof_of_any_shape_is_judged(
    chain: Chain, method: str, data: st.DataObject, new: Any
) -> None:
    block = chain.block(chain.several)
    params = [chain.contract, "0x1"] if method == "eth_getStorageAt" else [chain.contract]
    result = chain.read(method, [*params, hex(chain.several)])
    proof = chain.read(*proof_request(method, params, block["hash"]))
    root = bytes.fromhex(block["stateRoot"][2:])
    path = data.draw(st.sampled_from(_paths(proof)))
    changed = _replaced(proof, path, new)
    _judged(lambda: verify_state_answer(method, params, result, changed, root))
    _judged(lambda: verify_state_answer(method, params, new, proof, root))
    _judged(lambda: verify_state_answer(method, [new, *params[1:]], result, proof, root))


@SETTINGS
@given(data=st.data(), new=JSON)
def test_logs_and_filters_of_any_shape_are_judged(
    chain: Chain, data: st.DataObject, new: Any
) -> None:
    query = {"fromBlock": "0x0", "toBlock": hex(chain.several), "topics": [None]}
    blocks = [(chain.block(n, full=True), chain.receipts(n)) for n in range(chain.several + 1)]
    answer = chain.read("eth_getLogs", [query])
    changed = _replaced(answer, data.draw(st.sampled_from(_paths(answer))), new)
    _judged(lambda: verify_logs(blocks, query, changed))
    odd = _replaced(query, data.draw(st.sampled_from(_paths(query))), new)
    _judged(lambda: verify_logs(blocks, odd, answer))
