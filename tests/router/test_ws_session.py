"""One client's WebSocket session (router/ws/session.py), told with a scripted connection and a
feed fed by hand: notifications billed one by one at the feed's route price, the subscriptions
ended with an error and close 4002 when the credits run out, a client that does not read
dropped with 4008 without holding up the feed's other subscribers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy, Scenario
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.ws_routes import WsRoute
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.context import RequestContext
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.pipeline import Reply
from chainrouter.router.ws.feed import ChainFeed
from chainrouter.router.ws.heads import Head
from chainrouter.router.ws.protocol import SubscriptionKind
from chainrouter.router.ws.session import (
    KEY_REVOKED,
    ORIGIN_NOT_ALLOWED,
    OUT_OF_CREDITS,
    POLICY,
    SLOW_CLIENT,
    WsLimits,
    WsSession,
)

pytestmark = pytest.mark.anyio

CHAIN, CUSTOMER, KEY_ID = 7, 1, 11
ROUTE = WsRoute(3, 5, CHAIN, "ws://node", {"newHeads": 100})


class Link:
    """A client: `said` is what it sends the router; `stuck` makes it stop reading."""

    def __init__(self, *, stuck: bool = False) -> None:
        self.said: asyncio.Queue[str | None] = asyncio.Queue()
        self.got: list[dict[str, Any]] = []
        self.closed: tuple[int, str] | None = None
        self.stuck = stuck

    async def receive(self) -> str | bytes | None:
        return await self.said.get()

    async def send(self, message: bytes) -> None:
        if self.stuck:
            await asyncio.Event().wait()  # never read
        self.got.append(json.loads(message))

    async def close(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.said.put_nowait(None)

    def abort(self, code: int, reason: str) -> None:
        self.closed = (code, reason)
        self.said.put_nowait(None)


class Hub:
    def __init__(self) -> None:
        self.the_feed = ChainFeed(CHAIN, lambda: [ROUTE], _never)
        self.the_feed.route = ROUTE
        self.the_feed.prices = dict(ROUTE.prices)
        self.the_feed.up.set()  # subscribed at its node
        self.left = 0
        self.revoked: set[int] = set()

    def feed(self, chain_id: int, access: KeyAccess) -> ChainFeed:
        return self.the_feed

    def served(self, chain_id: int, kind: SubscriptionKind) -> bool:
        return kind is SubscriptionKind.NEW_HEADS

    def leave(self, feed: ChainFeed) -> None:
        self.left += 1

    def key_live(self, key_id: int) -> bool:
        return key_id not in self.revoked

    def take_subscription(self, customer_id: int, entries: int) -> RpcError | None:
        return None

    def give_back_subscriptions(self, customer_id: int, count: int, entries: int) -> None:
        return None


async def _never(url: str) -> Any:
    raise AssertionError("the feed is fed by hand here")


async def _no_calls(body: bytes) -> Reply:
    raise AssertionError("no calls in these stories")


def _session(
    link: Link,
    hub: Hub,
    balance: int,
    queue: int = 1000,
    recheck: Any = None,
) -> tuple[WsSession, UsageMeter]:
    snapshot = RouterSnapshot(0, {}, RouteTable.build([], [], []), {})
    request = RequestContext(snapshot, 0, "b1", b"", str(CHAIN), "crk_x", None, None, None)
    request.access = KeyAccess(KEY_ID, CUSTOMER, ("*",), RoutingStrategy.ECONOMY, False)
    request.chain_id = CHAIN
    credits = CreditView()
    credits.replace_stored({CUSTOMER: balance})
    meter = UsageMeter()
    session = WsSession(
        link, request, hub, _no_calls, credits, meter, WsLimits(100, queue), recheck
    )
    return session, meter


def _heads(hub: Hub, first: int, count: int) -> None:
    heads = [
        Head(n, hex(n), hex(n - 1), json.dumps({"number": hex(n)}).encode())
        for n in range(first, first + count)
    ]
    refused = hub.the_feed.fanout.heads(heads)
    for sink in refused:
        sink.too_slow()


async def _subscribe(link: Link) -> str:
    link.said.put_nowait(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]})
    )
    for _ in range(100):
        if link.got:
            return str(link.got[0]["result"])
        await asyncio.sleep(0.01)
    raise AssertionError("no answer")


async def test_each_notification_is_billed_at_the_route_price_until_the_credits_run_out() -> None:
    link, hub = Link(), Hub()
    session, meter = _session(link, hub, balance=250)  # two notifications' worth
    running = asyncio.create_task(session.run())
    await _subscribe(link)
    _heads(hub, 1, 4)
    await asyncio.wait_for(running, 5)
    notifications = [m for m in link.got if m.get("method") == "eth_subscription"]
    assert [n["params"]["result"]["number"] for n in notifications] == ["0x1", "0x2"]
    assert link.got[-1]["error"] == {
        "code": -32601,
        "message": "insufficient credits: subscriptions ended",
    }
    assert link.closed == (OUT_OF_CREDITS, "insufficient credits")
    rows = meter.take().rows
    assert [(k[3], k[4], k[6], v) for k, v in rows.items()] == [
        ("newHeads", Scenario.SUBSCRIPTION, ROUTE.plan_id, [2, 200])
    ]
    assert len(hub.the_feed.fanout) == 0  # its subscriptions ended
    assert hub.left == 1


async def test_a_key_revoked_while_subscribed_ends_its_subscriptions_unbilled() -> None:
    """A revocation takes effect on open connections as on calls: the next notification is
    not sent nor billed, and the connection closes (4001)."""
    link, hub = Link(), Hub()
    session, meter = _session(link, hub, balance=10**9)
    running = asyncio.create_task(session.run())
    await _subscribe(link)
    _heads(hub, 1, 1)
    await asyncio.sleep(0.05)
    hub.revoked.add(KEY_ID)  # the next snapshot no longer holds the key
    _heads(hub, 2, 3)
    await asyncio.wait_for(running, 5)
    notifications = [m for m in link.got if m.get("method") == "eth_subscription"]
    assert [n["params"]["result"]["number"] for n in notifications] == ["0x1"]
    assert link.got[-1]["error"]["message"] == "API key revoked: subscriptions ended"
    assert link.closed == (KEY_REVOKED, "API key revoked")
    assert list(meter.take().rows.values()) == [[1, 100]]


async def test_a_client_that_does_not_read_is_dropped_and_the_others_go_on() -> None:
    hub = Hub()
    slow, fine = Link(), Link()
    slow_session, _ = _session(slow, hub, balance=10**9, queue=3)
    fine_session, _ = _session(fine, hub, balance=10**9)
    tasks = [asyncio.create_task(s.run()) for s in (slow_session, fine_session)]
    await _subscribe(slow)
    await _subscribe(fine)
    slow.stuck = True
    _heads(hub, 1, 10)
    await asyncio.wait_for(tasks[0], 5)
    assert slow.closed == (SLOW_CLIENT, "too slow to read its messages")
    for _ in range(100):
        if len(fine.got) == 11:
            break
        await asyncio.sleep(0.01)
    assert [m["params"]["result"]["number"] for m in fine.got[1:]] == [hex(n) for n in range(1, 11)]
    assert len(hub.the_feed.fanout) == 1  # the fine client's subscription alone
    fine.said.put_nowait(None)
    await asyncio.wait_for(tasks[1], 5)


@pytest.mark.parametrize(
    ("status", "code", "closed"),
    [
        (401, RpcCode.SERVER_ERROR, KEY_REVOKED),
        (403, RpcCode.SERVER_ERROR, ORIGIN_NOT_ALLOWED),
        (402, RpcCode.INSUFFICIENT_CREDITS, OUT_OF_CREDITS),
        (422, RpcCode.CHAIN_NOT_SUPPORTED, POLICY),
    ],
)
async def test_a_connection_its_checks_refuse_now_ends_its_subscriptions_and_says_why(
    status: int, code: RpcCode, closed: int
) -> None:
    """The upgrade's checks run again (the hub's `recheck`) refuse the connection: however
    quiet its subscriptions, they end with the refusal, and the close code tells why."""
    refusal = RpcError(status, code, "refused now")
    link, hub = Link(), Hub()
    verdict: list[RpcError | None] = [None]
    session, meter = _session(link, hub, balance=10**9, recheck=lambda: verdict[0])
    running = asyncio.create_task(session.run())
    await _subscribe(link)
    assert session.recheck() is None
    verdict[0] = refusal
    assert session.recheck() is refusal
    session.refused(refusal)
    await asyncio.wait_for(running, 5)
    assert link.got[-1]["error"] == {"code": int(code), "message": "refused now"}
    assert link.closed is not None
    assert link.closed[0] == closed
    assert session.closing
    assert hub.left == 1  # off the feed
    assert not meter.take().rows


class LogsHub(Hub):
    """Serves logs too, and holds a customer's subscriptions as the real hub does."""

    def __init__(self, refusal: RpcError | None = None) -> None:
        super().__init__()
        self.refusal = refusal
        self.held: list[int] = []  # entries of each subscription held

    def served(self, chain_id: int, kind: SubscriptionKind) -> bool:
        return True

    def take_subscription(self, customer_id: int, entries: int) -> RpcError | None:
        if self.refusal is None:
            self.held.append(entries)
        return self.refusal

    def give_back_subscriptions(self, customer_id: int, count: int, entries: int) -> None:
        assert sum(self.held) >= entries
        self.held = self.held[count:]


def _logs(call_id: int, addresses: int, topics: int = 0) -> str:
    log_filter: dict[str, Any] = {"address": [f"0x{n:040x}" for n in range(1, addresses + 1)]}
    if topics:
        log_filter["topics"] = [[f"0x{n:064x}" for n in range(1, topics + 1)]]
    return json.dumps(
        {"jsonrpc": "2.0", "id": call_id, "method": "eth_subscribe", "params": ["logs", log_filter]}
    )


async def _answers(link: Link, count: int) -> list[dict[str, Any]]:
    for _ in range(200):
        if len(link.got) >= count:
            return link.got[:count]
        await asyncio.sleep(0.01)
    raise AssertionError("no answer")


async def test_a_connections_filters_hold_at_most_its_bound_of_addresses_and_topics() -> None:
    link, hub = Link(), LogsHub()
    session, _ = _session(link, hub, balance=10**9)
    running = asyncio.create_task(session.run())
    link.said.put_nowait(_logs(1, 600))
    link.said.put_nowait(_logs(2, 350, topics=60))  # 1,010 with the first
    link.said.put_nowait(_logs(3, 350, topics=50))  # exactly 1,000
    first, refused, fits = await _answers(link, 3)
    assert "result" in first
    assert refused["error"]["data"] == {"max_filter_entries": 1000}
    assert "600" in refused["error"]["message"]
    assert "result" in fits
    assert hub.held == [600, 400]
    link.said.put_nowait(None)
    await asyncio.wait_for(running, 5)
    assert hub.held == []  # given back as the connection closed


async def test_a_subscription_past_the_customers_bounds_is_refused_with_the_hubs_reason() -> None:
    refusal = RpcError(429, RpcCode.SERVER_ERROR, "too many subscriptions for this customer")
    link, hub = Link(), LogsHub(refusal)
    session, _ = _session(link, hub, balance=10**9)
    running = asyncio.create_task(session.run())
    link.said.put_nowait(_logs(1, 3))
    (answer,) = await _answers(link, 1)
    assert answer["error"]["message"] == "too many subscriptions for this customer"
    link.said.put_nowait(None)
    await asyncio.wait_for(running, 5)
