"""The subscription protocol (router/ws/protocol.py): what `eth_subscribe` accepts, how a logs
filter matches (as geth's: addresses any-of, topics by position, null any), notifications in the
`eth_subscription` shape; every malformed input is -32602, never another error (hypothesis)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.ws.protocol import (
    LogFilter,
    Subscribe,
    SubscriptionKind,
    notification,
    read_log_filter,
    read_subscribe,
    read_unsubscribe,
)

A1, A2 = "0x" + "aa" * 20, "0x" + "bb" * 20
T1, T2, T3 = "0x" + "11" * 32, "0x" + "22" * 32, "0x" + "33" * 32


def _log(address: str = A1, topics: list[str] | None = None) -> dict[str, Any]:
    return {"address": address, "topics": topics if topics is not None else [T1, T2]}


def test_the_three_kinds_are_read() -> None:
    assert read_subscribe(["newHeads"]) == Subscribe(SubscriptionKind.NEW_HEADS)
    assert read_subscribe(["newPendingTransactions"]) == Subscribe(
        SubscriptionKind.NEW_PENDING_TRANSACTIONS
    )
    logs = read_subscribe(["logs", {"address": A1.upper().replace("0X", "0x"), "topics": [T1]}])
    assert logs.log_filter == LogFilter(frozenset({A1}), (frozenset({T1}),))
    assert read_subscribe(["logs"]).log_filter == LogFilter()


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ([], "eth_subscribe takes"),
        (["newBlocks"], "unknown subscription 'newBlocks'"),
        (["newHeads", {"x": 1}], "newHeads takes no filter"),
        (["logs", {"address": "0x12"}], "is not a 20-byte hex address"),
        (["logs", {"address": []}], "address is an address or a list of 1 to"),
        (["logs", {"topics": [T1, T1, T1, T1, T1]}], "at most 4 positions"),
        (["logs", {"topics": ["0x1"]}], "is not a 32-byte hex topic"),
        (["logs", {"fromBlock": "0x1"}], "no fromBlock, toBlock or blockHash"),
        (["logs", {"adress": A1}], "not 'adress'"),
        (["logs", {}, {}], "logs takes one filter"),
    ],
)
def test_a_malformed_subscription_is_invalid_params_saying_what(params: Any, says: str) -> None:
    with pytest.raises(RpcError) as refused:
        read_subscribe(params)
    assert refused.value.code == RpcCode.INVALID_PARAMS
    assert says in refused.value.message


def test_a_filter_matches_by_address_any_of_and_topics_by_position() -> None:
    both = read_log_filter({"address": [A1, A2], "topics": [T1, [T2, T3]]})
    assert both.matches(_log(A2.upper().replace("0X", "0x"), [T1, T3]))
    assert not both.matches(_log("0x" + "cc" * 20))
    assert not both.matches(_log(A1, [T2, T2]))
    assert not both.matches(_log(A1, [T1]))  # no second topic to match
    wildcard = read_log_filter({"topics": [None, T2]})
    assert wildcard.matches(_log(A2, [T3, T2, T1]))
    assert read_log_filter({"topics": [[T1, None]]}) == LogFilter()  # null among: any


def test_equal_filters_are_spelled_one_way() -> None:
    assert read_log_filter({"address": A1, "topics": [T1, None, None]}) == read_log_filter(
        {"address": [A1.upper().replace("0X", "0x")], "topics": [T1.upper().replace("0X", "0x")]}
    )


def test_unsubscribe_takes_one_id() -> None:
    assert read_unsubscribe(["0xabc"]).subscription_id == "0xabc"
    with pytest.raises(RpcError):
        read_unsubscribe(["0x" + "a" * 100])


def test_a_notification_carries_the_result_as_the_node_sent_it() -> None:
    result = b'{"number":"0x10","hash":"0xab"}'
    message = json.loads(notification("0x01", result))
    assert message == {
        "jsonrpc": "2.0",
        "method": "eth_subscription",
        "params": {"subscription": "0x01", "result": {"number": "0x10", "hash": "0xab"}},
    }


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=70),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(["address", "topics", "x", "fromBlock"]), children, max_size=3
        )
    ),
    max_leaves=20,
)


@given(_JSON)
def test_whatever_is_sent_it_is_a_subscription_or_invalid_params(params: Any) -> None:
    refusal = None
    try:
        read_subscribe(["logs", params])
    except RpcError as refused:
        refusal = refused
    assert refusal is None or refusal.code == RpcCode.INVALID_PARAMS


_ADDRESSES = st.sampled_from([A1, A2, "0x" + "cc" * 20])
_TOPICS = st.sampled_from([T1, T2, T3])


@given(
    st.lists(_ADDRESSES, min_size=1, max_size=3) | st.none(),
    st.lists(st.none() | st.lists(_TOPICS, min_size=1, max_size=2), max_size=3),
    _ADDRESSES,
    st.lists(_TOPICS, max_size=4),
)
def test_matching_agrees_with_the_rule_as_written(
    addresses: list[str] | None,
    topics: list[list[str] | None],
    address: str,
    log_topics: list[str],
) -> None:
    wanted = read_log_filter({"address": addresses, "topics": topics})
    expected = (addresses is None or address in addresses) and all(
        choices is None or (i < len(log_topics) and log_topics[i] in choices)
        for i, choices in enumerate(topics)
    )
    assert wanted.matches(_log(address, log_topics)) == expected
