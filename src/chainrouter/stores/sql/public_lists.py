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

WS_TARGET_TYPE = "ws"  # plan method rows priced for WebSocket notifications


def chains_by_id(connection: Connection, chain_ids: set[int]) -> list[Chain]:
    if not chain_ids:
        return []
    query = select(t.chains).where(t.chains.c.chain_id.in_(chain_ids)).order_by(t.chains.c.chain_id)
    return [row_to_chain(row) for row in connection.execute(query)]


def ws_chain_ids(connection: Connection) -> set[int]:
    query = select(t.ws_nodes.c.chain_id).where(t.ws_nodes.c.status == NodeStatus.HEALTHY.value)
    return set(connection.execute(query.distinct()).scalars())


def ws_notification_prices(connection: Connection) -> list[tuple[int, str, int]]:
    """(chain, subscription type, lowest cost) over plans with a healthy WebSocket node there.

    A price row with `node_target_type` "ws" prices one notification of the subscription type
    named by its `method` (e.g. newHeads); a row for the chain wins over the all-chains row.
    """
    nodes = select(t.ws_nodes.c.chain_id, t.ws_nodes.c.plan_id).where(
        t.ws_nodes.c.status == NodeStatus.HEALTHY.value
    )
    plans_by_chain: dict[int, set[int]] = {}
    for chain_id, plan_id in connection.execute(nodes):
        plans_by_chain.setdefault(chain_id, set()).add(plan_id)
    rows = connection.execute(
        select(
            t.plan_methods.c.plan_id,
            t.plan_methods.c.method,
            t.plan_methods.c.chain_id,
            t.plan_methods.c.cost_nano,
        ).where(t.plan_methods.c.node_target_type == WS_TARGET_TYPE)
    ).all()
    prices: dict[tuple[int, str, int | None], int] = {
        (row.plan_id, row.method, row.chain_id): row.cost_nano for row in rows
    }
    subscription_types = sorted({row.method for row in rows})
    found = []
    for chain_id in sorted(plans_by_chain):
        for kind in subscription_types:
            costs = []
            for plan_id in plans_by_chain[chain_id]:
                cost = prices.get((plan_id, kind, chain_id), prices.get((plan_id, kind, None)))
                if cost is not None:
                    costs.append(cost)
            if costs:
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
