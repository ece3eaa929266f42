"""Node health as routers report it, for other processes to read: HTTP nodes' in `node_health`,
WebSocket nodes' in `ws_node_health` (their ids are another sequence)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from chainrouter.domain.enums import NodeStatus
from chainrouter.domain.routing import HealthReport
from chainrouter.stores.sql import schema as t


def write_node_health(engine: Engine, reports: Sequence[HealthReport], *, ws: bool = False) -> None:
    """Upsert the reports (the latest report of any router wins); skips nodes deleted since.
    `ws`: the reports are of WebSocket nodes (they know no capabilities)."""
    if not reports:
        return
    nodes, health = (t.ws_nodes, t.ws_node_health) if ws else (t.nodes, t.node_health)
    key = "ws_node_id" if ws else "node_id"
    with engine.begin() as connection:
        wanted = {report.node_id for report in reports}
        live = set(connection.execute(select(nodes.c.id).where(nodes.c.id.in_(wanted))).scalars())
        rows = [
            {
                key: r.node_id,
                "in_sync": r.in_sync,
                "head_block": r.head_block,
                "latency_ms": None if r.latency_ms is None else Decimal(f"{r.latency_ms:.3f}"),
                "consecutive_failures": r.consecutive_failures,
                "checked_at": r.checked_at,
            }
            | ({} if ws else {"capabilities": r.capabilities})
            for r in reports
            if r.node_id in live
        ]
        if not rows:
            return
        insert = (
            postgresql.insert(health)
            if connection.dialect.name == "postgresql"
            else sqlite.insert(health)
        )
        statement = insert.on_conflict_do_update(
            index_elements=[key],
            set_={name: insert.excluded[name] for name in rows[0] if name != key},
        )
        connection.execute(statement, rows)


@dataclass(frozen=True, slots=True)
class MeasuredNode:
    chain_id: int
    chain_name: str
    latency_ms: Decimal
    checked_at: datetime


def measured_latencies(connection: Connection, chain_id: int | None = None) -> list[MeasuredNode]:
    """The latency routers last reported of each enabled, in-sync HTTP node, with its chain:
    smoothed over the node's recent quick calls and health checks (router/health.py)."""
    health, nodes, chains = t.node_health, t.nodes, t.chains
    query = (
        select(nodes.c.chain_id, chains.c.name, health.c.latency_ms, health.c.checked_at)
        .join(nodes, nodes.c.id == health.c.node_id)
        .join(chains, chains.c.chain_id == nodes.c.chain_id)
        .where(
            nodes.c.status == NodeStatus.HEALTHY.value,
            health.c.in_sync.is_(True),
            health.c.latency_ms.is_not(None),
        )
        .order_by(nodes.c.chain_id, health.c.latency_ms)
    )
    if chain_id is not None:
        query = query.where(nodes.c.chain_id == chain_id)
    return [
        MeasuredNode(int(row[0]), row[1], Decimal(row[2]), row[3])
        for row in connection.execute(query)
    ]
