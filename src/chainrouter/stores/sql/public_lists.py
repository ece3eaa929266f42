"""What the public lists read: chains with nodes, WebSocket nodes and prices, node health."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, func, select

from chainrouter.domain.capabilities import Capabilities
from chainrouter.domain.chains import Chain
from chainrouter.domain.enums import NodeStatus
from chainrouter.domain.routing import NodeHealth
from chainrouter.domain.ws_routes import WsRouteTable
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


def ws_routes(connection: Connection, at: datetime | None = None) -> WsRouteTable:
    """The WebSocket routes routers would use (domain/ws_routes.py), priced as at `at`
    (default: now)."""
    return load_ws_routes(connection, at)


def ws_node_health(connection: Connection) -> tuple[set[int], dict[int, float]]:
    """What routers last reported of WebSocket nodes: those failing or out of sync, and the
    measured latency of each; nodes never reported count as usable and unmeasured."""
    health = t.ws_node_health
    query = select(
        health.c.ws_node_id, health.c.in_sync, health.c.consecutive_failures, health.c.latency_ms
    )
    out: set[int] = set()
    latency: dict[int, float] = {}
    for row in connection.execute(query):
        if row.consecutive_failures or not row.in_sync:
            out.add(row.ws_node_id)
        if row.latency_ms is not None:
            latency[row.ws_node_id] = float(Decimal(row.latency_ms))
    return out, latency


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
    return (
        connection.execute(select(func.max(t.node_health.c.checked_at))).scalar_one(),
        connection.execute(select(func.max(t.ws_node_health.c.checked_at))).scalar_one(),
    )
