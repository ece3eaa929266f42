"""What the public lists read: chains with nodes, WebSocket nodes and prices, node health."""

from __future__ import annotations

from decimal import Decimal

from sqlalchemy import Connection, func, select

from chainrouter.domain.capabilities import Capabilities
from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import NodeStatus
from chainrouter.domain.routing import NodeHealth
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.chains import row_to_chain
from chainrouter.stores.sql.snapshot import load_ws_routes


def chains_by_id(connection: Connection, chain_ids: set[int]) -> list[Chain]:
    if not chain_ids:
        return []
    query = select(t.chains).where(t.chains.c.chain_id.in_(chain_ids)).order_by(t.chains.c.chain_id)
    return [row_to_chain(row) for row in connection.execute(query)]


def ws_chain_ids(connection: Connection) -> set[int]:
    query = select(t.ws_nodes.c.chain_id).where(t.ws_nodes.c.status == NodeStatus.HEALTHY.value)
    return set(connection.execute(query.distinct()).scalars())


def ws_notification_prices(connection: Connection) -> list[tuple[int, str, int]]:
    """(chain, subscription type, lowest cost) over the WebSocket routes routers would use: an
    enabled WebSocket node whose plan prices the type on its chain (domain/ws_routes.py)."""
    found = []
    for chain_id, routes in sorted(load_ws_routes(connection).by_chain.items()):
        for kind in sorted({kind for route in routes for kind in route.prices}):
            costs = [cost for route in routes if (cost := route.price(kind)) is not None]
            found.append((chain_id, kind, min(costs)))
    return found


def node_health(connection: Connection) -> dict[int, NodeHealth]:
    """What routers last reported per node; nodes never reported are absent."""
    query = select(t.node_health.c.node_id, t.node_health.c.in_sync, t.node_health.c.latency_ms)
    return {
        row.node_id: NodeHealth(
            in_sync=row.in_sync,
            latency_ms=None if row.latency_ms is None else float(Decimal(row.latency_ms)),
        )
        for row in connection.execute(query)
    }


def reported_capabilities(connection: Connection) -> dict[int, Capabilities]:
    """What routers last reported each node can answer; nodes never reported are absent."""
    query = select(t.node_health.c.node_id, t.node_health.c.capabilities).where(
        t.node_health.c.capabilities.is_not(None)
    )
    return {
        row.node_id: Capabilities.from_json(row.capabilities) for row in connection.execute(query)
    }


def health_version(connection: Connection) -> object:
    """Changes whenever a router reports health; part of the price list's cache key."""
    return connection.execute(select(func.max(t.node_health.c.checked_at))).scalar_one()
