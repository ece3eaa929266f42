"""A caller's bad request never costs a node its health (docs/security.md).

The router refuses what nodes cannot read (ids outside strings, null and 64-bit integers, params
nested too deep) before any node sees it. When a node still says the request is invalid, that is
the caller's answer: returned under the caller's id, not billed, no node cooled down. A node that
rejects a request (HTTP 4xx, an error without an id) is passed over for that call, and cooled down
only when another node did better.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.domain.enums import RoutingStrategy, Scenario
from chainrouter.router.contract import FailureKind, Forward
from chainrouter.router.latency import TailPolicy
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import answering, failing, hanging, slow
from tests.anvil import AnvilNodes, start_anvil_nodes
from tests.router.conftest import (
    CHAIN_A,
    World,
    WorldFactory,
    api_key,
    provider,
    rpc,
    world_config,
)
from tests.router.scripted_world import rpc as scripted_rpc
from tests.router.scripted_world import scripted_world

pytestmark = pytest.mark.anyio

PRICED = ("eth_blockNumber", "eth_chainId", "eth_getBalance", "eth_call", "eth_getBlockByNumber")
BAD_IDS = ["1.5", "true", "false", "{}", "[]", "1e2", "1.0", str(2**64 + 1), str(2**63), "-0.0"]


@pytest.fixture(scope="module")
def three_nodes() -> Iterator[AnvilNodes]:
    """Three real nodes of chain A, for this module alone (their health is what is checked)."""
    yield from start_anvil_nodes((("n1", CHAIN_A), ("n2", CHAIN_A), ("n3", CHAIN_A)))


async def _three_node_world(make: WorldFactory, nodes: AnvilNodes) -> World:
    prices = dict.fromkeys(PRICED, "0.000001")
    providers = [
        provider(f"p{i}", prices, [(url, CHAIN_A)])
        for i, url in enumerate(nodes.urls.values(), start=1)
    ]
    return await make(
        world_config(providers, [api_key("main"), api_key("fast", routing_strategy="performance")]),
        free_tier_ip_requests=100_000,
        free_tier_capacity_per_s=100_000,
    )


def _node_ids(world: World) -> list[int]:
    return [node.node_id for node in world.service.snapshot.routes.nodes_by_chain[CHAIN_A]]


def _cooling(world: World) -> list[int]:
    cooldowns = world.runtime.cooldowns
    return [node_id for node_id in _node_ids(world) if not cooldowns.available(node_id)]


def _untouched(world: World) -> bool:
    """No node of the chain cools down or is out of sync."""
    return not _cooling(world) and not world.runtime.health.out_of_sync


def _body(request_id: str, params: str = "[]") -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":' + request_id.encode()
        + b',"method":"eth_blockNumber","params":' + params.encode() + b"}"
    )  # fmt: skip


async def test_invalid_ids_and_deep_params_reach_no_node_and_take_no_chain_down(
    make_world: WorldFactory, three_nodes: AnvilNodes
) -> None:
    world = await _three_node_world(make_world, three_nodes)
    bad = [_body(request_id) for request_id in BAD_IDS]
    bad += [_body("1", "[" * depth + "]" * depth) for depth in (65, 127, 200, 500)]
    for body in bad:
        for reply in (await world.public(body), await world.call(body)):
            assert reply.status == 400
            answer = json.loads(reply.body)
            assert answer["error"]["code"] == -32600
            assert answer["id"] is None or answer["id"] == 1
        # In a batch, the bad item is refused alone and the good one is served.
        batch = b"[" + body + b"," + _body('"ok"') + b"]"
        answers = json.loads((await world.call(batch)).body)
        assert answers[0]["error"]["code"] == -32600
        assert answers[1]["result"].startswith("0x")
    assert _untouched(world)
    for key in ("main", "fast") * 5:
        reply = await world.call(rpc("eth_blockNumber", [], 9), key=key)
        assert (reply.status, json.loads(reply.body)["id"]) == (200, 9)
    assert _untouched(world)


@pytest.mark.parametrize("request_id", ["-9223372036854775808", "9223372036854775807", '"x"'])
async def test_ids_at_the_edges_of_the_range_are_served(
    make_world: WorldFactory, three_nodes: AnvilNodes, request_id: str
) -> None:
    world = await _three_node_world(make_world, three_nodes)
    deep = "[" * 63 + "]" * 63  # params nest 64 levels: the most allowed
    reply = await world.call(_body(request_id, f"[{deep}]"))
    answer = json.loads(reply.body)
    assert answer["id"] == json.loads(request_id)
    assert _untouched(world)


async def _faulty_world(make: WorldFactory, upstream: FaultyUpstream, *paths: str) -> World:
    # One provider per node, dearer down the list: economy tries them in the order given.
    providers = [
        provider(f"p{i}", {"eth_blockNumber": f"0.00000{i}"}, [(upstream.url(path), CHAIN_A)])
        for i, path in enumerate(paths, start=1)
    ]
    return await make(world_config(providers))


async def _metered(world: World) -> dict[str, tuple[int, int]]:
    assert await world.runtime.sync.flush()
    return world.stored_usage_by_scenario()


@pytest.mark.parametrize(
    ("path", "code"), [("/invalid-request", -32600), ("/invalid-params", -32602)]
)
async def test_a_node_saying_the_request_is_invalid_is_the_callers_answer_unbilled(
    make_world: WorldFactory, upstream: FaultyUpstream, path: str, code: int
) -> None:
    world = await _faulty_world(make_world, upstream, path + "/c", "/ok/c")
    reply = await world.call(rpc("eth_blockNumber", [], "mine"))
    assert reply.status == 200
    answer = json.loads(reply.body)
    assert (answer["id"], answer["error"]["code"]) == ("mine", code)
    assert upstream.requests["/ok/c"] == 0
    assert _cooling(world) == []
    assert await _metered(world) == {Scenario.REJECTED: (1, 0)}


async def test_every_node_rejecting_a_request_alike_cools_none_down(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _faulty_world(make_world, upstream, "/status/400/x", "/status/400/y")
    reply = await world.call(rpc("eth_blockNumber"))
    assert reply.status == 424
    error = json.loads(reply.body)["error"]
    assert error["code"] == -32009
    assert "rejected this request (HTTP 400)" in error["message"]
    assert _cooling(world) == []
    assert await _metered(world) == {Scenario.ALL_FAILED: (1, 0)}


@pytest.mark.parametrize("rejecting", ["/status/400/r", "/status/413/r", "/null-id-error/-32603/r"])
async def test_a_node_that_rejects_what_another_serves_is_cooled_down(
    make_world: WorldFactory, upstream: FaultyUpstream, rejecting: str
) -> None:
    world = await _faulty_world(make_world, upstream, rejecting, "/ok/r")
    reply = await world.call(rpc("eth_blockNumber"))
    assert reply.status == 200
    first, _ = _node_ids(world)
    assert _cooling(world) == [first]
    assert await _metered(world) == {Scenario.FAILOVER: (1, 2000)}


async def test_nodes_that_fail_differently_are_all_cooled_down(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await _faulty_world(make_world, upstream, "/status/400/d", "/status/503/d")
    reply = await world.call(rpc("eth_blockNumber"))
    assert reply.status == 424
    assert sorted(_cooling(world)) == sorted(_node_ids(world))


# -- heavy calls: their time and size are the caller's ------------------------------------

N1, N2, N3 = "http://n1.node", "http://n2.node", "http://n3.node"
WIDE_LOGS = scripted_rpc("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x1f4"}])
HEAVY_CALL = scripted_rpc("eth_call", [{"to": "0x" + "11" * 20, "data": "0x"}, "latest"])


def _heavy_or_quick(heavy: Any) -> Any:
    """A node that answers quick look-ups, and `heavy` to anything else."""

    def respond(command: Forward) -> Any:
        method = json.loads(command.body)["method"]
        return answering("0x10")(command) if method == "eth_blockNumber" else heavy(command)

    return respond


@pytest.mark.parametrize(
    "heavy", [failing(FailureKind.TOO_LARGE), hanging()], ids=["too large", "too slow"]
)
def test_a_call_too_large_or_too_slow_for_every_node_cools_none_down(heavy: Any) -> None:
    """An unfiltered eth_getLogs over hundreds of blocks is too large (or too slow) for every
    node: that is the call, not the nodes; another customer is served right after."""
    node = _heavy_or_quick(heavy)
    world = scripted_world(
        [(N1, 100, node), (N2, 100, node), (N3, 100, node)],
        methods=("eth_getLogs", "eth_blockNumber"),
    )
    assert world.call(WIDE_LOGS).status in (424, 504)
    assert world.cooling() == []
    other = world.another_key(2, customer_id=2)
    assert world.call(scripted_rpc("eth_blockNumber"), key=other).status == 200


def test_a_node_too_slow_for_a_heavy_call_that_another_serves_is_cooled_down() -> None:
    world = scripted_world(
        [(N1, 100, _heavy_or_quick(hanging())), (N2, 200, answering("0x"))],
        methods=("eth_call", "eth_blockNumber"),
        tail=TailPolicy(hedge_max=0, timeout_ceiling_s=10),
    )
    assert world.call(HEAVY_CALL).status == 200
    assert world.cooling() == [N1]


def test_a_quick_look_up_timing_out_is_the_nodes_failure() -> None:
    world = scripted_world(
        [(N1, 100, hanging()), (N2, 200, hanging())],
        methods=("eth_blockNumber",),
        tail=TailPolicy(hedge_max=0, timeout_ceiling_s=0.2),  # within a cooldown's 1 s
    )
    assert world.call(scripted_rpc("eth_blockNumber")).status == 504
    assert sorted(world.cooling()) == [N1, N2]


def test_one_keys_heavy_calls_do_not_move_the_performance_order_of_others() -> None:
    """A heavy call's time is the caller's: only quick look-ups (and health checks) set the
    smoothed latency the performance strategy orders nodes by."""
    world = scripted_world(
        [(N1, 100, _heavy_or_quick(slow(3.0, answering("0x")))), (N2, 100, answering("0x10"))],
        methods=("eth_blockNumber", "eth_call"),
        tail=TailPolicy(hedge_max=0, timeout_ceiling_s=10),
    )
    health = world.deps.health
    health.observe_latency(world.nodes[0].node_id, 20.0)
    health.observe_latency(world.nodes[1].node_id, 60.0)
    other = world.another_key(2, customer_id=2, strategy=RoutingStrategy.PERFORMANCE)
    world.call(HEAVY_CALL)  # 3 s on n1
    assert world.call(scripted_rpc("eth_blockNumber"), key=other).status == 200
    assert world.urls_called()[-1] == N1


# -- whatever the caller sends ---------------------------------------------------------------

json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_value = st.recursive(
    json_leaf,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
deep_params = st.integers(min_value=1, max_value=300).map(
    lambda depth: [[]] if depth < 2 else json.loads("[" * depth + "]" * depth)
)


@st.composite
def requests(draw: st.DrawFn) -> Any:
    document: dict[str, Any] = {}
    if draw(st.booleans()) or draw(st.booleans()):
        document["jsonrpc"] = draw(st.sampled_from(["2.0", "2.0", "1.0", 2]))
    document["method"] = draw(st.sampled_from(PRICED) | st.text(max_size=10))
    if draw(st.booleans()) or draw(st.booleans()):
        document["id"] = draw(json_value)
    if draw(st.booleans()):
        document["params"] = draw(json_value | deep_params)
    if not draw(st.integers(0, 9)):
        document[draw(st.text(min_size=1, max_size=5))] = draw(json_value)
    return document


payloads = requests() | st.lists(requests(), min_size=1, max_size=4) | json_value


async def test_no_request_a_caller_sends_changes_any_nodes_health(
    make_world: WorldFactory, three_nodes: AnvilNodes
) -> None:
    world = await _three_node_world(make_world, three_nodes)
    loop = asyncio.get_running_loop()

    @settings(
        max_examples=150,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(payload=payloads, keyed=st.booleans())
    def property_holds(payload: Any, keyed: bool) -> None:
        try:
            body = json.dumps(payload).encode()
        except ValueError:  # floats hypothesis made that JSON cannot carry
            return
        sending = world.call(body) if keyed else world.public(body)
        asyncio.run_coroutine_threadsafe(sending, loop).result(30)
        assert _untouched(world), f"{body[:200]!r} changed a node's health"

    # Hypothesis runs in a thread of its own, so that this loop serves what the router awaits.
    await asyncio.to_thread(property_holds)
