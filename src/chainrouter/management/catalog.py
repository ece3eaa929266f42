"""The public lists: supported chains (HTTP and WebSocket) and what calls cost.

The RPC price list is computed with the router's own routing code over the same tables, so the
price shown for (chain, method, strategy) is what the first-choice route of that strategy charges
now. Performance ordering uses the node health routers report (`node_health`); a node not yet
reported counts as in sync and unmeasured, as it does in a router that has not checked it.

Capabilities count as in the router (docs/router.md, "Node capabilities"): a `trace_*` or
`debug_*` method is priced on nodes not known to lack the namespace; and where a call that reads
old state costs more than one at the head (only archive nodes keep it, at their price), a second
row with `requires: "archive"` shows that price.

A provider's dearer price waits out its notice (stores/sql/plans.py); each entry it will change
carries the price the entry will show once it applies, and when: the table is priced again as of
each scheduled time, so the first choice then may be another route.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, Engine

from chainrouter.domain.capabilities import Capabilities
from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.requirements import METHODS, Reads, needs_of
from chainrouter.domain.routing import MethodPrice, Route, RouteTable, order_routes
from chainrouter.domain.ws_routes import WsRouteTable, notification_price, order_ws_routes
from chainrouter.stores.sql import public_lists
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.schema import utcnow
from chainrouter.stores.sql.snapshot import (
    load_route_table,
    scheduled_prices,
    scheduled_ws_times,
)

_CACHE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class RoutePrice:
    vm: str
    chain_id: int
    method: str
    strategy: RoutingStrategy
    cost_nano: int
    requires: str | None = None  # a capability the price applies to ("archive"); None: any call
    # What the row will cost from `next_cost_from`, when a price set with notice changes it
    # (the first such change); None: no change scheduled.
    next_cost_nano: int | None = None
    next_cost_from: datetime | None = None


@dataclass(frozen=True, slots=True)
class NotificationPrice:
    chain_id: int
    subscription_type: str
    strategy: RoutingStrategy
    cost_nano: int
    # As RoutePrice's: the first scheduled change of this price, and when.
    next_cost_nano: int | None = None
    next_cost_from: datetime | None = None


@dataclass(frozen=True, slots=True)
class PublicLists:
    http_chains: list[Chain]
    ws_chains: list[Chain]
    route_prices: list[RoutePrice]
    ws_prices: list[NotificationPrice]


class CatalogLists:
    """Computes the lists from storage; keeps them while the configuration and the reported
    health are unchanged, and at most a few seconds, so that list requests stay cheap."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._cached: tuple[object, float, PublicLists] | None = None

    def current(self) -> PublicLists:
        with self._lock:
            with self._engine.connect() as connection:
                stamp = (
                    read_config_version(connection),
                    public_lists.health_version(connection),
                )
            cached = self._cached
            if cached and cached[0] == stamp and time.monotonic() - cached[1] < _CACHE_SECONDS:
                return cached[2]
            lists = self._compute()
            self._cached = (stamp, time.monotonic(), lists)
            return lists

    def _compute(self) -> PublicLists:
        with self._engine.connect() as connection, connection.begin():
            now = utcnow()
            table = load_route_table(connection, now)
            health = public_lists.node_health(connection)
            out_of_sync = {node_id for node_id, known in health.items() if not known.in_sync}
            latency_ms = {
                node_id: known.latency_ms
                for node_id, known in health.items()
                if known.latency_ms is not None
            }
            reported = public_lists.reported_capabilities(connection)

            def first_choices(method: str, routes: tuple[Route, ...]) -> _Choices:
                return _first_choices(method, routes, reported, out_of_sync, latency_ms)

            prices = []
            served_chains = set()
            offered = list(table.offered())
            schedule = _Schedule(table, offered, scheduled_prices(connection, now))
            for chain_id, method, routes in offered:
                served_chains.add(chain_id)
                costs = first_choices(method, routes)
                later = [
                    (when, first_choices(method, found))
                    for when, found in schedule.routes(chain_id, method)
                ]
                for (strategy, requires), cost in costs.items():
                    if requires is not None and not any(
                        choices[(strategy, requires)] != choices[(strategy, None)]
                        for choices in (costs, *(c for _, c in later))
                    ):
                        continue  # old state costs what any call does, now and as scheduled
                    change = next(
                        (
                            (when, choices[(strategy, requires)])
                            for when, choices in later
                            if choices[(strategy, requires)] != cost
                        ),
                        None,
                    )
                    prices.append(
                        RoutePrice(
                            "evm",
                            chain_id,
                            method,
                            strategy,
                            cost,
                            requires,
                            next_cost_nano=None if change is None else change[1],
                            next_cost_from=None if change is None else change[0],
                        )
                    )
            return PublicLists(
                http_chains=public_lists.chains_by_id(connection, served_chains),
                ws_chains=public_lists.chains_by_id(
                    connection, public_lists.ws_chain_ids(connection)
                ),
                route_prices=prices,
                ws_prices=_notification_prices(connection, now),
            )


def _notification_prices(connection: Connection, now: datetime) -> list[NotificationPrice]:
    """Per chain, subscription type and strategy: what the feed of that strategy charges now,
    ordering the WebSocket nodes as routers do with the health they report; and its first
    scheduled change, from the routes as priced at each time a price set with notice applies
    (WebSocket rows are few: the table is read again for each such time)."""
    out, latency_ms = public_lists.ws_node_health(connection)

    def priced(table: WsRouteTable) -> dict[tuple[int, str, RoutingStrategy], int]:
        found = {}
        for chain_id, routes in sorted(table.by_chain.items()):
            kinds = sorted({kind for route in routes for kind in route.prices})
            for kind in kinds:
                for strategy in RoutingStrategy:
                    ordered = order_ws_routes(routes, strategy, out, latency_ms)
                    cost = notification_price(ordered, kind)
                    if cost is not None:
                        found[(chain_id, kind, strategy)] = cost
        return found

    current = priced(public_lists.ws_routes(connection, now))
    later = [
        (when, priced(public_lists.ws_routes(connection, when)))
        for when in scheduled_ws_times(connection, now)
    ]
    prices = []
    for (chain_id, kind, strategy), cost in current.items():
        change = next(
            (
                (when, costs[(chain_id, kind, strategy)])
                for when, costs in later
                if costs.get((chain_id, kind, strategy), cost) != cost
            ),
            None,
        )
        prices.append(
            NotificationPrice(
                chain_id,
                kind,
                strategy,
                cost,
                next_cost_nano=None if change is None else change[1],
                next_cost_from=None if change is None else change[0],
            )
        )
    return prices


# The first choice's price per (strategy, requires): requires None for any call, "archive" for
# one reading state only archive nodes keep (present where a method reads state and some route
# can serve it).
_Choices = dict[tuple[RoutingStrategy, str | None], int]


def _first_choices(
    method: str,
    routes: tuple[Route, ...],
    reported: dict[int, Capabilities],
    out_of_sync: set[int],
    latency_ms: dict[int, float],
) -> _Choices:
    capable, archive = _capable_routes(method, routes, reported)
    choices: _Choices = {}
    for strategy in RoutingStrategy:
        ordered = order_routes(capable, strategy, out_of_sync, latency_ms)
        if not ordered:
            continue
        choices[(strategy, None)] = ordered[0].cost_nano
        old = order_routes(archive, strategy, out_of_sync, latency_ms)
        if old:
            choices[(strategy, "archive")] = old[0].cost_nano
    return choices


class _Schedule:
    """Per (chain, method): its routes as they will be priced at each time a price set with
    notice changes one of them, earliest first; each table has every price due by then in place
    (what routers will load then)."""

    def __init__(
        self,
        table: RouteTable,
        offered: list[tuple[int, str, tuple[Route, ...]]],
        scheduled: list[tuple[datetime, tuple[MethodPrice, ...]]],
    ) -> None:
        chains_of: dict[str, list[int]] = {}
        for chain_id, method, _ in offered:
            chains_of.setdefault(method, []).append(chain_id)
        self._later: dict[tuple[int, str], list[tuple[datetime, tuple[Route, ...]]]] = {}
        ahead = table.looking_ahead() if scheduled else None
        for when, found in scheduled:
            assert ahead is not None
            ahead.reprice(found)
            touched = {(price.method, price.chain_id) for price in found}
            for method in {method for method, _ in touched}:
                for chain_id in chains_of.get(method, ()):
                    if (method, chain_id) in touched or (method, None) in touched:
                        self._later.setdefault((chain_id, method), []).append(
                            (when, ahead.routes(chain_id, method))
                        )

    def routes(self, chain_id: int, method: str) -> list[tuple[datetime, tuple[Route, ...]]]:
        """(when, the routes of (chain, method) from then) for each time one of their prices
        changes, earliest first."""
        return self._later.get((chain_id, method), [])


def _capable_routes(
    method: str, routes: tuple[Route, ...], reported: dict[int, Capabilities]
) -> tuple[tuple[Route, ...], tuple[Route, ...]]:
    """The routes that can serve `method` at the head, and those that can for old state too."""
    namespace = needs_of(method, None, None).namespace

    def capabilities(route: Route) -> Capabilities:
        return reported.get(route.node.node_id, route.node.capabilities)

    def traces(route: Route) -> bool:
        caps = capabilities(route)
        return not (
            (namespace == "trace" and caps.trace is False)
            or (namespace == "debug" and caps.debug is False)
        )

    capable = tuple(route for route in routes if traces(route))
    spec = METHODS.get(method)
    if spec is None or spec.reads not in (Reads.STATE, Reads.TRACE):
        return capable, ()
    return capable, tuple(route for route in capable if capabilities(route).archive)
