"""Node health as routers report it, for other processes to read."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from sqlalchemy import Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from chainrouter.domain.routing import HealthReport
from chainrouter.stores.sql import schema as t


def write_node_health(engine: Engine, reports: Sequence[HealthReport]) -> None:
    """Upsert the reports (the latest report of any router wins); skips nodes deleted since."""
    if not reports:
        return
    with engine.begin() as connection:
        wanted = {report.node_id for report in reports}
        live = set(
            connection.execute(select(t.nodes.c.id).where(t.nodes.c.id.in_(wanted))).scalars()
        )
        rows = [
            {
                "node_id": r.node_id,
                "in_sync": r.in_sync,
                "head_block": r.head_block,
                "latency_ms": None if r.latency_ms is None else Decimal(f"{r.latency_ms:.3f}"),
                "consecutive_failures": r.consecutive_failures,
                "checked_at": r.checked_at,
                "capabilities": r.capabilities,
            }
            for r in reports
            if r.node_id in live
        ]
        if not rows:
            return
        insert = (
            postgresql.insert(t.node_health)
            if connection.dialect.name == "postgresql"
            else sqlite.insert(t.node_health)
        )
        statement = insert.on_conflict_do_update(
            index_elements=["node_id"],
            set_={
                name: insert.excluded[name]
                for name in (
                    "in_sync",
                    "head_block",
                    "latency_ms",
                    "consecutive_failures",
                    "checked_at",
                    "capabilities",
                )
            },
        )
        connection.execute(statement, rows)
