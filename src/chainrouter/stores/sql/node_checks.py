"""What audits and proofs found of each HTTP node, in all (router/node_checks.py): every router's
flush adds its counts to the node's row, so that routers and their workers add up."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, case, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite

from chainrouter.domain.records import NodeChecksRecord, NodeChecksWrite
from chainrouter.stores.sql import schema as t

COUNTS = ("audits_passed", "audits_failed", "proofs_checked", "proofs_failed")
LAST_AT = (
    "last_audit_passed_at",
    "last_audit_failed_at",
    "last_proof_checked_at",
    "last_proof_failed_at",
)


def write_node_checks(engine: Engine, writes: Sequence[NodeChecksWrite]) -> None:
    """Add the writes to the nodes' totals (`n = n + d`, a missing row starts at 0); a time is
    the later of the stored one and the write's. Nodes deleted since are skipped. Rows are
    written in node order, so that two routers' flushes never wait on each other in a cycle."""
    if not writes:
        return
    table = t.node_checks
    with engine.begin() as connection:
        wanted = {write.node_id for write in writes}
        live = set(
            connection.execute(select(t.nodes.c.id).where(t.nodes.c.id.in_(wanted))).scalars()
        )
        rows = [_row(write) for write in sorted(writes, key=lambda w: w.node_id)]
        rows = [row for row in rows if row["node_id"] in live]
        if not rows:
            return
        insert = (
            postgresql.insert(table)
            if connection.dialect.name == "postgresql"
            else sqlite.insert(table)
        )
        added = {name: table.c[name] + insert.excluded[name] for name in COUNTS}
        latest = {
            name: case(
                (insert.excluded[name].is_(None), table.c[name]),
                (
                    or_(table.c[name].is_(None), insert.excluded[name] > table.c[name]),
                    insert.excluded[name],
                ),
                else_=table.c[name],
            )
            for name in LAST_AT
        }
        statement = insert.on_conflict_do_update(
            index_elements=["node_id"], set_={**added, **latest}
        )
        connection.execute(statement, rows)


def _row(write: NodeChecksWrite) -> dict[str, object]:
    row: dict[str, object] = {"node_id": write.node_id}
    for name in COUNTS:
        row[name] = getattr(write, name)
    for name in LAST_AT:
        at = getattr(write, name)
        row[name] = None if at is None else datetime.fromtimestamp(at, UTC)
    return row


def node_checks(connection: Connection, node_ids: Sequence[int]) -> dict[int, NodeChecksRecord]:
    """The totals of these nodes; a node never checked is not in the answer."""
    if not node_ids:
        return {}
    table = t.node_checks
    rows = connection.execute(select(table).where(table.c.node_id.in_(set(node_ids))))
    return {
        row.node_id: NodeChecksRecord(
            int(row.audits_passed),
            int(row.audits_failed),
            int(row.proofs_checked),
            int(row.proofs_failed),
            row.last_audit_passed_at,
            row.last_audit_failed_at,
            row.last_proof_checked_at,
            row.last_proof_failed_at,
        )
        for row in rows
    }


def provider_disputed(connection: Connection, provider_id: int) -> tuple[int, int]:
    """(answers, nano-credits) disputed of the provider's HTTP nodes in all, deleted ones too:
    their answers since their last clean audit when they were cordoned (router/cordon.py)."""
    nodes = t.nodes
    row = connection.execute(
        select(
            func.coalesce(func.sum(nodes.c.disputed_calls), 0),
            func.coalesce(func.sum(nodes.c.disputed_nano), 0),
        )
        .select_from(nodes)
        .join(t.plans, t.plans.c.id == nodes.c.plan_id)
        .where(t.plans.c.provider_id == provider_id)
    ).one()
    return int(row[0]), int(row[1])
