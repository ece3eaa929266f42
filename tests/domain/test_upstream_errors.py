"""The node's fault or the caller's answer (domain/upstream_errors.py): one table read against
the errors real nodes and providers send."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.upstream_errors import Fault, classify, stated_limit


@pytest.mark.parametrize(
    ("code", "message", "fault"),
    [
        # anvil --prune-history, geth, erigon, nethermind, reth
        (
            -32602,
            "BlockOutOfRangeError: block height is 20 but requested was 1",
            Fault.STATE_MISSING,
        ),
        (-32000, "missing trie node 0x1c2d... (path ) <nil>", Fault.STATE_MISSING),
        (-32000, "required historical state unavailable (reexec=128)", Fault.STATE_MISSING),
        (-32000, "state at block #1000 is pruned", Fault.STATE_MISSING),
        (-32000, "header not found", Fault.BLOCK_MISSING),
        (-32000, "pruned history unavailable", Fault.BLOCK_MISSING),
        (-32601, "the method trace_block does not exist/is not available", Fault.METHOD_MISSING),
        (-32601, "Method not found", Fault.METHOD_MISSING),
        (-32000, "method debug_traceTransaction not enabled", Fault.METHOD_MISSING),
        (-32005, "eth_getLogs is limited to a 10,000 block range", Fault.RANGE_LIMIT),
        (-32000, "exceed maximum block range: 5000", Fault.RANGE_LIMIT),
        (-32005, "query returned more than 10000 results", Fault.RESULT_LIMIT),
        (
            -32602,
            "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block "
            "range and no limit on the response size",
            Fault.RESULT_LIMIT,
        ),
        (-32005, "daily request count exceeded, request rate limited", Fault.RATE_LIMITED),
        (429, "Too Many Requests", Fault.RATE_LIMITED),
        (-32603, "internal error", Fault.NODE_ERROR),
    ],
)
def test_errors_that_mean_the_node_cannot_serve_the_call(
    code: int, message: str, fault: Fault
) -> None:
    found = classify({"code": code, "message": message})
    assert found is not None
    assert found.fault is fault


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (3, "execution reverted: ERC20: transfer amount exceeds balance"),
        (-32000, "execution reverted"),
        (-32000, "nonce too low"),
        (-32000, "insufficient funds for gas * price + value"),
        (-32000, "invalid block range params"),
        (-32602, "invalid argument 0: hex string without 0x prefix"),
        (-32000, "already known"),
    ],
)
def test_errors_that_are_the_answer(code: int, message: str) -> None:
    assert classify({"code": code, "message": message}) is None


@pytest.mark.parametrize(
    ("message", "limit"),
    [
        ("eth_getLogs is limited to a 10,000 block range", 10_000),
        ("You can make eth_getLogs requests with up to a 2K block range", 2_000),
        ("exceed maximum block range: 5000", 5_000),
        ("block range too large: this node serves eth_getLogs over at most 10 blocks", 10),
        ("block range too large", None),
    ],
)
def test_a_stated_range_limit_is_read(message: str, limit: int | None) -> None:
    assert stated_limit(message) == limit


@given(st.one_of(st.none(), st.integers(), st.text(), st.dictionaries(st.text(), st.text())))
def test_any_error_object_is_classified_without_crashing(error: object) -> None:
    classify(error)
    classify({"code": -32000, "message": error})
