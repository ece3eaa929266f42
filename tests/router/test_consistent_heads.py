"""Consistent heads (design notes, "Tail latency and consistency"): a key that has seen block N
is not served the head from a node behind N while a node at or past N can serve it, so that
`eth_blockNumber` does not go backwards between its calls."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.envelope import RpcCall
from chainrouter.router.belief import head_told
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.contract import FailureKind
from chainrouter.router.pipeline import Reply
from chainrouter.testing.scripted import answering, failing
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world

BEHIND, CAUGHT_UP = "http://behind.node", "http://caught-up.node"
METHODS = ("eth_blockNumber", "eth_getBalance")
ADDRESS = "0x" + "11" * 20


def _world() -> ScriptedWorld:
    return scripted_world(
        [
            (BEHIND, 100, [failing(FailureKind.TRANSPORT), answering("0x63"), answering("0x63")]),
            (CAUGHT_UP, 300, answering("0x64")),
        ],
        methods=METHODS,
        heads={BEHIND: 99, CAUGHT_UP: 100},
    )


def _result(reply: Reply) -> str:
    return str(json.loads(reply.body)["result"])


def test_eth_block_number_does_not_go_backwards_for_a_key() -> None:
    world = _world()
    assert _result(world.call(rpc("eth_blockNumber"))) == "0x64"
    world.clock.now += 5  # the cheaper node is back
    assert _result(world.call(rpc("eth_blockNumber"))) == "0x64"
    assert world.urls_called() == [BEHIND, CAUGHT_UP, CAUGHT_UP]


def test_reads_at_the_head_follow_what_the_key_saw_and_old_blocks_do_not() -> None:
    world = _world()
    world.call(rpc("eth_blockNumber"))  # saw 100
    world.clock.now += 5
    world.call(rpc("eth_getBalance", [ADDRESS, "latest"]))
    world.call(rpc("eth_getBalance", [ADDRESS, "0x10"]))
    assert world.urls_called()[2:] == [CAUGHT_UP, BEHIND]


def test_another_caller_is_not_held_to_what_a_key_saw() -> None:
    world = _world()
    world.call(rpc("eth_blockNumber"))
    world.clock.now += 5
    assert _result(world.public(rpc("eth_blockNumber"))) == "0x63"


def test_with_no_node_at_or_past_it_the_head_is_still_answered() -> None:
    world = scripted_world([(BEHIND, 100, answering("0x63"))], methods=METHODS, heads={BEHIND: 99})
    # The key saw a block no node has now (from a node since gone): set as `saw` would.
    world.deps.seen_heads._seen[(1, 1)] = 500
    assert _result(world.call(rpc("eth_blockNumber"))) == "0x63"


def test_an_answered_head_moves_the_nodes_head_forward() -> None:
    world = scripted_world([(BEHIND, 100, answering("0x70"))], methods=METHODS, heads={BEHIND: 99})
    world.call(rpc("eth_blockNumber"))
    health = world.deps.health
    assert health.node_head(world.nodes[0].node_id) == 0x70
    assert health.chain_head(1) == 0x70


@given(st.binary(max_size=80))
def test_any_answer_reads_as_a_block_or_nothing(answer: bytes) -> None:
    block = head_told(answer)
    assert block is None or 0 <= block < 1 << 64


def test_a_head_is_read_from_an_answer() -> None:
    assert head_told(b'{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}') == 0x10D4F
    assert head_told(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32000}}') is None
    assert head_told(b'{"jsonrpc":"2.0","id":1,"result":"0x"}') is None


def test_a_head_taken_from_an_identical_call_in_flight_is_what_the_key_saw() -> None:
    """A call that joined another's `eth_blockNumber` (scenario `cache`, no node of its own)
    tells its key's head as one a node answered would (router/ledger.py)."""
    world = scripted_world([("http://a.node", 1, answering("0x1"))])
    seen = world.deps.seen_heads
    [access] = world.service.snapshot.keys_by_hash.values()
    snapshot = world.service.snapshot
    request = RequestContext(snapshot, 0, "b", b"", "1", world.key, None, None, None)
    request.access, request.chain_id = access, 1
    call = CallContext(request, RpcCall(7, b"7", "eth_blockNumber", []), b"")
    call.end(Scenario.CACHE, 200, b'{"jsonrpc":"2.0","id":7,"result":"0x2a"}')
    world.deps.ledger.book(call)
    assert seen.seen(access.key_id, 1) == 42
