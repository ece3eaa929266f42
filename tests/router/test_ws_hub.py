"""A worker's hub of WebSocket feeds (router/ws/hub.py): one feed per chain and strategy shared
by its clients, stopped with its last subscriber; each key's connections bounded."""

from __future__ import annotations

import pytest

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.router.ws.fanout import Subscription
from chainrouter.router.ws.hub import Hub
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


def test_a_key_holds_at_most_its_bound_of_connections() -> None:
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None, max_connections_per_key=2)
    assert hub.open(1)
    assert hub.open(1)
    assert not hub.has_room(1)
    assert not hub.open(1)
    assert hub.open(2)  # another key has its own
    hub.close(1)
    assert hub.open(1)


async def test_clients_of_a_chain_and_strategy_share_one_feed_stopped_with_the_last() -> None:
    hub = Hub(lambda: SNAPSHOT, _unreachable, lambda chain: None)
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
