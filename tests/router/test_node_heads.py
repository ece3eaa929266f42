"""Each node's head, and the chain's (design notes, "Integrity"; router/health.py,
router/stages/heads.py, router/belief.py): a node serves only what it can have.

Told as stories of scripted nodes of three providers, the cheapest first: `BEHIND` at block 90,
`AT_HEAD` and `ALSO` at block 100, so that the chain's head (what nodes of two providers
reached) is 100 and `BEHIND` lags (more than the default two blocks behind). What lagging nodes
answer of real chains, through the fault-injecting upstream, is in test_integrity_served.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chainrouter.domain.enums import Scenario
from chainrouter.router.belief import Expected, doubted
from chainrouter.router.latency import TailPolicy
from chainrouter.testing.scripted import Responder, answering
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world

BEHIND, AT_HEAD, ALSO = "http://behind.node", "http://at-head.node", "http://also.node"
ADDRESS = "0x" + "22" * 20
TX = "0x" + "ab" * 32
READS = (
    "eth_blockNumber",
    "eth_getBalance",
    "eth_getBlockByNumber",
    "eth_getTransactionReceipt",
    "eth_getLogs",
)
PRICES = {BEHIND: 100, AT_HEAD: 200, ALSO: 300}


def _world(
    behind: Responder | Any = None,
    at_head: Responder | Any = None,
    also: Responder | Any = None,
    heads: dict[str, int] | None = None,
    **options: Any,
) -> ScriptedWorld:
    scripts = {BEHIND: behind, AT_HEAD: at_head, ALSO: also}
    nodes = [
        (url, price, answering("0x1") if scripts[url] is None else scripts[url])
        for url, price in PRICES.items()
    ]
    options.setdefault("tail", TailPolicy(hedge_max=0))
    return scripted_world(
        nodes,
        methods=READS,
        heads=heads or {BEHIND: 90, AT_HEAD: 100, ALSO: 100},
        **options,
    )


def _result(body: bytes) -> Any:
    return json.loads(body)["result"]


def test_the_chain_head_is_the_highest_that_nodes_of_two_providers_reached() -> None:
    world = _world(heads={BEHIND: 90, AT_HEAD: 100, ALSO: 120})
    assert world.deps.health.chain_head(1) == 100


def test_a_call_pinned_to_a_block_goes_only_to_nodes_that_have_it() -> None:
    world = _world()
    reply = world.call(rpc("eth_getBalance", [ADDRESS, hex(95)]))
    assert reply.status == 200
    assert world.urls_called() == [AT_HEAD]
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 200)}


def test_a_lagging_node_still_serves_blocks_it_has() -> None:
    world = _world()
    world.call(rpc("eth_getBalance", [ADDRESS, hex(80)]))
    world.call(rpc("eth_getLogs", [{"fromBlock": hex(70), "toBlock": hex(90)}]))
    assert world.urls_called() == [BEHIND, BEHIND]


@pytest.mark.parametrize(
    "payload",
    [
        rpc("eth_blockNumber"),
        rpc("eth_getBalance", [ADDRESS, "latest"]),
        rpc("eth_getBalance", [ADDRESS, "pending"]),
        rpc("eth_getBlockByNumber", ["latest", False]),
        rpc("eth_getLogs", [{"fromBlock": hex(95)}]),
    ],
)
def test_a_lagging_node_serves_no_read_of_the_head(payload: dict[str, Any]) -> None:
    world = _world(at_head=answering(hex(100)))
    assert world.call(payload).status == 200
    assert world.urls_called() == [AT_HEAD]


def test_within_the_allowed_lag_a_node_serves_reads_of_the_head() -> None:
    world = _world(heads={BEHIND: 98, AT_HEAD: 100, ALSO: 100}, behind=answering(hex(98)))
    assert _result(world.call(rpc("eth_blockNumber")).body) == hex(98)
    assert world.urls_called() == [BEHIND]


def test_a_block_past_every_nodes_head_goes_to_the_nodes_at_the_highest_and_null_stands() -> None:
    world = _world(at_head=answering(None), also=answering(None))
    reply = world.call(rpc("eth_getBlockByNumber", [hex(101), False]))
    assert (reply.status, _result(reply.body)) == (200, None)
    assert world.urls_called() == [AT_HEAD]  # at the head, its "none" is the chain's


def test_none_from_a_node_behind_the_chain_head_is_asked_again_of_one_at_the_head() -> None:
    """Its provider is not paid for it: the call is billed once, at the price of the node that
    answered."""
    receipt = {"transactionHash": TX, "blockNumber": hex(100), "status": "0x1"}
    world = _world(behind=answering(None), at_head=answering(receipt))
    reply = world.call(rpc("eth_getTransactionReceipt", [TX]))
    assert _result(reply.body) == receipt
    assert world.urls_called() == [BEHIND, AT_HEAD]
    assert world.metered() == {Scenario.FAILOVER: (1, 200)}


def test_no_logs_from_a_node_behind_the_chain_head_are_asked_again_of_one_at_the_head() -> None:
    log = {"blockNumber": hex(99), "logIndex": "0x0", "blockHash": "0x" + "cd" * 32}
    world = _world(behind=answering([]), at_head=answering([log]))
    query = {"blockHash": "0x" + "cd" * 32}  # a block the router cannot place: any node
    assert _result(world.call(rpc("eth_getLogs", [query])).body) == [log]
    assert world.urls_called() == [BEHIND, AT_HEAD]


def test_none_from_every_node_is_the_answer() -> None:
    world = _world(behind=answering(None), at_head=answering(None), also=answering(None))
    reply = world.call(rpc("eth_getTransactionReceipt", [TX]))
    assert (reply.status, _result(reply.body)) == (200, None)
    assert world.urls_called() == [BEHIND, AT_HEAD]  # believed at the head
    assert world.metered() == {Scenario.FAILOVER: (1, 200)}


def test_a_head_older_than_the_chain_allows_is_not_believed() -> None:
    """A node found in step at its last check that answers a head more than the allowed lag
    behind the chain's (it went back, or stopped): the next node is asked."""
    world = _world(
        heads={BEHIND: 100, AT_HEAD: 100, ALSO: 100},
        behind=answering(hex(90)),
        at_head=answering(hex(100)),
    )
    assert _result(world.call(rpc("eth_blockNumber")).body) == hex(100)
    assert world.urls_called() == [BEHIND, AT_HEAD]


def test_when_every_node_tells_an_old_head_the_highest_is_served() -> None:
    world = _world(
        heads={BEHIND: 100, AT_HEAD: 100, ALSO: 100},
        behind=answering(hex(90)),
        at_head=answering(hex(92)),
        also=answering(hex(91)),
    )
    reply = world.call(rpc("eth_blockNumber"))
    assert (reply.status, _result(reply.body)) == (200, hex(92))
    assert world.metered() == {Scenario.FAILOVER: (1, 200)}


def test_the_judge_reads_every_spelling_of_an_answer_alike() -> None:
    expected = Expected(head_from=0x10, present_from=100)
    for spelled in (b'{"jsonrpc":"2.0","id":1,"result":"0x10"}', b'{"id": 1, "result": "0x10"}'):
        assert not doubted("eth_blockNumber", spelled, None, expected)
    assert doubted("eth_blockNumber", b'{"id":1,"result":"0xf"}', None, expected)
    assert doubted("eth_blockNumber", b'{"id":1,"result":"0x1_0"}', None, expected)
    assert doubted("eth_getTransactionReceipt", b'{"id":1,"result":null}', 99, expected)
    assert not doubted("eth_getTransactionReceipt", b'{"id":1,"result":null}', 100, expected)
    assert not doubted("eth_getTransactionReceipt", b'{"id":1,"result":{}}', 99, expected)
    assert not doubted("eth_getBalance", b'{"id":1,"result":null}', 99, expected)


def test_a_read_whose_none_its_node_could_not_be_believed_in_is_never_handed_over() -> None:
    """The native server would serve that node's "none" unjudged: such a call is the
    pipeline's each time (router/fast/decisions.py)."""
    receipt = {"transactionHash": TX, "blockNumber": hex(80), "status": "0x1"}
    behind = _world(behind=answering(receipt), decisions=True)
    assert behind.decided(behind.call(rpc("eth_getTransactionReceipt", [TX]))) == []
    caught_up = _world(
        behind=answering(receipt), heads={BEHIND: 100, AT_HEAD: 100, ALSO: 100}, decisions=True
    )
    [decision] = caught_up.decided(caught_up.call(rpc("eth_getTransactionReceipt", [TX])))
    assert decision.url == BEHIND
