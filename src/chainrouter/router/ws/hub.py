"""A worker's chain feeds (`feed.py`): one per chain and routing strategy, made when its first
client subscribes and stopped a grace period after its last one leaves, so that every client of
a chain shares one upstream subscription and churn does not dial the node again and again;
past the grace period the feeds' dials of each node are paced (`dials.py`).
Feeds try nodes in the order the WebSocket nodes' health gives for their strategy
(`node_health.py`).

The hub also holds the bounds that follow who holds what (`WsBounds`, design notes "Bounds"):
connections per client address and key (a dapp's one public key serves its visitors from their
many addresses; one address cannot take them all), and per customer, all its keys together,
connections, subscriptions and filter entries, so that one customer cannot take a router's
memory. It runs the upgrade's access checks again on every open connection twice a second, so
that a key deactivated, revoked or re-domained, or a customer out of credits, loses its
connections within that and the configuration's reload (`recheck`), whether or not they are
sent anything; and, where the operator sets a holding price, it asks every open connection
to charge the time its subscriptions were held once a step (`holding.py`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.ws_routes import WsRoute
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.ws.dials import DialPacer, DialPolicy
from chainrouter.router.ws.fanout import Sink
from chainrouter.router.ws.feed import DEFAULT_POLICY, ChainFeed, Connect, FeedPolicy
from chainrouter.router.ws.node_health import WsNodeHealth
from chainrouter.router.ws.protocol import SubscriptionKind


class Watched(Protocol):
    """An open connection whose access the hub checks again (router/ws/session.py)."""

    @property
    def checked_as(self) -> Hashable: ...

    @property
    def closing(self) -> bool: ...

    def recheck(self) -> RpcError | None: ...

    def refused(self, refusal: RpcError) -> None: ...

    def charge_held(self) -> None:
        """Charge the time its subscriptions were held since the last charge."""
        ...


@dataclass(frozen=True, slots=True)
class WsBounds:
    """What one holder may hold open in one router process (docs/security.md, "Bounds")."""

    connections_per_address: int = 50  # of one key from one client address
    connections_per_customer: int = 10_000  # all its keys together
    subscriptions_per_customer: int = 100_000
    filter_entries_per_customer: int = 200_000  # logs filters' addresses and topics


def _too_many(what: str, bound: int, field: str) -> RpcError:
    return RpcError(429, RpcCode.SERVER_ERROR, f"too many {what} (at most {bound})", {field: bound})


class Hub:
    def __init__(
        self,
        snapshot: Callable[[], RouterSnapshot],
        connect: Connect,
        chain_head: Callable[[int], int | None],
        *,
        bounds: WsBounds = WsBounds(),
        policy: FeedPolicy = DEFAULT_POLICY,
        health: WsNodeHealth | None = None,
        recheck_interval_s: float = 0.5,
        feed_grace_s: float = 30.0,
        holding_step_s: float | None = None,
        dials: DialPolicy | None = None,
    ) -> None:
        self._snapshot = snapshot
        self._connect = connect
        self._chain_head = chain_head
        self._policy = policy
        self.health = health if health is not None else WsNodeHealth(connect, chain_head)
        self.bounds = bounds
        self._feeds: dict[tuple[int, RoutingStrategy], tuple[ChainFeed, asyncio.Task[None]]] = {}
        self._connections: dict[tuple[int, str], int] = {}  # (key id, address) -> open ones
        self._customer_connections: dict[int, int] = {}
        self._subscriptions: dict[int, tuple[int, int]] = {}  # customer -> (count, entries)
        self._keys_of: RouterSnapshot | None = None  # the snapshot `_live_keys` was read from
        self._live_keys: frozenset[int] = frozenset()
        self._watched: dict[Watched, None] = {}  # open connections, in the order they opened
        self._recheck_s = recheck_interval_s
        self._watcher: asyncio.Task[None] | None = None
        # Every this long each open connection charges the time its subscriptions were held
        # (router/ws/holding.py); None: holding is free, nothing to charge.
        self._holding_step_s = holding_step_s
        self._charger: asyncio.Task[None] | None = None
        # A feed nobody is subscribed to runs this long before it stops: a client that
        # unsubscribes and subscribes again (or a page reloaded) does not make the router dial
        # the provider's node again each time.
        self._feed_grace_s = feed_grace_s
        self._idle: dict[int, int] = {}  # id of a feed nobody is on -> the leave that left it so
        # Every feed of the process dials its nodes through this (router/ws/dials.py): churn
        # past the grace period, or a node that fails, is not dialled in a tight loop.
        self.dials = DialPacer(dials)
        self._leaves = 0

    def key_live(self, key_id: int) -> bool:
        """Whether the key is still in the configuration (not revoked or deleted since its
        connection opened); read once per snapshot."""
        snapshot = self._snapshot()
        if snapshot is not self._keys_of:
            self._keys_of = snapshot
            self._live_keys = frozenset(a.key_id for a in snapshot.keys_by_hash.values())
        return key_id in self._live_keys

    # -- connections ------------------------------------------------------------------------

    def refusal(self, access: KeyAccess, address: str) -> RpcError | None:
        """Why the key may not open one more connection from `address` (HTTP 429), or None."""
        bounds = self.bounds
        if self._connections.get((access.key_id, address), 0) >= bounds.connections_per_address:
            return _too_many(
                "WebSocket connections for this key from this address",
                bounds.connections_per_address,
                "max_connections_per_address",
            )
        customer = access.customer_id
        if self._customer_connections.get(customer, 0) >= bounds.connections_per_customer:
            return _too_many(
                "WebSocket connections for this customer",
                bounds.connections_per_customer,
                "max_connections_per_customer",
            )
        return None

    def open(self, access: KeyAccess, address: str) -> RpcError | None:
        """Count one more connection of the key from `address`; its refusal past a bound
        (nothing counted)."""
        refusal = self.refusal(access, address)
        if refusal is None:
            held = (access.key_id, address)
            self._connections[held] = self._connections.get(held, 0) + 1
            customer = access.customer_id
            self._customer_connections[customer] = self._customer_connections.get(customer, 0) + 1
        return refusal

    def gauges(self) -> dict[str, int]:
        """Client connections and feeds open now (read from any thread: each read of a
        dictionary here is one step under the interpreter lock)."""
        return {"connections": sum(list(self._connections.values())), "feeds": len(self._feeds)}

    def close(self, access: KeyAccess, address: str) -> None:
        _count_down(self._connections, (access.key_id, address))
        _count_down(self._customer_connections, access.customer_id)

    def take_subscription(self, customer_id: int, entries: int) -> RpcError | None:
        """Count one more subscription of the customer, with its filter entries; the refusal
        past the customer's bounds (nothing counted)."""
        bounds = self.bounds
        count, held = self._subscriptions.get(customer_id, (0, 0))
        if count >= bounds.subscriptions_per_customer:
            return _too_many(
                "subscriptions for this customer",
                bounds.subscriptions_per_customer,
                "max_subscriptions_per_customer",
            )
        if held + entries > bounds.filter_entries_per_customer:
            return _too_many(
                "filter addresses and topics for this customer",
                bounds.filter_entries_per_customer,
                "max_filter_entries_per_customer",
            )
        self._subscriptions[customer_id] = (count + 1, held + entries)
        return None

    def give_back_subscriptions(self, customer_id: int, count: int, entries: int) -> None:
        held, held_entries = self._subscriptions.get(customer_id, (0, 0))
        if held - count > 0:
            self._subscriptions[customer_id] = (held - count, max(held_entries - entries, 0))
        else:
            self._subscriptions.pop(customer_id, None)

    def watch(self, connection: Watched) -> None:
        """Check `connection`'s access again with every other's from now on, until `unwatch`."""
        self._watched[connection] = None
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.create_task(self._rechecking(), name="ws-recheck")
        if self._holding_step_s is not None and (self._charger is None or self._charger.done()):
            self._charger = asyncio.create_task(self._charging(), name="ws-holding")

    def unwatch(self, connection: Watched) -> None:
        self._watched.pop(connection, None)

    def recheck(self) -> int:
        """Run the upgrade's checks again for every open connection, once per distinct chain,
        key and page (their verdict is the same), and close the ones now refused. How many."""
        verdicts: dict[Hashable, RpcError | None] = {}
        closed = 0
        for connection in list(self._watched):
            if connection.closing:
                continue
            key = connection.checked_as
            if key not in verdicts:
                verdicts[key] = connection.recheck()
            refusal = verdicts[key]
            if refusal is not None:
                connection.refused(refusal)
                closed += 1
        return closed

    async def _rechecking(self) -> None:
        while self._watched:
            await asyncio.sleep(self._recheck_s)
            self.recheck()

    async def _charging(self) -> None:
        """One step of the holding price for every open connection, step after step."""
        assert self._holding_step_s is not None
        while self._watched:
            await asyncio.sleep(self._holding_step_s)
            for connection in list(self._watched):
                connection.charge_held()

    # -- feeds (router/ws/session.py's SessionHub) ---------------------------------------------

    def served(self, chain_id: int, kind: SubscriptionKind) -> bool:
        return self._snapshot().ws_routes.serves(chain_id, kind)

    def feed(self, chain_id: int, access: KeyAccess) -> ChainFeed:
        key = (chain_id, access.strategy)
        found = self._feeds.get(key)
        if found is not None:
            self._idle.pop(id(found[0]), None)  # taken again within its grace period
            return found[0]
        strategy = access.strategy
        made = ChainFeed(
            chain_id,
            lambda: self.health.order(self._snapshot().ws_routes.routes(chain_id), strategy),
            self._connect,
            chain_head=lambda: self._chain_head(chain_id),
            on_refused=_close_slow,
            policy=self._policy,
            watch=self.health,
            dials=self.dials,
        )
        task = asyncio.create_task(made.run(), name=f"ws-feed-{chain_id}-{access.strategy}")
        self._feeds[key] = (made, task)
        return made

    def leave(self, feed: ChainFeed) -> None:
        """A client left the feed (or gave up waiting for it): stop it once nobody has been
        subscribed or waiting for the grace period (at once without one)."""
        if len(feed.fanout) or feed.waiting:
            return
        self._leaves += 1
        self._idle[id(feed)] = leave = self._leaves
        if self._feed_grace_s <= 0:
            self._stop_idle(feed, leave)
        else:
            loop = asyncio.get_running_loop()
            loop.call_later(self._feed_grace_s, self._stop_idle, feed, leave)

    def _stop_idle(self, feed: ChainFeed, leave: int) -> None:
        if self._idle.get(id(feed)) != leave or len(feed.fanout) or feed.waiting:
            return  # taken again since (and maybe left again: that leave's timer decides)
        del self._idle[id(feed)]
        for key, (made, task) in list(self._feeds.items()):
            if made is feed:
                del self._feeds[key]
                task.cancel()

    def feeds(self) -> list[ChainFeed]:
        return [feed for feed, _ in self._feeds.values()]

    async def stop(self) -> None:
        tasks = [task for _, task in self._feeds.values()]
        for helper in (self._watcher, self._charger):
            if helper is not None:
                tasks.append(helper)
        self._watcher = self._charger = None
        self._feeds.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def all_routes(self) -> list[WsRoute]:
        """Every WebSocket route of the snapshot (what the health checker checks)."""
        return [r for routes in self._snapshot().ws_routes.by_chain.values() for r in routes]


def _close_slow(sinks: list[Sink]) -> None:
    for sink in sinks:
        sink.too_slow()


def _count_down(counts: dict[Any, int], key: Any) -> None:
    held = counts.get(key, 0) - 1
    if held > 0:
        counts[key] = held
    else:
        counts.pop(key, None)
