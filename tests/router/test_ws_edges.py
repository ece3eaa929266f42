"""WebSocket edges (docs/websocket.md): a subscription after unsubscribing everything, one in
flight while the connection closes, notifications the link can no longer send, a kind only a
cooling route prices, a batch with a subscription, and a node failing while a block's logs are
read. Driven with the real hub, session, feed and native link; clients and nodes scripted."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any, cast

import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import TextMessage

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.ws_routes import WsRoute, WsRouteTable
from chainrouter.router.context import RequestContext
from chainrouter.router.executors.native_websocket import SocketLink
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.pipeline import Reply
from chainrouter.router.ws.dials import DialPacer
from chainrouter.router.ws.fanout import Subscription
from chainrouter.router.ws.feed import ChainFeed, FeedPolicy
from chainrouter.router.ws.heads import Head
from chainrouter.router.ws.hub import Hub
from chainrouter.router.ws.protocol import LogFilter, SubscriptionKind
from chainrouter.router.ws.session import WsLimits, WsSession
from chainrouter.router.ws.upstream import UpstreamClosedError, UpstreamSocket

pytestmark = pytest.mark.anyio
CHAIN, CUSTOMER, KEY_ID = 7, 1, 11
ROUTE = WsRoute(3, 5, CHAIN, "ws://node", {"newHeads": 100, "logs": 100})
ACCESS = KeyAccess(KEY_ID, CUSTOMER, ("*",), RoutingStrategy.ECONOMY, False)
SNAP = RouterSnapshot(
    0,
    {"the key's digest": ACCESS},
    RouteTable.build([], [], []),
    {},
    ws_routes=WsRouteTable.build([ROUTE]),
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Link:
    def __init__(self) -> None:
        self.said: asyncio.Queue[str | None] = asyncio.Queue()
        self.got: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None

    async def receive(self) -> str | bytes | None:
        return await self.said.get()

    async def send(self, message: bytes) -> None:
        self.got.append(json.loads(message))

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)

    def abort(self, code: int, reason: str) -> None:
        self.closed = (code, reason)


async def _unreachable(url: str) -> UpstreamSocket:
    raise OSError("no node")


async def _silent(url: str) -> UpstreamSocket:
    """A node that takes the feed's subscription and announces nothing: the tests feed the
    feed by hand."""
    return cast(UpstreamSocket, Fake({}, [], set()))


def _session(
    link: Any, hub: Any, balance: int, handle: Any = None, credits: CreditView | None = None
) -> tuple[WsSession, UsageMeter]:
    request = RequestContext(SNAP, 0, "b1", b"", str(CHAIN), "crk_x", None, None, None)
    request.access = ACCESS
    request.chain_id = CHAIN
    if credits is None:
        credits = CreditView()
        credits.replace_stored({CUSTOMER: balance})
    meter = UsageMeter()

    async def no_calls(body: bytes) -> Reply:
        raise AssertionError

    return WsSession(
        link, request, hub, handle or no_calls, credits, meter, WsLimits(100, 1000)
    ), meter


def _sub(n: int = 1, kind: str = "newHeads") -> str:
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "eth_subscribe", "params": [kind]})


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _heads(feed: ChainFeed, first: int, count: int) -> None:
    hs = [
        Head(n, hex(n), hex(n - 1), json.dumps({"number": hex(n)}).encode())
        for n in range(first, first + count)
    ]
    for sink in feed.fanout.heads(hs):
        sink.too_slow()


async def test_a_subscription_after_unsubscribing_everything_is_on_a_running_feed() -> None:
    hub = Hub(lambda: SNAP, _silent, lambda c: None)
    la, lb = Link(), Link()
    a, _ = _session(la, hub, 10**9)
    b, _ = _session(lb, hub, 10**9)
    ta, tb = asyncio.create_task(a.run()), asyncio.create_task(b.run())
    lb.said.put_nowait(_sub())
    await _settle()
    sid = lb.got[-1]["result"]
    lb.said.put_nowait(
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "eth_unsubscribe", "params": [sid]})
    )
    la.said.put_nowait(_sub())
    await _settle()
    la.said.put_nowait(None)
    await asyncio.wait_for(ta, 5)  # A leaves: fanout empty -> feed stopped
    lb.said.put_nowait(_sub(3))
    await _settle()
    assert lb.got[-1]["result"].startswith("0x")
    live = hub.feeds()
    try:
        assert b._feed in live, (
            "B's new subscription sits on a stopped feed: it will never be notified"
        )
    finally:
        lb.said.put_nowait(None)
        await asyncio.wait_for(tb, 5)
        await hub.stop()


async def test_a_subscribe_in_flight_as_the_connection_closes_leaves_nothing_behind() -> None:
    hub = Hub(lambda: SNAP, _silent, lambda c: None, feed_grace_s=0)  # stopped at once
    link = Link()
    session, _ = _session(link, hub, balance=150)  # one notification's worth
    task = asyncio.create_task(session.run())
    link.said.put_nowait(_sub())
    await _settle()
    feed = hub.feeds()[0]
    _heads(feed, 1, 2)  # 2nd notification: out of credits -> close 4002, subscriptions ended
    await _settle()
    assert link.closed is not None
    assert link.closed[0] == 4002
    link.said.put_nowait(_sub(2))  # was already in flight from the client
    await asyncio.wait_for(task, 5)
    try:
        assert hub.feeds() == []
        assert len(feed.fanout) == 0
    finally:
        await hub.stop()


async def test_notifications_the_closing_link_cannot_send_are_not_billed() -> None:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    theirs.setblocking(False)
    link = SocketLink(reader, writer, 1 << 20)
    hub = Hub(lambda: SNAP, _silent, lambda c: None)
    session, meter = _session(link, hub, 10**9)
    task = asyncio.create_task(session.run())
    client = Connection(ConnectionType.CLIENT)
    await asyncio.get_running_loop().sock_sendall(theirs, client.send(TextMessage(data=_sub())))
    await asyncio.sleep(0.1)
    feed = hub.feeds()[0]
    link.abort(1001, "no answer to pings")  # what keep_alive does
    _heads(feed, 1, 50)
    await asyncio.wait_for(task, 5)
    data = b""
    while chunk := theirs.recv(1 << 20):
        data += chunk
    client.receive_data(data)
    sent = [
        e for e in client.events() if isinstance(e, TextMessage) and "eth_subscription" in e.data
    ]
    billed = sum(v[0] for v in meter.take().rows.values())
    theirs.close()
    await hub.stop()
    assert billed == len(sent), f"billed {billed} notifications, delivered {len(sent)}"


def test_a_kind_only_a_cooling_route_prices_costs_that_price_never_nothing() -> None:
    a = WsRoute(1, 1, CHAIN, "ws://a", {"newHeads": 1, "logs": 5})
    b = WsRoute(2, 2, CHAIN, "ws://b", {"newHeads": 2})
    dials = DialPacer()
    feed = ChainFeed(CHAIN, lambda: [a, b], _unreachable, dials=dials)  # order [A, B]
    dials.dialling(a.node_id)
    dials.ended(a.node_id, None, failed=True)  # but this feed just left A
    assert feed._pick() == (b, 0.0)
    assert feed.prices.get("logs") == 5, f"prices while following B: {feed.prices}"


async def test_a_batch_with_a_subscription_is_bounded_like_any_batch() -> None:
    hub = Hub(lambda: SNAP, _silent, lambda c: None)
    bodies: list[bytes] = []

    async def handle(body: bytes) -> Reply:
        bodies.append(body)
        return Reply(200, b'{"jsonrpc":"2.0","id":1,"result":"0x7"}', "b1")

    link = Link()
    session, _ = _session(link, hub, 10**9, handle)
    task = asyncio.create_task(session.run())
    batch = [json.loads(_sub())] + [
        {"jsonrpc": "2.0", "id": i, "method": "eth_chainId"} for i in range(5000)
    ]
    link.said.put_nowait(json.dumps(batch))
    await _settle()
    await asyncio.sleep(0.2)
    link.said.put_nowait(None)
    await asyncio.wait_for(task, 5)
    await hub.stop()
    assert bodies == []
    assert link.got[0]["error"]["code"] == -32600


class Fake:
    def __init__(
        self, blocks: dict[int, dict[str, Any]], announce: list[int], fail_logs: set[str]
    ) -> None:
        self.blocks, self.announce, self.fail_logs = blocks, announce, fail_logs
        self.closed = asyncio.Event()

    async def subscribe(self, params: list[Any], timeout_s: float) -> asyncio.Queue[bytes]:
        q: asyncio.Queue[bytes] = asyncio.Queue()
        for n in self.announce:
            q.put_nowait(json.dumps(self.blocks[n]).encode())
        return q

    async def call(self, method: str, params: list[Any], timeout_s: float) -> Any:
        if method == "eth_getBlockByNumber":
            n = max(self.blocks) if params[0] == "latest" else int(params[0], 16)
            return self.blocks.get(n)
        if method == "eth_getLogs":
            h = params[0]["blockHash"]
            if h in self.fail_logs:
                self.closed.set()
                raise UpstreamClosedError("the node closed the connection")
            n = next(k for k, b in self.blocks.items() if b["hash"] == h)
            return [
                {"address": "0x" + "11" * 20, "topics": [], "blockNumber": hex(n), "blockHash": h}
            ]
        raise AssertionError(method)

    async def close(self) -> None:
        pass


class Got:
    def __init__(self) -> None:
        self.got: list[Any] = []

    def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
        self.got.append(json.loads(message)["params"]["result"])
        return True

    def too_slow(self) -> None: ...


async def test_a_node_failing_while_a_blocks_logs_are_read_leaves_no_gap() -> None:
    blocks = {
        n: {"number": hex(n), "hash": "0x%064x" % (n + 1000), "parentHash": "0x%064x" % (n + 999)}
        for n in range(0, 4)
    }
    one = Fake({k: v for k, v in blocks.items() if k <= 2}, [1, 2], {blocks[2]["hash"]})
    two = Fake(blocks, [], set())
    ra, rb = (
        WsRoute(1, 1, CHAIN, "ws://one", {"newHeads": 1, "logs": 1}),
        WsRoute(2, 1, CHAIN, "ws://two", {"newHeads": 1, "logs": 1}),
    )

    async def connect(url: str) -> UpstreamSocket:
        return cast(UpstreamSocket, one if url == "ws://one" else two)

    feed = ChainFeed(CHAIN, lambda: [ra, rb], connect, policy=FeedPolicy(seed_blocks=0))
    logs, heads = Got(), Got()
    feed.fanout.add(Subscription("0x1", SubscriptionKind.LOGS, logs, LogFilter()))
    feed.fanout.add(Subscription("0x2", SubscriptionKind.NEW_HEADS, heads))
    task = asyncio.create_task(feed.run())
    await asyncio.sleep(0.5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert [log["blockNumber"] for log in logs.got] == ["0x1", "0x2", "0x3"]
    assert [head["number"] for head in heads.got] == ["0x1", "0x2", "0x3"]  # none twice


class SlowLink(Link):
    """A client whose notifications wait to be read until told."""

    def __init__(self) -> None:
        super().__init__()
        self.reading = asyncio.Event()

    async def send(self, message: bytes) -> None:
        if b"eth_subscription" in message:
            await self.reading.wait()
        await super().send(message)


async def test_a_customers_connections_cannot_spend_one_balance_twice_while_sending() -> None:
    """The price is held while a notification is sent: two connections of one customer with
    credit for one notification, both waiting for their client, send and bill one."""
    hub = Hub(lambda: SNAP, _silent, lambda c: None)
    credits = CreditView()
    credits.replace_stored({CUSTOMER: 100})  # one notification's worth
    links = [SlowLink(), SlowLink()]
    sessions = [_session(link, hub, 0, credits=credits) for link in links]
    tasks = [asyncio.create_task(session.run()) for session, _ in sessions]
    for link in links:
        link.said.put_nowait(_sub())
    await _settle()
    _heads(hub.feeds()[0], 1, 1)
    await _settle()
    for link in links:
        link.reading.set()
        link.said.put_nowait(None)
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    await hub.stop()
    billed = sum(sum(v[1] for v in meter.take().rows.values()) for _, meter in sessions)
    delivered = sum(1 for link in links for m in link.got if m.get("method") == "eth_subscription")
    assert (billed, delivered) == (100, 1)
    assert credits.available(CUSTOMER) == 0
