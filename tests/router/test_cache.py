"""The response cache and coalescing against a real node (anvil, whose `finalized` block is 64
behind its head) through the fault-injecting upstream, on both executors: every cacheable method
is answered byte for byte as the node answers it, from the node once and then from the cache;
nothing that could change is kept (new blocks, a reorg, a transaction mined after it was asked
for, a node's error); identical calls in flight reach a slow node once; the bill is exact."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.domain.cacheable import CACHEABLE
from chainrouter.router.pipeline import Reply
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import DEPLOY_LOGGING, LOG_TOPIC, AnvilNodes, start_anvil_nodes
from tests.router.conftest import CHAIN_A, World, WorldFactory, provider, world_config

pytestmark = pytest.mark.anyio

NODE_PRICE, CACHE_PRICE = Decimal("0.000001"), Decimal("0.0000001")
NANO = 10**9
FINALITY = 64  # anvil's finalized block is this far behind its head
UNKNOWN_HASH = "0x" + "ab" * 32


@dataclass(frozen=True)
class History:
    """What the node's chain holds, made once for the module: a logging contract deployed."""

    url: str
    port: int
    account: str
    contract: str
    deploy: str  # the deployment's transaction hash
    block: int  # the block it is in
    block_hash: str


def _node(url: str, method: str, params: list[Any], call_id: Any = 1) -> bytes:
    body = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
    return httpx.post(url, json=body, timeout=30).content


def _result(url: str, method: str, params: list[Any]) -> Any:
    return json.loads(_node(url, method, params))["result"]


@pytest.fixture(scope="module")
def history() -> Iterator[History]:
    started = start_anvil_nodes((("cache", CHAIN_A),))
    nodes: AnvilNodes = next(started)
    url = nodes.urls["cache"]
    account = _result(url, "eth_accounts", [])[0]
    _result(url, "anvil_mine", ["0x3"])
    deploy = _result(url, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
    receipt = _result(url, "eth_getTransactionReceipt", [deploy])
    _result(url, "anvil_mine", [hex(FINALITY + 20)])  # the deployment is final
    yield History(
        url,
        int(url.rsplit(":", 1)[1]),
        account,
        receipt["contractAddress"],
        deploy,
        int(receipt["blockNumber"], 16),
        receipt["blockHash"],
    )
    started.close()


def final_calls(h: History) -> list[tuple[str, list[Any]]]:
    """A call of each cacheable method about the final block of the deployment."""
    n, block_hash = hex(h.block), h.block_hash
    return [
        ("eth_chainId", []),
        ("net_version", []),
        ("eth_getBlockByNumber", [n, False]),
        ("eth_getBlockByNumber", [n, True]),
        ("eth_getBlockByHash", [block_hash, True]),
        ("eth_getBlockTransactionCountByNumber", [n]),
        ("eth_getBlockTransactionCountByHash", [block_hash]),
        ("eth_getUncleCountByBlockNumber", [n]),
        ("eth_getUncleCountByBlockHash", [block_hash]),
        ("eth_getUncleByBlockNumberAndIndex", [n, "0x0"]),
        ("eth_getUncleByBlockHashAndIndex", [block_hash, "0x0"]),
        ("eth_getTransactionByBlockNumberAndIndex", [n, "0x0"]),
        ("eth_getTransactionByBlockHashAndIndex", [block_hash, "0x0"]),
        ("eth_getBlockReceipts", [n]),
        ("eth_getBalance", [h.account, n]),
        ("eth_getBalance", [h.account, {"blockHash": block_hash}]),
        ("eth_getCode", [h.contract, n]),
        ("eth_getCode", [h.account, n]),  # no code: "0x", kept like any answer
        ("eth_getTransactionCount", [h.account, n]),
        ("eth_getStorageAt", [h.contract, "0x0", n]),
        ("eth_call", [{"to": h.contract, "data": "0x"}, n]),
        ("eth_getProof", [h.account, [], n]),
        ("trace_block", [n]),
        ("trace_replayBlockTransactions", [n, ["trace"]]),
        ("debug_traceBlockByNumber", [n, {}]),
        ("debug_traceBlockByHash", [block_hash, {}]),
        ("eth_getTransactionByHash", [h.deploy]),
        ("eth_getTransactionReceipt", [h.deploy]),
        ("trace_transaction", [h.deploy]),
        ("eth_getLogs", [{"fromBlock": n, "toBlock": n, "topics": [LOG_TOPIC]}]),
        ("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x2"}]),  # no logs: kept, final
        ("eth_getLogs", [{"blockHash": block_hash}]),
    ]


PRICED = sorted({*CACHEABLE, "eth_blockNumber", "evm_mine"})


async def _world(
    make_world: WorldFactory, upstream: FaultyUpstream, path: str, **settings: Any
) -> World:
    world = await make_world(
        world_config(
            [
                provider(
                    "p", dict.fromkeys(PRICED, str(NODE_PRICE)), [(upstream.url(path), CHAIN_A)]
                )
            ],
            credits="100",
        ),
        cache_max_bytes=1 << 22,
        coalesce=True,
        cache_prices={"*": format(CACHE_PRICE, "f")},
        # One provider: nothing could be agreed or proven, and nothing would be kept. These
        # are the cache's own rules; what verification adds: test_verified_answers.py.
        **{"verify": "off", **settings},
    )
    await _checked(world)
    return world


async def _checked(world: World) -> None:
    """A health check of every node: heads and the `finalized` block are known from here."""
    for node in world.runtime.current_nodes():
        await world.check_health(node)


async def _call(world: World, method: str, params: list[Any], call_id: Any = 1) -> Reply:
    body = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
    return await world.call(json.dumps(body).encode())


def _cache_header(reply: Reply) -> str | None:
    return dict(reply.headers).get("x-cache")


def _relay(h: History, name: str) -> str:
    return f"/relay/{h.port}/full/{name}"


async def test_every_cacheable_method_is_asked_of_the_node_once_then_answered_byte_equal(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History
) -> None:
    calls = final_calls(history)
    assert {method for method, _ in calls} == set(CACHEABLE)  # every row of the table is tried
    path = _relay(history, "every-method")
    world = await _world(make_world, upstream, path)
    for method, params in calls:
        asked = upstream.requests[path]
        first = await _call(world, method, params, 5)
        second = await _call(world, method, params, "second")
        node = _node(history.url, method, params, "second")
        assert "error" not in json.loads(node), (method, node)
        if json.loads(node)["result"] is None:  # anvil has no uncles: null is never kept
            assert (_cache_header(first), _cache_header(second)) == ("MISS", "MISS"), method
            assert upstream.requests[path] == asked + 2, method
        else:
            assert (_cache_header(first), _cache_header(second)) == ("MISS", "HIT"), method
            assert upstream.requests[path] == asked + 1, method
        assert second.body == node, method


async def test_what_could_still_change_is_asked_of_the_node_every_time(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History
) -> None:
    path = _relay(history, "unkept")
    world = await _world(make_world, upstream, path)
    head = int(_result(history.url, "eth_blockNumber", []), 16)
    unfinal = hex(head - 2)
    past_head = hex(head + 50)
    calls: list[tuple[str, list[Any]]] = [
        ("eth_getBlockByNumber", ["latest", False]),
        ("eth_getBlockByNumber", ["finalized", False]),
        ("eth_getBlockByNumber", ["safe", False]),
        ("eth_getBlockByNumber", ["earliest", False]),
        ("eth_getBlockByNumber", [unfinal, False]),
        ("eth_getBlockByNumber", [past_head, False]),  # null: not there yet
        ("eth_getBlockByHash", [UNKNOWN_HASH, False]),  # null
        ("eth_getBalance", [history.account, "latest"]),
        ("eth_getBalance", [history.account]),
        ("eth_call", [{"to": history.contract, "data": "0x"}, unfinal]),
        ("eth_getTransactionReceipt", [UNKNOWN_HASH]),  # null
        ("eth_getLogs", [{"fromBlock": hex(history.block), "toBlock": "latest"}]),
        ("eth_getLogs", [{"fromBlock": hex(history.block), "toBlock": unfinal}]),
        ("eth_getLogs", [{"blockHash": UNKNOWN_HASH}]),  # the node's error: unknown block
        ("eth_blockNumber", []),
    ]
    for method, params in calls:
        asked = upstream.requests[path]
        replies = [await _call(world, method, params, n) for n in (1, 2)]
        assert [_cache_header(reply) for reply in replies] == ["MISS", "MISS"], (method, params)
        assert upstream.requests[path] == asked + 2, (method, params)
        node = _node(history.url, method, params, 2)
        if "result" in json.loads(node):  # a node's error is the router's own (spec section 7)
            assert replies[1].body == node, (method, params)


async def test_nothing_is_stale_after_new_blocks_or_a_reorg(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History
) -> None:
    path = _relay(history, "reorg")
    world = await _world(make_world, upstream, path)
    head = int(_result(history.url, "eth_blockNumber", []), 16)
    recent = [hex(head - 1), False]
    final = [hex(history.block), False]
    await _call(world, "eth_getBlockByNumber", final)
    before = json.loads((await _call(world, "eth_getBlockByNumber", recent)).body)["result"]
    tx = {"from": history.account, "to": history.contract, "value": "0x1"}
    _result(history.url, "anvil_reorg", [3, [[tx, 1]]])  # rewrites the last three blocks
    after = await _call(world, "eth_getBlockByNumber", recent, 2)
    assert json.loads(after.body)["result"]["hash"] != before["hash"]
    assert after.body == _node(history.url, "eth_getBlockByNumber", recent, 2)
    _result(history.url, "anvil_mine", ["0x2"])
    latest = await _call(world, "eth_getBlockByNumber", ["latest", False], 3)
    assert latest.body == _node(history.url, "eth_getBlockByNumber", ["latest", False], 3)
    kept = await _call(world, "eth_getBlockByNumber", final, 4)  # final: unchanged, still kept
    assert _cache_header(kept) == "HIT"
    assert kept.body == _node(history.url, "eth_getBlockByNumber", final, 4)


async def test_a_receipt_asked_for_before_its_transaction_was_mined_is_read_again(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History
) -> None:
    path = _relay(history, "pending")
    world = await _world(make_world, upstream, path)
    _result(history.url, "evm_setAutomine", [False])
    try:
        sent = _result(
            history.url,
            "eth_sendTransaction",
            [{"from": history.account, "to": history.contract, "value": "0x2"}],
        )
        pending = await _call(world, "eth_getTransactionReceipt", [sent])
        assert json.loads(pending.body)["result"] is None
        _result(history.url, "evm_mine", [])
    finally:
        _result(history.url, "evm_setAutomine", [True])
    mined = await _call(world, "eth_getTransactionReceipt", [sent], 2)
    assert json.loads(mined.body)["result"]["transactionHash"] == sent
    assert _cache_header(mined) == "MISS"  # in a block that is not final: not kept either
    assert _cache_header(await _call(world, "eth_getTransactionReceipt", [sent], 3)) == "MISS"
    _result(history.url, "anvil_mine", [hex(FINALITY + 1)])
    await _checked(world)  # the router learns the new finalized block
    await _call(world, "eth_getTransactionReceipt", [sent], 4)
    final = await _call(world, "eth_getTransactionReceipt", [sent], 5)
    assert _cache_header(final) == "HIT"
    assert final.body == _node(history.url, "eth_getTransactionReceipt", [sent], 5)


async def test_a_nodes_failure_is_never_kept(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History
) -> None:
    path = _relay(history, "failing")
    world = await _world(make_world, upstream, path)
    params = [hex(history.block), False]
    upstream.down.add(path)
    try:
        failed = await _call(world, "eth_getBlockByNumber", params)
    finally:
        upstream.down.discard(path)
    assert failed.status == 424
    await asyncio.sleep(1.1)  # the node's first cooldown passes
    answered = await _call(world, "eth_getBlockByNumber", params, 2)
    assert answered.body == _node(history.url, "eth_getBlockByNumber", params, 2)
    assert _cache_header(answered) == "MISS"


async def test_hits_cost_the_cache_price_and_no_provider_earns_them(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History
) -> None:
    path = _relay(history, "billing")
    world = await _world(make_world, upstream, path)
    before = world.stored_balance()
    params = [history.account, hex(history.block)]
    for n in range(5):
        assert (await _call(world, "eth_getBalance", params, n)).status == 200
    asked = upstream.requests[path]
    free = await world.public(
        {"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": params}
    )
    # One cache for everyone: the free tier reads it (no node asked), pays nothing, and is not
    # told where the answer came from (no `X-Cache` on the free tier).
    assert free.status == 200
    assert upstream.requests[path] == asked
    assert _cache_header(free) is None
    assert await world.runtime.sync.flush()
    assert before - world.stored_balance() == int(NODE_PRICE * NANO + 4 * CACHE_PRICE * NANO)
    usage = world.stored_usage_by_scenario()
    assert usage == {
        "first_choice": (1, int(NODE_PRICE * NANO)),
        "cache": (4, int(4 * CACHE_PRICE * NANO)),
    }


async def test_identical_calls_in_flight_reach_a_slow_node_once(
    make_world: WorldFactory, upstream: FaultyUpstream, history: History, on_native: bool
) -> None:
    if on_native:  # the harness's native driver runs one program at a time: nothing is in
        pytest.skip("flight together; served: tests/router/test_cache_served.py")
    path = f"/relay/{history.port}/slow/300/coalesced"
    world = await _world(make_world, upstream, path)
    before, asked = world.stored_balance(), upstream.requests[path]
    replies = await asyncio.gather(
        *(_call(world, "eth_getBlockByNumber", ["latest", False], n) for n in range(30))
    )
    answers = [json.loads(reply.body) for reply in replies]
    assert [answer["id"] for answer in answers] == list(range(30))
    assert len({json.dumps(answer["result"]) for answer in answers}) == 1
    assert upstream.requests[path] == asked + 1
    assert sorted(_cache_header(reply) or "" for reply in replies) == ["HIT"] * 29 + ["MISS"]
    assert await world.runtime.sync.flush()
    assert before - world.stored_balance() == int(NODE_PRICE * NANO + 29 * CACHE_PRICE * NANO)


# -- the property: whatever happens, an answer through the cache is the node's answer then ------

BLOCK_METHODS = (
    "eth_getBlockByNumber",
    "eth_getBalance",
    "eth_getTransactionCount",
    "eth_getBlockTransactionCountByNumber",
    "eth_getLogs",
)
Step = tuple[str, int, int]  # (what, how much or which method, how far back)
BACK = (0, 1, 2, 3, 62, 63, 64, 65, 66)
steps = st.one_of(
    st.tuples(st.just("mine"), st.integers(1, 4), st.just(0)),
    st.tuples(st.just("reorg"), st.integers(1, 4), st.just(0)),
    st.tuples(st.just("down"), st.just(0), st.just(0)),
    # Blocks about the head (a reorg rewrites them) and about the finalized block (64 behind).
    st.tuples(st.just("call"), st.integers(0, len(BLOCK_METHODS) - 1), st.sampled_from(BACK)),
    st.tuples(st.just("call-by-hash"), st.just(0), st.sampled_from(BACK)),
)


def _params(h: History, method: str, block: Any) -> list[Any]:
    if method == "eth_getLogs":
        return [{"fromBlock": block, "toBlock": block}]
    if method in ("eth_getBalance", "eth_getTransactionCount"):
        return [h.account, block]
    if method == "eth_getBlockTransactionCountByNumber":
        return [block]
    return [block, False]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(story=st.lists(steps, min_size=1, max_size=12))
async def test_whatever_happens_an_answer_through_the_cache_is_the_nodes_at_that_moment(
    story: list[Step],
    make_world: WorldFactory,
    upstream: FaultyUpstream,
    history: History,
    on_native: bool,
) -> None:
    if on_native:
        pytest.skip("one executor is enough for the property; both run the same stages")
    path = _relay(history, "property")
    world = await _cached_world(make_world, upstream, path)
    for what, amount, back in story:
        head = int(_result(history.url, "eth_blockNumber", []), 16)
        if what == "mine":
            _result(history.url, "anvil_mine", [hex(amount)])
        elif what == "reorg":
            tx = {"from": history.account, "to": history.contract, "value": hex(amount)}
            _result(history.url, "anvil_reorg", [amount, [[tx, amount - 1]]])
        elif what == "down":  # the node's path fails until the next step
            upstream.down.add(path)
        else:
            await _checked(world)  # the router knows the heads and the finalized block now
            number = max(head - back, 0)
            if what == "call":
                method = BLOCK_METHODS[amount]
                params = _params(history, method, hex(number))
            else:
                method = "eth_getBlockByHash"
                block = _result(history.url, "eth_getBlockByNumber", [hex(number), False])
                params = [block["hash"], False]
            reply = await _call(world, method, params, "p")
            answer = json.loads(reply.body)
            if "result" in answer:  # else the router's own error: the node failed
                assert reply.body == _node(history.url, method, params, "p"), (method, params)
        if what != "down":
            upstream.down.discard(path)
    upstream.down.discard(path)


_worlds: weakref.WeakKeyDictionary[WorldFactory, World] = weakref.WeakKeyDictionary()


async def _cached_world(make_world: WorldFactory, upstream: FaultyUpstream, path: str) -> World:
    """One world for every example of the property (one test's factory): what the cache holds
    carries over from example to example, as it would in a router that runs on."""
    world = _worlds.get(make_world)
    if world is None:
        world = _worlds[make_world] = await _world(make_world, upstream, path)
    return world
