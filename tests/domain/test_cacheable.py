"""What the response cache may keep (domain/cacheable.py): the table, what pins a call, when an
answer is final, the key, and the cache's prices."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.cacheable import (
    CACHEABLE,
    COALESCED,
    CachePrices,
    Pin,
    Pinned,
    cache_key,
    keepable,
    pinned,
)
from chainrouter.domain.requirements import METHODS, Reads
from tests.anvil import REPO_ROOT

ADDRESS = "0x" + "11" * 20
HASH = "0x" + "ab" * 32
FINAL = 1_000


def test_every_method_of_the_table_is_documented_with_its_pin() -> None:
    doc = (REPO_ROOT / "docs" / "cache.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z][a-zA-Z0-9_]+)` \| ([a-z ]+?) \|", doc, re.MULTILINE))
    assert rows == {method: rule.pin.value for method, rule in CACHEABLE.items()}


def test_no_write_and_no_filter_is_ever_cached_or_coalesced() -> None:
    writes = {m for m, spec in METHODS.items() if spec.reads is Reads.WRITE}
    stateful = {"eth_newFilter", "eth_getFilterChanges", "eth_subscribe", "eth_sign"}
    assert not (writes | stateful) & COALESCED
    assert set(CACHEABLE) <= COALESCED


R = CACHEABLE


@pytest.mark.parametrize(
    ("method", "params", "expected"),
    [
        ("eth_chainId", [], Pinned(R["eth_chainId"])),
        ("eth_getBlockByNumber", ["0x10", False], Pinned(R["eth_getBlockByNumber"], 16)),
        ("eth_getBlockByHash", [HASH, False], Pinned(R["eth_getBlockByHash"], by_hash=True)),
        (
            "eth_getBalance",
            [ADDRESS, {"blockHash": HASH}],
            Pinned(R["eth_getBalance"], by_hash=True),
        ),
        ("eth_getBalance", [ADDRESS, {"blockNumber": "0x5"}], Pinned(R["eth_getBalance"], 5)),
        ("eth_getStorageAt", [ADDRESS, "0x0", "0x7"], Pinned(R["eth_getStorageAt"], 7)),
        ("eth_getTransactionReceipt", [HASH], Pinned(R["eth_getTransactionReceipt"])),
        ("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x9"}], Pinned(R["eth_getLogs"], 9)),
        ("eth_getLogs", [{"blockHash": HASH}], Pinned(R["eth_getLogs"], by_hash=True)),
    ],
)
def test_a_call_is_pinned_by_its_block_number_or_hash(
    method: str, params: Any, expected: Pinned
) -> None:
    assert pinned(method, params) == expected


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("eth_getBlockByNumber", ["latest", False]),
        ("eth_getBlockByNumber", ["pending", False]),
        ("eth_getBlockByNumber", ["safe", False]),
        ("eth_getBlockByNumber", ["finalized", False]),
        ("eth_getBlockByNumber", ["earliest", False]),
        ("eth_getBalance", [ADDRESS]),  # no block: the latest
        ("eth_getBalance", [ADDRESS, {"blockNumber": "latest"}]),
        ("eth_getBalance", [ADDRESS, {"blockNumber": "0x1", "blockHash": HASH}]),
        ("eth_getLogs", [{"fromBlock": "0x1"}]),  # toBlock left out: the latest
        ("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "latest"}]),
        ("eth_getLogs", [{"blockHash": HASH, "toBlock": "0x1"}]),
        ("eth_getTransactionReceipt", ["0x12"]),
        ("eth_blockNumber", []),
        ("eth_sendRawTransaction", ["0x00"]),
        ("eth_getBlockByNumber", {"block": "0x1"}),
    ],
)
def test_a_tag_an_omitted_block_or_an_unknown_shape_is_never_kept(method: str, params: Any) -> None:
    assert pinned(method, params) is None


def _pin(method: str, params: Any) -> Pinned:
    found = pinned(method, params)
    assert found is not None
    return found


def test_an_answer_is_kept_only_once_final_and_from_a_node_that_had_the_block() -> None:
    block = _pin("eth_getBalance", [ADDRESS, hex(FINAL)])
    assert keepable(block, "0x0", FINAL, FINAL + 5)
    assert not keepable(block, "0x0", FINAL - 1, FINAL + 5)  # not final yet
    assert not keepable(block, "0x0", None, FINAL + 5)  # finality unknown
    assert not keepable(block, "0x0", FINAL, FINAL - 1)  # the node lagged behind the block
    assert not keepable(block, "0x0", FINAL, None)
    assert not keepable(block, None, FINAL, FINAL + 5)
    code = _pin("eth_getCode", [ADDRESS, hex(FINAL)])
    assert keepable(code, "0x", FINAL, FINAL)  # no code: an answer like any other


def test_by_hash_is_final_at_once_but_an_empty_log_list_proves_nothing() -> None:
    assert keepable(_pin("eth_getBlockByHash", [HASH, False]), {"number": "0x1"}, None, None)
    logs = _pin("eth_getLogs", [{"blockHash": HASH}])
    assert keepable(logs, [{"logIndex": "0x0"}], None, None)
    assert not keepable(logs, [], None, None)
    final_range = _pin("eth_getLogs", [{"fromBlock": "0x1", "toBlock": hex(FINAL)}])
    assert keepable(final_range, [], FINAL, FINAL)


def test_a_transaction_is_kept_once_the_block_it_names_is_final() -> None:
    receipt = _pin("eth_getTransactionReceipt", [HASH])
    assert keepable(receipt, {"blockNumber": hex(FINAL)}, FINAL, None)
    assert not keepable(receipt, {"blockNumber": hex(FINAL + 1)}, FINAL, None)
    assert not keepable(receipt, {"blockNumber": None}, FINAL, None)  # pending
    traces = _pin("trace_transaction", [HASH])
    assert keepable(traces, [{"blockNumber": FINAL}, {"blockNumber": FINAL}], FINAL, None)
    assert not keepable(traces, [], FINAL, None)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(method=st.sampled_from(sorted(COALESCED)), params=JSON)
def test_any_parameters_are_pinned_or_not_without_an_error(method: str, params: Any) -> None:
    found = pinned(method, params)
    assert found is None or found.rule is CACHEABLE[method]
    key = cache_key(1, 0, method, params)
    assert key is None or key.startswith(f"1:0.0:{method}:")


@pytest.mark.parametrize("number", [1.5, 1e30, 2**64, -(2**63) - 1])
def test_parameters_that_parse_inexactly_get_no_key(number: object) -> None:
    """Two such numbers sent differently may parse alike: never one answer for both."""
    assert cache_key(1, 0, "eth_call", [{"value": number}, "0x1"]) is None


hex_strings = st.binary(min_size=1, max_size=32).map(lambda b: "0x" + b.hex())


@given(value=hex_strings, block=st.integers(0, 2**40))
def test_a_key_ignores_hex_case_and_object_key_order(value: str, block: int) -> None:
    one = [{"to": value, "data": value.upper().replace("0X", "0x")}, hex(block)]
    other = [{"data": value, "to": value.lower()}, hex(block)]
    assert cache_key(1, 0, "eth_call", one) == cache_key(1, 0, "eth_call", other)


@given(block=st.integers(0, 2**40), other=st.integers(0, 2**40))
def test_a_key_tells_apart_chains_generations_methods_and_blocks(block: int, other: int) -> None:
    params = [ADDRESS, hex(block)]
    key = cache_key(1, 0, "eth_getBalance", params)
    assert key != cache_key(2, 0, "eth_getBalance", params)
    assert key != cache_key(1, 1, "eth_getBalance", params)
    assert key != cache_key(1, 0, "eth_getCode", params)
    assert (key == cache_key(1, 0, "eth_getBalance", [ADDRESS, hex(other)])) == (block == other)


def test_the_most_specific_cache_price_wins_and_none_is_free() -> None:
    prices = CachePrices({"1:eth_call": 5, "1:*": 4, "*:eth_call": 3, "*": 2})
    assert prices.price_nano(1, "eth_call") == 5
    assert prices.price_nano(1, "eth_getCode") == 4
    assert prices.price_nano(2, "eth_call") == 3
    assert prices.price_nano(2, "eth_getCode") == 2
    assert CachePrices().price_nano(1, "eth_call") == 0
    assert CachePrices({"1:*": 4}).price_nano(2, "eth_call") == 0


def test_every_pin_kind_is_used() -> None:
    assert {rule.pin for rule in CACHEABLE.values()} == set(Pin)


def test_a_state_read_that_requires_the_block_to_stay_canonical_is_never_kept() -> None:
    params = [ADDRESS, {"blockHash": HASH, "requireCanonical": True}]
    assert pinned("eth_getBalance", params) is None
    relaxed = [ADDRESS, {"blockHash": HASH, "requireCanonical": False}]
    assert pinned("eth_getBalance", relaxed) == Pinned(CACHEABLE["eth_getBalance"], by_hash=True)


def test_a_block_trace_with_a_transaction_the_tracer_failed_is_not_final() -> None:
    traced = _pin("debug_traceBlockByNumber", [hex(FINAL), {}])
    good = [{"txHash": HASH, "result": {"gas": 1}}]
    assert keepable(traced, good, FINAL, FINAL)
    assert not keepable(
        traced, [*good, {"txHash": HASH, "error": "execution timeout"}], FINAL, FINAL
    )
    # A reverted call inside a parity trace is the trace itself, as final as the block.
    parity = _pin("trace_block", [hex(FINAL)])
    assert keepable(parity, [{"error": "Reverted", "blockNumber": FINAL}], FINAL, FINAL)


def test_a_key_moves_on_with_the_chains_finality_epoch() -> None:
    params = [ADDRESS, "0x1"]
    assert cache_key(1, 0, "eth_getBalance", params) != cache_key(1, 0, "eth_getBalance", params, 1)
