"""Plan use by hour (`plan_hourly_usage`), summed per billing cycle: added to by every usage
flush, read for the economy order of routes (`load_route_table`), for routers between
configuration changes, and for the plan views of providers and administrators."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from sqlalchemy import Connection, Row, and_, func, or_, select

from chainrouter.domain.plan_cycle import (
    BillingCycle,
    CycleReport,
    CycleUse,
    PlanQuota,
    PlanTerms,
    Standing,
    standing_of,
)
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.counts import add_counts


class _PlanFields(Protocol):
    """What a `plans` row and a `Plan` record both carry."""

    @property
    def quota(self) -> Decimal | None: ...
    @property
    def quota_unit(self) -> str | None: ...
    @property
    def overage_price_nano(self) -> int | None: ...
    @property
    def overage_limit(self) -> Decimal | None: ...
    @property
    def billing_fixed_day(self) -> int | None: ...
    @property
    def billing_interval_days(self) -> int | None: ...
    @property
    def billing_anchored_start_date(self) -> datetime | None: ...
    @property
    def created_at(self) -> datetime: ...


def terms_of(row: _PlanFields | Row[Any]) -> PlanTerms:
    """A plan's quota and billing terms, from its row or its record."""
    return PlanTerms(
        PlanQuota.of(row.quota, row.quota_unit, row.overage_price_nano, row.overage_limit),
        BillingCycle(
            fixed_day=row.billing_fixed_day,
            interval_days=row.billing_interval_days,
            anchor=row.billing_anchored_start_date,
            created=row.created_at,
        ),
    )


def add_plan_use(connection: Connection, served: Mapping[tuple[int, datetime], CycleUse]) -> None:
    """Add what plans' nodes answered, by (plan, hour the calls were made in). Plans deleted
    since are left out."""
    if not served:
        return
    query = select(t.plans.c.id).where(t.plans.c.id.in_({plan_id for plan_id, _ in served}))
    live = set(connection.execute(query).scalars())
    rows = [
        {
            "plan_id": plan_id,
            "hour": hour,
            "request_count": use.requests,
            "credits_nano": use.credits_nano,
        }
        for (plan_id, hour), use in sorted(served.items())
        if plan_id in live
    ]
    if rows:
        add_counts(connection, t.plan_hourly_usage, ("plan_id", "hour"), rows)


def current_cycles(
    connection: Connection, plans: Mapping[int, PlanTerms], now: datetime | None = None
) -> dict[int, CycleReport]:
    """Each plan's cycle holding `now` (default: now), with its use so far: the hours from the
    cycle's start (an hour that began before it belongs to the cycle before) to its end."""
    now = now or datetime.now(UTC)
    bounds = {plan_id: terms.cycle.bounds(now) for plan_id, terms in plans.items()}
    if not bounds:
        return {}
    # One query: the plans sharing a cycle (calendar months, a fixed day) in one condition, and
    # one for each plan on an interval of its own; the database sums only each cycle's hours.
    plans_by_cycle: dict[tuple[datetime, datetime], list[int]] = {}
    for plan_id, cycle in bounds.items():
        plans_by_cycle.setdefault(cycle, []).append(plan_id)
    hourly = t.plan_hourly_usage
    in_its_cycle = or_(
        *(
            and_(hourly.c.plan_id.in_(plan_ids), hourly.c.hour >= start, hourly.c.hour < end)
            for (start, end), plan_ids in plans_by_cycle.items()
        )
    )
    query = (
        select(hourly.c.plan_id, func.sum(hourly.c.request_count), func.sum(hourly.c.credits_nano))
        .where(in_its_cycle)
        .group_by(hourly.c.plan_id)
    )
    used = {
        plan_id: CycleUse(int(requests), int(credits_nano))
        for plan_id, requests, credits_nano in connection.execute(query)
    }
    reports = {}
    for plan_id, (start, end) in bounds.items():
        use = used.get(plan_id, CycleUse())
        reports[plan_id] = CycleReport(start, end, use, standing_of(plans[plan_id].quota, use))
    return reports


def plan_standings(
    connection: Connection, plans: Mapping[int, PlanTerms], now: datetime | None = None
) -> dict[int, Standing]:
    """The standing of every plan with a quota (the others are unmetered)."""
    metered = {plan_id: terms for plan_id, terms in plans.items() if terms.quota is not None}
    return {
        plan_id: report.standing
        for plan_id, report in current_cycles(connection, metered, now).items()
    }


def provider_hours(
    connection: Connection, provider_id: int, start: datetime, end: datetime
) -> list[tuple[datetime, int, str, int, int]]:
    """(hour, plan id, plan name, requests, credits nano) of the provider's plans, hours that
    start in [start, end), by hour then plan."""
    hours, plans = t.plan_hourly_usage, t.plans
    query = (
        select(hours.c.hour, plans.c.id, plans.c.name, hours.c.request_count, hours.c.credits_nano)
        .join(plans, plans.c.id == hours.c.plan_id)
        .where(plans.c.provider_id == provider_id, hours.c.hour >= start, hours.c.hour < end)
        .order_by(hours.c.hour, plans.c.id)
    )
    return [(r[0], int(r[1]), r[2], int(r[3]), int(r[4])) for r in connection.execute(query)]
