"""Plans and their method prices. Writes change what routers cache; callers bump the version."""

from __future__ import annotations

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


def _method(row: Row[Any]) -> PlanMethod:
    return PlanMethod(
        id=row.id,
        plan_id=row.plan_id,
        method=row.method,
        vm=row.vm,
        node_target_type=row.node_target_type,
        cost_nano=row.cost_nano,
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


def upsert_methods(connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Create each price row, or replace the price and limits of the row with the same identity
    (plan, vm, method, node target type, chain)."""
    now = utcnow()
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
                "rate_limit": insert.excluded.rate_limit,
                "rate_limit_interval_sec": insert.excluded.rate_limit_interval_sec,
                "updated_at": now,
            },
        )
        connection.execute(statement, [{**r, "created_at": now, "updated_at": now} for r in part])


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
