"""The eth_getLogs range rule: a range wider than the limit gets -32005 whose message ends with
"try a block range of at most N blocks" and whose data is N; the node never sees it."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.requirements import BadParamsError, logs_span, needs_of
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, WorldFactory, provider, rpc, world_config


def _span_refused(query: dict[str, str], head: int | None, limit: int = 1_000) -> bool:
    span = logs_span(needs_of("eth_getLogs", [query], head))
    return span is not None and span > limit


@pytest.mark.parametrize(
    ("query", "head", "refused"),
    [
        ({"fromBlock": "0x0", "toBlock": "0x3e7"}, None, False),  # 1,000 blocks: the limit
        ({"fromBlock": "0x0", "toBlock": "0x3e8"}, None, True),  # 1,001
        ({"fromBlock": "earliest", "toBlock": "latest"}, 5_000, True),
        (
            {"fromBlock": "earliest", "toBlock": "latest"},
            None,
            False,
        ),  # head unknown: the node judges
        ({"fromBlock": "0x1"}, 50_000, True),  # toBlock defaults to latest
        ({}, 50_000, False),  # latest to latest
        ({"fromBlock": "0x10", "toBlock": "0x1"}, None, False),  # reversed: the node's error
        ({"fromBlock": "pending", "toBlock": "0x0"}, 10, False),
    ],
)
def test_wide_ranges_are_refused_where_both_ends_are_known(
    query: dict[str, str], head: int | None, refused: bool
) -> None:
    assert _span_refused(query, head) == refused


@pytest.mark.parametrize(
    "query",
    [
        {"blockHash": "0x" + "ab" * 32, "fromBlock": "0x0", "toBlock": "0xffffff"},
        {"blockHash": "0xab"},
        {"fromBlock": "0xnothex", "toBlock": "0xffffff"},
        {"fromBlock": 7},
    ],
)
def test_a_filter_the_router_cannot_read_is_the_callers_error(query: dict[str, object]) -> None:
    with pytest.raises(BadParamsError):
        needs_of("eth_getLogs", [query], 100)


@given(
    st.one_of(
        st.none(),
        st.lists(st.dictionaries(st.text(max_size=12), st.text(max_size=20)), max_size=3),
        st.dictionaries(st.text(), st.integers()),
    )
)
def test_any_params_are_judged_without_crashing(params: object) -> None:
    with contextlib.suppress(BadParamsError):
        logs_span(needs_of("eth_getLogs", params, 10))


@pytest.mark.anyio
async def test_the_router_refuses_before_the_node_and_does_not_charge(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [provider("p", {"eth_getLogs": "0.00001"}, [(upstream.url("/ok/logs"), CHAIN_A)])]
        ),
        max_logs_block_range=100,
    )
    balance = world.stored_balance()
    reply = await world.call(rpc("eth_getLogs", [{"fromBlock": "0x0", "toBlock": "0x64"}], "logs"))
    assert reply.status == 200
    answer = json.loads(reply.body)
    assert answer["id"] == "logs"
    assert answer["error"]["code"] == -32005
    assert answer["error"]["data"] == 100
    assert upstream.requests["/ok/logs"] == 0
    narrow = await world.call(rpc("eth_getLogs", [{"fromBlock": "0x0", "toBlock": "0x63"}]))
    assert "result" in json.loads(narrow.body)
    assert await world.runtime.sync.flush()
    assert balance - world.stored_balance() == 10_000
