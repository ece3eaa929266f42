"""WebSocket nodes' health (router/ws/node_health.py), checked against real nodes: a node that
answers its chain, a newHeads subscription and its head passes; one that cannot be reached, is
on another chain, or lags the chain's head is out until a check passes again; a feed that had
to leave a node puts it out for the chain's other feeds; the performance order is the measured
latency's, and a node out is tried only when no other is left."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from sqlalchemy import select

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.ws_routes import WsRoute, WsRouteTable
from chainrouter.management.nodes import list_nodes
from chainrouter.router.ws.fanout import Subscription
from chainrouter.router.ws.hub import Hub
from chainrouter.router.ws.node_health import WsHealthPolicy, WsNodeHealth
from chainrouter.router.ws.protocol import SubscriptionKind
from chainrouter.router.ws.upstream import UpstreamSocket, open_upstream
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.nodes import node_health
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes, free_port
from tests.router.conftest import WorldFactory, api_key, provider, world_config

pytestmark = pytest.mark.anyio

ECONOMY, PERFORMANCE = RoutingStrategy.ECONOMY, RoutingStrategy.PERFORMANCE


async def _connect(url: str) -> UpstreamSocket:
    return await open_upstream(
        url, rule=None, ssl=None, connect_timeout_s=2, max_message_bytes=1 << 20
    )


def _ws(anvil: AnvilNodes, name: str) -> str:
    return anvil.urls[name].replace("http://", "ws://")


def _route(node_id: int, url: str, price: int = 1, chain_id: int = CHAIN_A) -> WsRoute:
    return WsRoute(node_id, 1, chain_id, url, {"newHeads": price, "logs": price})


def _health(chain_head: Callable[[int], int | None] = lambda chain: None) -> WsNodeHealth:
    return WsNodeHealth(_connect, chain_head, WsHealthPolicy(timeout_s=2.0, max_block_lag=10))


async def test_a_node_that_answers_passes_with_its_head_and_latency(anvil: AnvilNodes) -> None:
    health = _health()
    node = _route(1, _ws(anvil, "a1"))
    await health.check(node)
    state = health.state(1)
    assert state is not None
    assert state.failures == 0
    assert state.head is not None
    assert health.usable(1)
    assert 0 < health.latency_ms[1] < 2000
    [report] = health.take_reports()
    assert (report.node_id, report.in_sync, report.consecutive_failures) == (1, True, 0)
    assert report.head_block == state.head
    assert health.take_reports() == []  # reported once per check


async def test_a_node_that_cannot_be_reached_fails_and_counts_its_failures() -> None:
    health = _health()
    down = _route(1, f"ws://127.0.0.1:{free_port()}")
    await health.check(down)
    await health.check(down)
    assert not health.usable(1)
    [report] = health.take_reports()
    assert report.consecutive_failures == 2
    assert 1 not in health.latency_ms


async def test_a_node_of_another_chain_fails(anvil: AnvilNodes) -> None:
    health = _health()
    await health.check(_route(1, _ws(anvil, "b1")))  # registered for chain A, serves B
    state = health.state(1)
    assert state is not None
    assert state.failures == 1
    assert "answers chain ID 31338" in (state.last_error or "")
    assert not health.usable(1)


async def test_a_node_behind_the_chains_head_is_out_of_sync(anvil: AnvilNodes) -> None:
    chain_head: dict[int, int] = {}
    health = _health(chain_head.get)
    node = _route(1, _ws(anvil, "a1"))
    await health.check(node)
    state = health.state(1)
    assert state is not None
    assert state.head is not None
    chain_head[CHAIN_A] = state.head + 11  # the HTTP nodes are 11 blocks ahead
    await health.check(node)
    assert not health.usable(1)
    [report] = health.take_reports()
    assert (report.in_sync, report.consecutive_failures) == (False, 0)
    chain_head[CHAIN_A] = state.head + 10  # within the bound again
    await health.check(node)
    assert health.usable(1)


async def test_a_node_that_goes_down_is_out_and_back_once_a_check_passes(
    anvil: AnvilNodes, upstream: FaultyUpstream
) -> None:
    port = anvil.urls["a1"].rsplit(":", 1)[1]
    path = f"/ws-relay/{port}/goes-down"
    health = _health()
    node = _route(1, upstream.ws_url(path))
    await health.check(node)
    assert health.usable(1)
    upstream.cut(path)
    await health.check(node)
    assert not health.usable(1)
    upstream.down.discard(path)
    await health.check(node)
    assert health.usable(1)


async def test_a_node_a_feed_left_is_out_for_the_other_feeds_until_a_check_passes(
    anvil: AnvilNodes,
) -> None:
    health = _health()
    node = _route(1, _ws(anvil, "a1"))
    await health.check(node)
    health.feed_left(node, "no head for 30 s")
    assert not health.usable(1)
    assert health.take_reports()[0].consecutive_failures == 1
    await health.check(node)
    assert health.usable(1)


async def test_economy_keeps_the_cost_order_and_tries_nodes_out_last() -> None:
    health = _health()
    cheap, middle, dear = (_route(n, f"ws://127.0.0.1:{free_port()}", n) for n in (1, 2, 3))
    routes = [cheap, middle, dear]
    assert health.order(routes, ECONOMY) == routes  # nothing checked: the cost order
    await health.check(cheap)  # unreachable: out
    assert health.order(routes, ECONOMY) == [middle, dear, cheap]


async def test_performance_puts_the_lowest_measured_latency_first(
    anvil: AnvilNodes, upstream: FaultyUpstream
) -> None:
    port = anvil.urls["a1"].rsplit(":", 1)[1]
    slow = _route(1, upstream.ws_url(f"/ws-relay/{port}/slow/150"), price=1)  # cheaper
    fast = _route(2, _ws(anvil, "a1"), price=5)
    unmeasured = _route(3, _ws(anvil, "a2"), price=9)
    health = _health()
    await health.check(slow)
    await health.check(fast)
    assert health.latency_ms[1] > health.latency_ms[2]
    routes = [slow, fast, unmeasured]
    assert health.order(routes, PERFORMANCE) == [fast, slow, unmeasured]
    assert health.order(routes, ECONOMY) == routes


async def test_a_hubs_feeds_skip_a_node_its_checks_found_down(anvil: AnvilNodes) -> None:
    """The cheapest node is down: the feed goes straight to the next, never dialling it."""
    down = _route(1, f"ws://127.0.0.1:{free_port()}", price=1)
    up = _route(2, _ws(anvil, "a1"), price=2)
    snapshot = RouterSnapshot(
        0, {}, RouteTable.build([], [], []), {}, ws_routes=WsRouteTable.build([down, up])
    )
    dialled: list[str] = []

    async def connect(url: str) -> UpstreamSocket:
        dialled.append(url)
        return await _connect(url)

    hub = Hub(lambda: snapshot, connect, lambda chain: None)
    assert hub.all_routes() == [down, up]
    for route in hub.all_routes():
        await hub.health.check(route)
    dialled.clear()
    feed = hub.feed(CHAIN_A, KeyAccess(1, 1, ("*",), ECONOMY, False))

    class Sink:
        def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
            return True

        def too_slow(self) -> None:
            raise AssertionError("never")

    feed.fanout.add(Subscription("0x1", SubscriptionKind.NEW_HEADS, Sink()))
    try:
        for _ in range(100):
            if feed.route is not None:
                break
            await asyncio.sleep(0.02)
        assert feed.route == up
        assert dialled == [up.url]
    finally:
        await hub.stop()


async def test_a_routers_checks_reach_the_providers_node_status(
    make_world_on_each_backend: WorldFactory, anvil: AnvilNodes
) -> None:
    """Through storage, as the API reads it: the node that answers is healthy, the one that
    cannot be reached is failing; an HTTP node's report under the same id changes neither."""
    priced = provider("p", {"eth_blockNumber": "0.000001"}, [(anvil.urls["a1"], CHAIN_A)])
    plan = priced["plans"][0]
    plan["methods"].append({"method": "newHeads", "node_target_type": "ws", "cost": "0.000002"})
    plan["ws_nodes"] = [
        {"url": _ws(anvil, "a1"), "chain_id": CHAIN_A},
        {"url": f"ws://127.0.0.1:{free_port()}", "chain_id": CHAIN_A},
    ]
    world = await make_world_on_each_backend(world_config([priced], [api_key("main")]))
    hub = world.runtime.hub
    assert hub is not None
    up, down = sorted(hub.all_routes(), key=lambda route: route.url != _ws(anvil, "a1"))
    for route in (up, down):
        await hub.health.check(route)
    await world.runtime.sync.report_health()
    with world.engine.connect() as connection:
        provider_id = connection.execute(select(t.providers.c.id)).scalar_one()
    statuses = {
        node.id: (status.in_sync, status.status)
        for node, status in list_nodes(world.engine, provider_id, "ws", limit=10, offset=0)
    }
    assert statuses == {up.node_id: (True, "healthy"), down.node_id: (True, "failing")}
    with world.engine.connect() as connection:
        stored = node_health(connection, down.node_id, ws=True)
    assert stored is not None
    assert stored.consecutive_failures == 1


async def test_a_surprise_from_one_node_does_not_end_the_other_nodes_checks(
    anvil: AnvilNodes,
) -> None:
    async def connect(url: str) -> UpstreamSocket:
        if url == "ws://surprise":
            raise RuntimeError("not an error a check expects")
        return await _connect(url)

    health = WsNodeHealth(connect, lambda chain: None, WsHealthPolicy(interval_s=0.1))
    routes = [_route(1, "ws://surprise"), _route(2, _ws(anvil, "a1"))]
    checking = asyncio.create_task(health.run(lambda: routes))
    try:
        for _ in range(100):
            state = health.state(2)
            if state is not None and state.checked_at is not None:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # more rounds: the task lives on
        assert not checking.done()
        assert health.usable(2)
    finally:
        checking.cancel()
        await asyncio.gather(checking, return_exceptions=True)
