"""Plan use per billing cycle (`plan_cycle_usage`): added to by every usage flush, read for the
economy order of routes (`load_route_table`), for routers between configuration changes, and for
the plan views of providers and administrators."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from sqlalchemy import Connection, Row, select

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


def _terms(connection: Connection, plan_ids: Iterable[int]) -> dict[int, PlanTerms]:
    query = select(t.plans).where(t.plans.c.id.in_(set(plan_ids)))
    return {row.id: terms_of(row) for row in connection.execute(query)}


def add_plan_use(connection: Connection, served: Mapping[tuple[int, datetime], CycleUse]) -> None:
    """Add what plans' nodes answered, by (plan, hour the calls were made in), to each plan's
    cycle of that hour. Plans deleted since are left out."""
    if not served:
        return
    terms = _terms(connection, {plan_id for plan_id, _ in served})
    sums: dict[tuple[int, datetime], CycleUse] = {}
    for (plan_id, hour), use in served.items():
        plan = terms.get(plan_id)
        if plan is not None:
            key = (plan_id, plan.cycle.bounds(hour)[0])
            sums[key] = sums.get(key, CycleUse()) + use
    rows = [
        {
            "plan_id": plan_id,
            "cycle_start": start,
            "request_count": use.requests,
            "credits_nano": use.credits_nano,
        }
        for (plan_id, start), use in sorted(sums.items())
    ]
    if rows:
        add_counts(connection, t.plan_cycle_usage, ("plan_id", "cycle_start"), rows)


def current_cycles(
    connection: Connection, plans: Mapping[int, PlanTerms], now: datetime | None = None
) -> dict[int, CycleReport]:
    """Each plan's cycle holding `now` (default: now), with its use so far."""
    now = now or datetime.now(UTC)
    bounds = {plan_id: terms.cycle.bounds(now) for plan_id, terms in plans.items()}
    if not bounds:
        return {}
    earliest = min(start for start, _ in bounds.values())
    found = connection.execute(
        select(t.plan_cycle_usage).where(
            t.plan_cycle_usage.c.plan_id.in_(set(bounds)),
            t.plan_cycle_usage.c.cycle_start >= earliest,
        )
    )
    used = {
        (row.plan_id, row.cycle_start): CycleUse(row.request_count, row.credits_nano)
        for row in found
    }
    reports = {}
    for plan_id, (start, end) in bounds.items():
        use = used.get((plan_id, start), CycleUse())
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
