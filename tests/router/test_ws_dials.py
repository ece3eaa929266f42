"""WebSocket feed dials paced (issue 52, "Churn"; router/ws/dials.py): a router process's feeds
dial one node at most once an interval, however subscribers come and go, and after failed
dials less and less often (doubling, capped), so that a node that refuses or drops connections
is not dialled in a tight loop by the subscribers arriving. A subscriber meanwhile gets its
subscription once the feed is up (on the node, or the chain's next), or -32009 within its bound.

Against a real node (anvil's WebSocket, behind a counting TCP gate) and the fault-injecting
upstream's relays for a node that refuses the upgrade or drops the connection; the dials are
counted where they arrive."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.ws_routes import WsRoute, WsRouteTable
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.context import RequestContext
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.ws.dials import DialPacer, DialPolicy
from chainrouter.router.ws.hub import Hub, WsBounds
from chainrouter.router.ws.session import WsLimits, WsSession
from chainrouter.router.ws.upstream import UpstreamSocket, open_upstream
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes, node_result, start_anvil_nodes
from tests.router.test_ws_session import Link, _no_calls
from tests.tcp_gate import TcpGate

pytestmark = pytest.mark.anyio

CUSTOMER, KEY_ID = 1, 11
ACCESS = KeyAccess(KEY_ID, CUSTOMER, ("*",), RoutingStrategy.ECONOMY, False)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- the rule -------------------------------------------------------------------------------


def test_a_node_is_dialled_at_most_once_an_interval_and_rests_longer_after_each_failure() -> None:
    clock = Clock()
    dials = DialPacer(DialPolicy(interval_s=1.0, backoff_max_s=10.0), clock)
    assert dials.wait_s(1) == 0
    dials.dialling(1)
    assert dials.wait_s(1) == 1.0
    assert not dials.resting(1)  # merely dialled: a feed waits for it, not passes it over
    assert dials.wait_s(2) == 0  # another node has its own
    rests = []
    for _ in range(6):  # refused, dial after dial
        clock.now += dials.wait_s(1)
        dials.dialling(1)
        clock.now += 0.01
        dials.ended(1, None, failed=True)
        assert dials.resting(1)
        rests.append(dials.wait_s(1))
    assert rests == pytest.approx([2.0, 4.0, 8.0, 10.0, 10.0, 10.0])  # doubling, capped
    clock.now += 10
    dials.dialling(1)
    clock.now += 3
    dials.ended(1, 3.0, failed=True)  # up 3 s, less than the cap: a flap, still failing
    assert dials.wait_s(1) == pytest.approx(10.0)
    clock.now += 10
    dials.dialling(1)
    clock.now += 60
    dials.ended(1, 60.0, failed=True)  # up a long while: the count starts again
    assert dials.wait_s(1) == pytest.approx(2.0)
    clock.now += 2
    dials.dialling(1)
    dials.ended(1, 30.0, failed=False)  # stopped, nobody wanting it: no failure
    assert dials.wait_s(1) == 1.0
    assert not dials.resting(1)


@settings(max_examples=200, deadline=None)
@given(
    interval=st.sampled_from([0.1, 1.0, 2.5]),
    cap=st.sampled_from([0.0, 1.0, 60.0]),
    events=st.lists(
        st.tuples(st.floats(0, 5), st.sampled_from(["dial", "refused", "dropped", "stopped"])),
        max_size=60,
    ),
)
def test_feeds_that_dial_only_when_allowed_never_dial_a_node_twice_within_the_interval(
    interval: float, cap: float, events: list[tuple[float, str]]
) -> None:
    clock = Clock()
    dials = DialPacer(DialPolicy(interval_s=interval, backoff_max_s=cap), clock)
    dialled: list[float] = []
    for pause, event in events:
        clock.now += pause
        if event == "dial":
            if dials.wait_s(7) == 0:
                if dialled:
                    assert clock.now - dialled[-1] >= interval - 1e-9
                dialled.append(clock.now)
                dials.dialling(7)
        elif dialled:
            up = None if event == "refused" else clock.now - dialled[-1]
            dials.ended(7, up, failed=event != "stopped")
            assert dials.wait_s(7) <= max(interval, cap) + 1e-9  # the rest is capped
            if event != "stopped":  # a node that just failed is never dialled again at once
                assert dials.resting(7)
                assert dials.wait_s(7) >= interval - 1e-9


# -- against real nodes -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNodes]:
    yield from start_anvil_nodes((("ws", CHAIN_A),))


def _port(node: AnvilNodes) -> int:
    return int(node.urls["ws"].rsplit(":", 1)[1])


async def _connect(url: str) -> UpstreamSocket:
    return await open_upstream(
        url, rule=None, ssl=None, connect_timeout_s=5, max_message_bytes=1 << 20
    )


def _hub(
    routes: list[WsRoute],
    policy: DialPolicy,
    grace_s: float = 0.0,
    connect: Any = _connect,
    bounds: WsBounds | None = None,
) -> Hub:
    snapshot = RouterSnapshot(
        0,
        {"digest": ACCESS},
        RouteTable.build([], [], []),
        {},
        ws_routes=WsRouteTable.build(routes),
    )
    return Hub(
        lambda: snapshot,
        connect,
        lambda chain: None,
        feed_grace_s=grace_s,
        dials=policy,
        bounds=bounds or WsBounds(),
    )


class Client:
    """One connection through the real session, as a client sees it."""

    def __init__(self, hub: Hub, wait_s: float = 5.0) -> None:
        snapshot = RouterSnapshot(0, {}, RouteTable.build([], [], []), {})
        request = RequestContext(snapshot, 0, "b1", b"", str(CHAIN_A), "crk_x", None, None, None)
        request.access = ACCESS
        request.chain_id = CHAIN_A
        credits = CreditView()
        credits.replace_stored({CUSTOMER: 10**15})
        self.link = Link()
        limits = WsLimits(subscribe_wait_s=wait_s)
        self.session = WsSession(self.link, request, hub, _no_calls, credits, UsageMeter(), limits)
        self.task = asyncio.create_task(self.session.run())
        self._ids = 0

    async def ask(self, method: str, params: list[Any], within_s: float = 10) -> dict[str, Any]:
        self._ids += 1
        call = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        self.link.said.put_nowait(json.dumps(call))
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            for message in self.link.got:
                if message.get("id") == self._ids:
                    return message
            await asyncio.sleep(0.01)
        raise AssertionError(f"no answer to {method}")

    async def heads(self, count: int, within_s: float = 10) -> list[Any]:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            got = [m for m in self.link.got if m.get("method") == "eth_subscription"]
            if len(got) >= count:
                return got
            await asyncio.sleep(0.02)
        raise AssertionError("no notification")

    async def close(self) -> None:
        self.link.said.put_nowait(None)
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def gate(node: AnvilNodes) -> AsyncIterator[TcpGate]:
    """anvil's WebSocket behind a gate that counts the connections made to it."""
    made = TcpGate(_port(node))
    yield made
    made.shut()


async def test_subscribe_unsubscribe_churn_dials_a_real_node_at_most_once_an_interval(
    gate: TcpGate, node: AnvilNodes
) -> None:
    """No grace period: each unsubscribe of the last subscriber stops the feed, each subscribe
    starts one. 10 rounds dial the node at most once per interval (0.4 s): a round's subscribe
    waits for the rest of it (unpaced, the 10 dials came within about 0.2 s). Every subscription
    is served, the last one's heads included."""
    route = WsRoute(1, 1, CHAIN_A, f"ws://127.0.0.1:{gate.port}", {"newHeads": 1})
    hub = _hub([route], DialPolicy(interval_s=0.4, backoff_max_s=5.0))
    client = Client(hub)
    started = time.monotonic()
    for _ in range(10):
        subscribed = await client.ask("eth_subscribe", ["newHeads"])
        assert str(subscribed["result"]).startswith("0x"), subscribed
        assert (await client.ask("eth_unsubscribe", [subscribed["result"]]))["result"] is True
    took = time.monotonic() - started
    assert took >= 9 * 0.4
    assert 2 <= gate.accepted <= took / 0.4 + 1, (gate.accepted, took)
    subscribed = await client.ask("eth_subscribe", ["newHeads"])
    node_result(node.urls["ws"], "anvil_mine", ["0x1"])
    [head] = await client.heads(1)
    assert head["params"]["subscription"] == subscribed["result"]
    await client.close()
    await hub.stop()


async def test_with_the_grace_period_churn_dials_a_real_node_once(gate: TcpGate) -> None:
    route = WsRoute(1, 1, CHAIN_A, f"ws://127.0.0.1:{gate.port}", {"newHeads": 1})
    hub = _hub([route], DialPolicy(interval_s=0.05), grace_s=30.0)
    clients = [Client(hub) for _ in range(5)]
    for _ in range(4):
        for client in clients:
            subscribed = await client.ask("eth_subscribe", ["newHeads"])
            assert (await client.ask("eth_unsubscribe", [subscribed["result"]]))["result"] is True
    for client in clients:
        await client.close()
    assert gate.accepted == 1
    await hub.stop()


async def test_a_node_refusing_websocket_is_dialled_less_and_less_and_subscribers_told(
    upstream: FaultyUpstream, node: AnvilNodes
) -> None:
    """The chain's one node refuses the upgrade (503). Subscribers arriving every 0.1 s for
    2.5 s each get -32009 with the bound after their wait; the node is dialled on the backoff's
    schedule (0, 0.2, 0.6, 1.4, 2.2 s: 5 dials), not once per subscriber. Back up, the next
    subscriber is served once its rest is over."""
    path = f"/ws-relay/{_port(node)}/refusing"
    upstream.down.add(path)
    route = WsRoute(1, 1, CHAIN_A, upstream.ws_url(path), {"newHeads": 1})
    hub = _hub([route], DialPolicy(interval_s=0.1, backoff_max_s=0.8))
    started = time.monotonic()
    refusals: list[dict[str, Any]] = []

    async def arrive() -> None:
        client = Client(hub, wait_s=0.3)
        refusals.append(await client.ask("eth_subscribe", ["newHeads"]))
        await client.close()

    arriving = []
    while time.monotonic() - started < 2.5:
        arriving.append(asyncio.create_task(arrive()))
        await asyncio.sleep(0.1)
    await asyncio.gather(*arriving)
    took = time.monotonic() - started
    assert len(refusals) >= 20
    for refused in refusals:
        assert refused["error"]["code"] == -32009, refused
        assert refused["error"]["data"] == {"subscribe_wait_s": 0.3}
        assert "within 0.3 s" in refused["error"]["message"]
    dials = upstream.requests[path]
    assert 3 <= dials <= 7, (dials, took)
    upstream.down.discard(path)
    client = Client(hub, wait_s=2.0)
    subscribed = await client.ask("eth_subscribe", ["newHeads"])
    assert str(subscribed["result"]).startswith("0x"), subscribed
    await client.close()
    await hub.stop()


async def test_subscribers_are_served_from_the_next_node_while_the_first_rests(
    upstream: FaultyUpstream, node: AnvilNodes
) -> None:
    """The cheaper node refuses; subscribers churning meanwhile are served at once from the
    chain's next node, and the refusing one is dialled on its backoff, not by each feed."""
    refusing = f"/ws-relay/{_port(node)}/first-refusing"
    working = f"/ws-relay/{_port(node)}/second"
    upstream.down.add(refusing)
    routes = [
        WsRoute(1, 1, CHAIN_A, upstream.ws_url(refusing), {"newHeads": 1}),
        WsRoute(2, 1, CHAIN_A, upstream.ws_url(working), {"newHeads": 2}),
    ]
    hub = _hub(routes, DialPolicy(interval_s=0.05, backoff_max_s=5.0))
    client = Client(hub, wait_s=2.0)
    started = time.monotonic()
    for _ in range(15):
        subscribed = await client.ask("eth_subscribe", ["newHeads"])
        assert str(subscribed["result"]).startswith("0x"), subscribed
        assert (await client.ask("eth_unsubscribe", [subscribed["result"]]))["result"] is True
    took = time.monotonic() - started
    # Rests of 0.1, 0.2, 0.4, 0.8, 1.6 s after each refusal.
    assert upstream.requests[refusing] <= 6, (upstream.requests[refusing], took)
    assert upstream.requests[working] >= 1
    await client.close()
    await hub.stop()


async def test_a_node_that_drops_each_connection_is_dialled_less_and_less(
    upstream: FaultyUpstream, node: AnvilNodes
) -> None:
    """The node takes the subscription and drops the connection 150 ms later, again and again:
    a flap, a failure all the same. A subscriber that stays is served; the node's rests double
    (0.2, 0.4, 0.8 s after each drop), so over 3 s it is dialled about 5 times, not 12."""
    path = f"/ws-relay/{_port(node)}/drop/150/flapping"
    route = WsRoute(1, 1, CHAIN_A, upstream.ws_url(path), {"newHeads": 1})
    hub = _hub([route], DialPolicy(interval_s=0.1, backoff_max_s=0.8))
    client = Client(hub, wait_s=2.0)
    subscribed = await client.ask("eth_subscribe", ["newHeads"])
    assert str(subscribed["result"]).startswith("0x"), subscribed
    await asyncio.sleep(3.0)
    dials = upstream.requests[path]
    assert 3 <= dials <= 6, dials  # 12 at one dial per 0.25 s (the interval after each drop)
    await client.close()
    await hub.stop()


async def test_a_connection_closed_while_its_subscribe_waits_holds_nothing_and_stops_the_feed() -> (
    None
):
    """The connection's access is refused (a key revoked) while its eth_subscribe waits for a
    node that refuses: the subscription is not held (the customer's bound given back), the
    connection closes with its code, and the feed nobody wants any more stops."""

    async def refusing(url: str) -> UpstreamSocket:
        raise OSError("connection refused")

    route = WsRoute(1, 1, CHAIN_A, "ws://127.0.0.1:9", {"newHeads": 1})
    bounds = WsBounds(subscriptions_per_customer=1)
    hub = _hub([route], DialPolicy(interval_s=0.05, backoff_max_s=0.2), 0.0, refusing, bounds)
    client = Client(hub, wait_s=5.0)
    client.link.said.put_nowait(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]})
    )
    for _ in range(100):
        if hub.feeds() and hub.feeds()[0].waiting:
            break
        await asyncio.sleep(0.01)
    [feed] = hub.feeds()
    assert feed.waiting == 1
    client.session.refused(RpcError(401, RpcCode.SERVER_ERROR, "invalid API key"))
    await asyncio.wait_for(client.task, 5)
    assert client.link.closed is not None
    assert client.link.closed[0] == 4001
    assert feed.waiting == 0
    assert hub.feeds() == []
    assert hub.take_subscription(CUSTOMER, 0) is None  # its one subscription was given back
    await hub.stop()
