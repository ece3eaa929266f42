"""The public lists: supported chains (HTTP and WebSocket) and what calls cost.

The RPC price list is computed with the router's own routing code over the same tables, so the
price shown for (chain, method, strategy) is what the first-choice route of that strategy charges
now. Performance ordering uses the node health routers report (`node_health`); a node not yet
reported counts as in sync and unmeasured, as it does in a router that has not checked it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from sqlalchemy import Engine

from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import order_routes
from chainrouter.stores.sql import public_lists
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.snapshot import load_route_table

_CACHE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class RoutePrice:
    vm: str
    chain_id: int
    method: str
    strategy: RoutingStrategy
    cost_nano: int


@dataclass(frozen=True, slots=True)
class NotificationPrice:
    chain_id: int
    subscription_type: str
    cost_nano: int


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
            table = load_route_table(connection)
            health = public_lists.node_health(connection)
            out_of_sync = {node_id for node_id, known in health.items() if not known.in_sync}
            latency_ms = {
                node_id: known.latency_ms
                for node_id, known in health.items()
                if known.latency_ms is not None
            }
            prices = []
            served_chains = set()
            for chain_id, method, routes in table.offered():
                served_chains.add(chain_id)
                for strategy in RoutingStrategy:
                    ordered = order_routes(routes, strategy, out_of_sync, latency_ms)
                    if ordered:
                        prices.append(
                            RoutePrice("evm", chain_id, method, strategy, ordered[0].cost_nano)
                        )
            return PublicLists(
                http_chains=public_lists.chains_by_id(connection, served_chains),
                ws_chains=public_lists.chains_by_id(
                    connection, public_lists.ws_chain_ids(connection)
                ),
                route_prices=prices,
                ws_prices=[
                    NotificationPrice(chain_id, kind, cost)
                    for chain_id, kind, cost in public_lists.ws_notification_prices(connection)
                ],
            )
