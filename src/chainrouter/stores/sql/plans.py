"""Plans and their method prices. Writes change what routers cache; callers bump the version."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from chainrouter.domain.records import Plan, PlanMethod
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow

PLAN_COLUMNS = (
    "name",
    "description",
    "price_nano",
    "quota",
    "quota_unit",
    "overage_price_nano",
    "overage_limit",
    "rate_limit_req",
    "rate_limit_req_interval_sec",
    "rate_limit_cr_nano",
    "rate_limit_cr_interval_sec",
    "billing_fixed_day",
    "billing_interval_days",
    "billing_anchored_start_date",
)
METHOD_KEY = ("plan_id", "vm", "method", "node_target_type", "chain_id")


def _plan(row: Row[Any]) -> Plan:
    return Plan(
        id=row.id,
        provider_id=row.provider_id,
        provider_slug=row.slug,
        created_at=row.created_at,
        **{column: row._mapping[column] for column in PLAN_COLUMNS},
    )


def _plans_query() -> Any:
    return select(t.plans, t.providers.c.slug).join(
        t.providers, t.providers.c.id == t.plans.c.provider_id
    )


def get_plan(connection: Connection, plan_id: int) -> Plan | None:
    row = connection.execute(_plans_query().where(t.plans.c.id == plan_id)).first()
    return None if row is None else _plan(row)


def list_plans(connection: Connection, provider_id: int) -> list[Plan]:
    query = _plans_query().where(t.plans.c.provider_id == provider_id).order_by(t.plans.c.id)
    return [_plan(row) for row in connection.execute(query)]


def plan_name_taken(
    connection: Connection, provider_id: int, name: str, *, other_than: int | None = None
) -> bool:
    query = select(t.plans.c.id).where(t.plans.c.provider_id == provider_id, t.plans.c.name == name)
    if other_than is not None:
        query = query.where(t.plans.c.id != other_than)
    return connection.execute(query).first() is not None


def insert_plan(connection: Connection, provider_id: int, values: dict[str, Any]) -> int:
    now = utcnow()
    key = connection.execute(
        t.plans.insert().values(provider_id=provider_id, created_at=now, updated_at=now, **values)
    ).inserted_primary_key
    assert key is not None
    return int(key[0])


def update_plan(connection: Connection, plan_id: int, values: dict[str, Any]) -> None:
    connection.execute(
        t.plans.update().where(t.plans.c.id == plan_id).values(**values, updated_at=utcnow())
    )


def effective_cost_nano(row: Any, now: datetime) -> int:
    """What a price row charges at `now`: its next price once that applies, else its price."""
    due = row.next_cost_from
    return int(row.next_cost_nano if due is not None and due <= now else row.cost_nano)


def _method(row: Row[Any]) -> PlanMethod:
    now = utcnow()
    due = row.next_cost_from
    pending = due is not None and due > now
    return PlanMethod(
        id=row.id,
        plan_id=row.plan_id,
        method=row.method,
        vm=row.vm,
        node_target_type=row.node_target_type,
        cost_nano=effective_cost_nano(row, now),
        next_cost_nano=row.next_cost_nano if pending else None,
        next_cost_from=due if pending else None,
        rate_limit=row.rate_limit,
        rate_limit_interval_sec=row.rate_limit_interval_sec,
        chain_id=row.chain_id,
    )


def list_methods(connection: Connection, plan_id: int) -> list[PlanMethod]:
    query = (
        select(t.plan_methods)
        .where(t.plan_methods.c.plan_id == plan_id)
        .order_by(t.plan_methods.c.method, t.plan_methods.c.chain_id, t.plan_methods.c.id)
    )
    return [_method(row) for row in connection.execute(query)]


def upsert_methods(
    connection: Connection,
    rows: list[dict[str, Any]],
    *,
    notice_s: float = 0.0,
    now: datetime | None = None,
) -> None:
    """Create each price row, or replace the price and limits of the row with the same identity
    (plan, vm, method, node target type, chain). With `notice_s` (a provider's change), a row
    made dearer keeps charging what it charges now for that long, the new price then applying
    (`next_cost_nano` from `next_cost_from`); a cheaper price, or a new row, applies at once."""
    now = now or utcnow()
    rows = [_with_notice(connection, row, notice_s, now) for row in rows]
    for chain_specific in (True, False):
        part = [r for r in rows if (r["chain_id"] is not None) is chain_specific]
        if not part:
            continue
        insert = (
            postgresql.insert(t.plan_methods)
            if connection.dialect.name == "postgresql"
            else sqlite.insert(t.plan_methods)
        )
        # Each partial unique index is named by its columns and its WHERE clause.
        where = (
            t.plan_methods.c.chain_id.isnot(None)
            if chain_specific
            else (t.plan_methods.c.chain_id.is_(None))
        )
        columns = list(METHOD_KEY if chain_specific else METHOD_KEY[:4])
        statement = insert.on_conflict_do_update(
            index_elements=columns,
            index_where=where,
            set_={
                "cost_nano": insert.excluded.cost_nano,
                "next_cost_nano": insert.excluded.next_cost_nano,
                "next_cost_from": insert.excluded.next_cost_from,
                "rate_limit": insert.excluded.rate_limit,
                "rate_limit_interval_sec": insert.excluded.rate_limit_interval_sec,
                "updated_at": now,
            },
        )
        connection.execute(statement, [{**r, "created_at": now, "updated_at": now} for r in part])


def _with_notice(
    connection: Connection, row: dict[str, Any], notice_s: float, now: datetime
) -> dict[str, Any]:
    """The row to store: its price at once, or, dearer than what the stored row charges now
    and with a notice, that price until the notice ends and its own from then."""
    pending: dict[str, Any] = {"next_cost_nano": None, "next_cost_from": None}
    if notice_s <= 0:
        return {**row, **pending}
    table = t.plan_methods
    chain = row["chain_id"]
    stored = connection.execute(
        select(table.c.cost_nano, table.c.next_cost_nano, table.c.next_cost_from).where(
            table.c.plan_id == row["plan_id"],
            table.c.vm == row["vm"],
            table.c.method == row["method"],
            table.c.node_target_type == row["node_target_type"],
            table.c.chain_id.is_(None) if chain is None else table.c.chain_id == chain,
        )
    ).first()
    if stored is None:
        return {**row, **pending}  # a new row: nobody was charged another price for it
    charged = effective_cost_nano(stored, now)
    if row["cost_nano"] <= charged:
        return {**row, **pending}  # cheaper or the same: no surprise
    return {
        **row,
        "cost_nano": charged,
        "next_cost_nano": row["cost_nano"],
        "next_cost_from": now + timedelta(seconds=notice_s),
    }


def delete_method(connection: Connection, plan_id: int, method_id: int) -> bool:
    result = connection.execute(
        delete(t.plan_methods).where(
            t.plan_methods.c.id == method_id, t.plan_methods.c.plan_id == plan_id
        )
    )
    return result.rowcount > 0


def known_chain_ids(connection: Connection, chain_ids: set[int]) -> set[int]:
    if not chain_ids:
        return set()
    query = select(t.chains.c.chain_id).where(t.chains.c.chain_id.in_(chain_ids))
    return set(connection.execute(query).scalars())
