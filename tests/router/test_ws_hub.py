"""A worker's hub of WebSocket feeds (router/ws/hub.py): one feed per chain and strategy shared
by its clients, stopped with its last subscriber; each key's connections bounded."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.ws.fanout import Subscription
from chainrouter.router.ws.hub import Hub, WsBounds
from chainrouter.router.ws.protocol import SubscriptionKind
from chainrouter.router.ws.upstream import UpstreamSocket

pytestmark = pytest.mark.anyio

SNAPSHOT = RouterSnapshot(0, {}, RouteTable.build([], [], []), {})


async def _unreachable(url: str) -> UpstreamSocket:
    raise OSError("no node in these tests")


def _access(key_id: int, strategy: RoutingStrategy = RoutingStrategy.ECONOMY) -> KeyAccess:
    return KeyAccess(key_id, 1, ("*",), strategy, False)


class Sink:
    def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
        return True

    def too_slow(self) -> None:
        raise AssertionError("never")


def _key(key_id: int, customer_id: int = 1) -> KeyAccess:
    return KeyAccess(key_id, customer_id, ("*",), RoutingStrategy.ECONOMY, False)


def test_a_key_holds_at_most_its_bound_of_connections_from_one_address() -> None:
    """A dapp's one public key serves its visitors from their many addresses; one address
    cannot take more than its bound of them."""
    bounds = WsBounds(connections_per_address=2, connections_per_customer=100)
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, bounds=bounds)
    key = _key(1)
    assert hub.open(key, "203.0.113.1") is None
    assert hub.open(key, "203.0.113.1") is None
    refused = hub.open(key, "203.0.113.1")
    assert refused is not None
    assert refused.http_status == 429
    assert refused.data == {"max_connections_per_address": 2}
    assert hub.refusal(key, "203.0.113.1") is not None
    for visitor in range(50):  # the same key from other addresses
        assert hub.open(key, f"198.51.100.{visitor}") is None
    assert hub.open(_key(2), "203.0.113.1") is None  # another key from the same address
    hub.close(key, "203.0.113.1")
    assert hub.open(key, "203.0.113.1") is None


def test_a_customers_keys_together_hold_at_most_its_bound_of_connections() -> None:
    bounds = WsBounds(connections_per_address=50, connections_per_customer=3)
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, bounds=bounds)
    for key_id in range(3):  # one key each: no key is at its own bound
        assert hub.open(_key(key_id), "203.0.113.1") is None
    refused = hub.open(_key(9), "198.51.100.7")
    assert refused is not None
    assert refused.data == {"max_connections_per_customer": 3}
    assert hub.open(_key(10, customer_id=2), "203.0.113.1") is None  # another customer
    hub.close(_key(0), "203.0.113.1")
    assert hub.open(_key(9), "198.51.100.7") is None


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 3), st.integers(0, 400)), max_size=60)
)
def test_a_customers_subscriptions_and_filter_entries_never_pass_their_bounds(
    steps: list[tuple[bool, int, int]],
) -> None:
    """Whatever the order of subscriptions taken and given back, the customer holds at most
    its bounds, and a refusal counts nothing."""
    bounds = WsBounds(subscriptions_per_customer=5, filter_entries_per_customer=1000)
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, bounds=bounds)
    held: list[int] = []  # the entries of each subscription held
    for take, pick, entries in steps:
        if take:
            refusal = hub.take_subscription(1, entries)
            fits = len(held) < 5 and sum(held) + entries <= 1000
            assert (refusal is None) == fits
            if refusal is None:
                held.append(entries)
        elif held:
            given = held.pop(pick % len(held))
            hub.give_back_subscriptions(1, 1, given)
    assert hub.take_subscription(2, 1000) is None  # another customer has its own


async def test_clients_of_a_chain_and_strategy_share_one_feed_stopped_with_the_last() -> None:
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, feed_grace_s=0)
    first = hub.feed(1, _access(1))
    assert hub.feed(1, _access(2)) is first  # another key, the same strategy: shared
    assert hub.feed(1, _access(3, RoutingStrategy.PERFORMANCE)) is not first
    assert hub.feed(2, _access(1)) is not first
    first.fanout.add(Subscription("0x1", SubscriptionKind.NEW_HEADS, Sink()))
    hub.leave(first)
    assert first in hub.feeds()  # still subscribed to
    first.fanout.remove("0x1")
    hub.leave(first)
    assert first not in hub.feeds()
    await hub.stop()
    assert hub.feeds() == []


class Watched:
    """An open connection as the hub sees it, with the verdict its checks give now."""

    def __init__(self, checked_as: object, verdicts: dict[object, RpcError | None]) -> None:
        self.checked_as = checked_as
        self._verdicts = verdicts
        self.asked = 0
        self.closed_for: RpcError | None = None

    @property
    def closing(self) -> bool:
        return self.closed_for is not None

    def recheck(self) -> RpcError | None:
        self.asked += 1
        return self._verdicts.get(self.checked_as)

    def refused(self, refusal: RpcError) -> None:
        self.closed_for = refusal

    def charge_held(self) -> None:
        raise AssertionError("no holding price in these tests")


async def test_every_open_connection_is_checked_again_once_per_key_and_page() -> None:
    """Connections that would get the same verdict (chain, key, page) share one run of the
    checks; the refused ones close, the others stay, whether or not they were sent anything."""
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None)
    revoked = RpcError(401, RpcCode.SERVER_ERROR, "invalid API key")
    verdicts: dict[object, RpcError | None] = {}
    quiet = [Watched(("1", "crk_a", None), verdicts) for _ in range(50)]
    other = [Watched(("1", "crk_b", None), verdicts) for _ in range(3)]
    for connection in quiet + other:
        hub.watch(connection)
    assert hub.recheck() == 0
    verdicts[("1", "crk_a", None)] = revoked
    assert hub.recheck() == 50
    assert all(connection.closed_for is revoked for connection in quiet)
    assert not any(connection.closing for connection in other)
    assert sum(connection.asked for connection in quiet) == 2  # once per sweep, not per socket
    for connection in quiet + other:
        hub.unwatch(connection)
    await hub.stop()


async def test_the_hub_checks_its_connections_again_by_itself() -> None:
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, recheck_interval_s=0.01)
    verdicts: dict[object, RpcError | None] = {}
    connection = Watched(("1", "crk_a", None), verdicts)
    hub.watch(connection)
    verdicts[("1", "crk_a", None)] = RpcError(402, RpcCode.INSUFFICIENT_CREDITS, "insufficient")
    for _ in range(200):
        if connection.closing:
            break
        await asyncio.sleep(0.01)
    assert connection.closing
    hub.unwatch(connection)
    await hub.stop()


async def test_a_feed_outlives_its_last_subscriber_by_the_grace_period() -> None:
    """Unsubscribing and subscribing again within the grace period finds the same feed, still
    subscribed at its node: churn does not dial the node again. Past it, nobody back, it stops."""
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, feed_grace_s=0.2)
    feed = hub.feed(1, _access(1))
    for turn in range(8):  # churn: each time the last subscriber leaves, then one comes back
        feed.fanout.add(Subscription(f"0x{turn}", SubscriptionKind.NEW_HEADS, Sink()))
        feed.fanout.remove(f"0x{turn}")
        hub.leave(feed)
        await asyncio.sleep(0.05)
        assert hub.feed(1, _access(2)) is feed  # as a session asks for it again
    feed.fanout.add(Subscription("0xlast", SubscriptionKind.NEW_HEADS, Sink()))
    feed.fanout.remove("0xlast")
    hub.leave(feed)
    for _ in range(100):
        if feed not in hub.feeds():
            break
        await asyncio.sleep(0.02)
    assert feed not in hub.feeds()
    assert hub.feed(1, _access(1)) is not feed  # a new one
    await hub.stop()
