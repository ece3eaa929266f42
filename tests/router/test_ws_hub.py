"""A worker's hub of WebSocket feeds (router/ws/hub.py): one feed per chain and strategy shared
by its clients, stopped with its last subscriber; each key's connections bounded."""

from __future__ import annotations

import asyncio

import pytest

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.jsonrpc.errors import RpcCode, RpcError
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
