"""What a call needs of a node, read from its method and parameters (domain/requirements.py):
the method table, the block parameter in every form, and the caller's errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.requirements import (
    AT_HEAD,
    METHODS,
    NOTHING,
    BadParamsError,
    Needs,
    Reads,
    Work,
    logs_span,
    needs_of,
    work_of,
)

ADDRESS = "0x" + "11" * 20
HASH = "0x" + "ab" * 32


@pytest.mark.parametrize(
    ("method", "params", "needs"),
    [
        ("eth_getBalance", [ADDRESS, "0x64"], Needs(state_at=100)),
        ("eth_getCode", [ADDRESS, "earliest"], Needs(state_at=0)),
        ("eth_getStorageAt", [ADDRESS, "0x0", "0x10"], Needs(state_at=16)),
        ("eth_call", [{"to": ADDRESS}, {"blockNumber": "0x5"}], Needs(state_at=5)),
        ("eth_call", [{"to": ADDRESS}], AT_HEAD),  # no block: latest
        ("eth_getProof", [ADDRESS, [], "0x7"], Needs(state_at=7)),
        ("eth_getBalance", [ADDRESS, "latest"], AT_HEAD),
        ("eth_getBalance", [ADDRESS, {"blockNumber": "pending"}], AT_HEAD),
        ("eth_getBalance", [ADDRESS, "finalized"], NOTHING),  # behind the head: nodes know where
        ("eth_getBalance", [ADDRESS, {"blockHash": HASH}], NOTHING),
        ("eth_getBlockByNumber", ["0x9", False], Needs(history_from=9, history_to=9)),
        ("eth_getBlockReceipts", ["0x9"], Needs(history_from=9, history_to=9)),
        (
            "trace_block",
            ["0x9"],
            Needs(state_at=8, history_from=9, history_to=9, namespace="trace"),
        ),
        (
            "debug_traceBlockByNumber",
            ["0x0", {}],
            Needs(state_at=0, history_from=0, history_to=0, namespace="debug"),
        ),
        (
            "debug_traceCall",
            [{"to": ADDRESS}, "0x3", {}],
            Needs(state_at=3, history_from=3, history_to=3, namespace="debug"),
        ),
        ("trace_transaction", [HASH], Needs(namespace="trace")),
        ("debug_traceTransaction", [HASH], Needs(namespace="debug")),
        ("debug_getRawBlock", ["0x1"], Needs(namespace="debug")),
        ("eth_sendRawTransaction", ["0x02f8"], Needs(write=True)),
        ("eth_blockNumber", [], AT_HEAD),
        ("eth_chainId", [], NOTHING),
        ("eth_getTransactionReceipt", [HASH], NOTHING),
        (
            "eth_getLogs",
            [{"fromBlock": "0x1", "toBlock": "0xa"}],
            Needs(history_from=1, history_to=10),
        ),
        ("eth_getLogs", [{"blockHash": HASH}], NOTHING),
        (
            "eth_getLogs",
            [{"fromBlock": "latest"}],
            Needs(history_from=500, history_to=500, at_head=True),
        ),
        (
            "eth_getLogs",
            [{"fromBlock": "0x1", "toBlock": "finalized"}],
            Needs(history_from=1, history_to=500),
        ),
    ],
)
def test_each_method_needs_what_the_table_says(method: str, params: Any, needs: Needs) -> None:
    assert needs_of(method, params, 500) == needs


def test_the_table_names_a_block_parameter_for_every_state_and_trace_reader() -> None:
    for method, spec in METHODS.items():
        if spec.reads is Reads.STATE:
            assert spec.block_param is not None, method
        if spec.reads is Reads.TRACE:
            assert spec.namespace in ("trace", "debug"), method


@pytest.mark.parametrize(
    "block",
    [
        "0x",
        "0xg",
        "0x1ffffffffffffffff",  # beyond 64 bits
        "12",
        "Latest",
        12,
        None,
        True,
        [],
        {},
        {"blockNumber": "0x1", "blockHash": HASH},
        {"blockNumber": 5},
        {"blockHash": "0x1234"},
        {"blockHash": HASH, "requireCanonical": "yes"},
    ],
)
def test_a_malformed_block_parameter_is_the_callers_error(block: Any) -> None:
    with pytest.raises(BadParamsError):
        needs_of("eth_getBalance", [ADDRESS, block], 10)


def test_params_given_by_name_are_left_to_the_node() -> None:
    assert needs_of("eth_getBalance", {"address": ADDRESS}, 10) is NOTHING


@pytest.mark.parametrize(
    ("query", "span"),
    [
        ({"fromBlock": "0x0", "toBlock": "0x9"}, 10),
        ({"fromBlock": "earliest", "toBlock": "latest"}, 101),
        ({"fromBlock": "0x64"}, 1),
        ({"fromBlock": "0x10", "toBlock": "0x1"}, None),  # reversed: the node's error
    ],
)
def test_a_log_range_spans_its_blocks(query: dict[str, str], span: int | None) -> None:
    assert logs_span(needs_of("eth_getLogs", [query], 100)) == span


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=10,
)


@given(st.sampled_from([*sorted(METHODS), "trace_x", "debug_x", "eth_x"]), _json, _json)
def test_any_params_give_needs_or_the_callers_error(method: str, first: Any, second: Any) -> None:
    try:
        needs = needs_of(method, [first, second, second], 1_000)
    except BadParamsError:
        return
    for block in needs.blocks:
        assert 0 <= block < 1 << 64


@given(st.integers(0, (1 << 64) - 1))
def test_every_64_bit_block_number_reads_back(number: int) -> None:
    assert needs_of("eth_getBalance", [ADDRESS, hex(number)], None) == Needs(state_at=number)


@pytest.mark.parametrize(
    ("method", "work"),
    [
        ("eth_blockNumber", Work.QUICK),
        ("eth_getBalance", Work.QUICK),
        ("eth_getTransactionReceipt", Work.QUICK),
        ("eth_getBlockByNumber", Work.QUICK),
        ("eth_chainId", Work.QUICK),
        ("eth_call", Work.EXECUTES),
        ("eth_estimateGas", Work.EXECUTES),
        ("eth_getLogs", Work.RANGE),
        ("eth_getBlockReceipts", Work.RANGE),
        ("trace_block", Work.TRACE),
        ("debug_traceTransaction", Work.TRACE),
        ("trace_anythingNew", Work.TRACE),
        ("eth_sendRawTransaction", Work.WRITE),
        ("eth_sendTransaction", Work.WRITE),
        ("eth_sendBundle", Work.UNKNOWN),
        ("custom_lookup", Work.UNKNOWN),
    ],
)
def test_each_method_asks_the_work_the_tables_say(method: str, work: Work) -> None:
    assert work_of(method) is work


def test_every_write_in_the_method_table_is_a_write_to_work_of() -> None:
    writes = [m for m, spec in METHODS.items() if spec.reads is Reads.WRITE]
    assert writes
    assert all(work_of(m) is Work.WRITE for m in writes)
