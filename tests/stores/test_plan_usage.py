"""Plan use per billing cycle in storage: a flush adds what each plan's nodes answered to the
cycle of the hour the calls were made in, once even when the flush is retried; the current
cycle is read back with the plan's standing; the route table orders and filters by it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, event, select

from chainrouter.domain.plan_cycle import (
    BillingCycle,
    CycleUse,
    PlanQuota,
    PlanTerms,
    QuotaUnit,
    Standing,
)
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import parse_yaml, validate_document
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.plan_usage import current_cycles, terms_of
from chainrouter.stores.sql.snapshot import load_route_table
from chainrouter.stores.sql.usage import write_usage

FILE = """
chains:
  - {chain_id: 31337, name: Local, short_name: local, native_currency: {name: E, symbol: E}}
providers:
  - slug: metered
    name: Metered
    plans:
      - name: ten
        quota: 10
        quota_unit: requests
        overage_price: "0.001"
        overage_limit: 5
        billing_fixed_day: 15
        methods: [{method: eth_call, cost: "0.000001"}]
        nodes: [{url: "http://127.0.0.1:1/m", chain_id: 31337}]
  - slug: flat
    name: Flat
    plans:
      - name: flat
        methods: [{method: eth_call, cost: "0.000002"}]
        nodes: [{url: "http://127.0.0.1:1/f", chain_id: 31337}]
customers:
  - email: c@example.com
    name: C
    api_keys: [{name: k, allowed_domains: ["*"]}]
"""


def _setup(engine: Engine) -> tuple[int, int, int]:
    apply_config(engine, validate_document(parse_yaml(FILE)))
    with engine.connect() as connection:
        plans = dict(connection.execute(select(t.plans.c.name, t.plans.c.id)).all())
        key = connection.execute(select(t.api_keys.c.id, t.api_keys.c.customer_id)).one()
    return plans["ten"], key.id, key.customer_id


def _flush(
    engine: Engine, key: tuple[int, int], plan: int, at: datetime, calls: int, ref: str
) -> None:
    key_id, customer = key
    hour = int(at.timestamp()) // 3600 * 3600
    rows = {
        (customer, key_id, 31337, "eth_call", "first_choice", hour, plan): [calls, calls * 1000]
    }
    write_usage(engine, rows, {customer: calls * 1000}, reference=ref)


def _cycles(engine: Engine, plan_id: int, now: datetime) -> tuple[datetime, CycleUse, Standing]:
    with engine.connect() as connection:
        row = connection.execute(select(t.plans).where(t.plans.c.id == plan_id)).one()
        report = current_cycles(connection, {plan_id: terms_of(row)}, now)[plan_id]
    return report.start, report.use, report.standing


def test_a_flush_counts_into_the_cycle_of_its_hour_once_even_when_retried(engine: Engine) -> None:
    plan, key_id, customer = _setup(engine)
    before = datetime(2026, 11, 14, 23, 30, tzinfo=UTC)  # the cycle of October 15th
    after = datetime(2026, 11, 15, 0, 30, tzinfo=UTC)  # the cycle of November 15th
    _flush(engine, (key_id, customer), plan, before, 4, "usage:a:1")
    _flush(engine, (key_id, customer), plan, after, 9, "usage:a:2")
    _flush(engine, (key_id, customer), plan, after, 9, "usage:a:2")  # retried: nothing twice
    now = datetime(2026, 11, 25, tzinfo=UTC)
    assert _cycles(engine, plan, now) == (
        datetime(2026, 11, 15, tzinfo=UTC),
        CycleUse(9, 9_000),
        Standing.WITHIN_QUOTA,
    )
    october = _cycles(engine, plan, before)
    assert october[:2] == (datetime(2026, 10, 15, tzinfo=UTC), CycleUse(4, 4_000))


def test_standings_move_to_overage_then_exhausted_and_the_route_table_follows(
    engine: Engine,
) -> None:
    plan, key_id, customer = _setup(engine)
    now = datetime.now(UTC)
    with engine.connect() as connection:
        cheapest = load_route_table(connection).routes(31337, "eth_call")
    assert cheapest[0].plan.plan_id == plan  # within quota and cheaper
    _flush(engine, (key_id, customer), plan, now, 10, "usage:b:1")
    assert _cycles(engine, plan, now)[2] is Standing.OVERAGE
    with engine.connect() as connection:
        table = load_route_table(connection)
    assert [route.plan.plan_id for route in table.routes(31337, "eth_call")][-1] == plan
    _flush(engine, (key_id, customer), plan, now, 5, "usage:b:2")
    assert _cycles(engine, plan, now)[2] is Standing.EXHAUSTED
    with engine.connect() as connection:
        table = load_route_table(connection)
    assert plan not in [route.plan.plan_id for route in table.routes(31337, "eth_call")]
    assert not table.only_exhausted(31337, "eth_call")  # the flat plan still serves it


def test_use_of_a_deleted_plan_is_dropped_and_the_rest_of_the_flush_is_written(
    engine: Engine,
) -> None:
    _, key_id, customer = _setup(engine)
    now = datetime.now(UTC)
    _flush(engine, (key_id, customer), 999_999, now, 2, "usage:c:1")
    with engine.connect() as connection:
        assert connection.execute(select(t.plan_hourly_usage)).all() == []
        calls = connection.execute(select(t.usage_aggregates.c.request_count)).scalar_one()
    assert calls == 2


def test_a_change_of_billing_terms_counts_the_use_already_made_in_the_new_cycle(
    engine: Engine,
) -> None:
    """Kept per cycle, a plan's use started from nothing when an administrator moved its cycle,
    and an exhausted plan was routed to again."""
    apply_config(engine, validate_document(parse_yaml(FILE)))
    with engine.connect() as connection:
        plan_id = connection.execute(select(t.plans.c.id).where(t.plans.c.name == "ten")).scalar()
        key_id, customer_id = connection.execute(
            select(t.api_keys.c.id, t.api_keys.c.customer_id)
        ).one()
    assert plan_id is not None
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    row = (customer_id, key_id, 31337, "eth_call", "first_choice", int(hour.timestamp()), plan_id)
    write_usage(engine, {row: [16, 16_000]}, {}, reference="usage:r:1")

    def standing() -> Standing:
        with engine.connect() as connection:
            plan = connection.execute(select(t.plans).where(t.plans.c.id == plan_id)).one()
            return current_cycles(connection, {plan_id: terms_of(plan)})[plan_id].standing

    assert standing() is Standing.EXHAUSTED  # 16 of a quota of 10 and 5 more
    with engine.begin() as connection:
        connection.execute(
            t.plans.update()
            .where(t.plans.c.id == plan_id)
            .values(
                billing_fixed_day=None,
                billing_interval_days=30,
                billing_anchored_start_date=hour - timedelta(hours=2),
            )
        )
    assert standing() is Standing.EXHAUSTED


def test_the_cycles_of_many_plans_are_read_in_one_query(engine: Engine) -> None:
    """Every router reads them at each flush and snapshot: plans each on an interval of its own
    (counted from their creation) must not cost a query each."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    plans = {
        n: PlanTerms(
            PlanQuota(1000, QuotaUnit.REQUESTS),
            BillingCycle(interval_days=30, created=base + timedelta(minutes=7 * n)),
        )
        for n in range(1, 301)
    }
    statements: list[str] = []

    def count(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", count)
    try:
        with engine.connect() as connection:
            reports = current_cycles(connection, plans)
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == 1
    assert all(report.use == CycleUse() for report in reports.values())
