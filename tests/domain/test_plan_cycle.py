"""Plan economics (design notes, "Plans: quota, overage and the billing cycle"): cycles tile time
without gaps by each billing rule; a plan's standing moves from within quota to overage to
exhausted; overage costs the operator per request or per credit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.plan_cycle import (
    NANO,
    BillingCycle,
    CycleUse,
    PlanQuota,
    QuotaUnit,
    Standing,
    standing_of,
)

_moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
_cycles = st.builds(
    BillingCycle,
    fixed_day=st.none() | st.integers(1, 31),
    interval_days=st.none() | st.integers(1, 400),
    anchor=st.none() | _moments,
    created=st.none() | _moments,
)


@given(cycle=_cycles, at=_moments)
def test_every_moment_lies_in_one_cycle_and_the_next_begins_where_it_ends(
    cycle: BillingCycle, at: datetime
) -> None:
    start, end = cycle.bounds(at)
    assert start <= at < end
    assert end - start <= timedelta(days=400)
    assert cycle.bounds(end)[0] == end
    assert cycle.bounds(start) == (start, end)
    assert cycle.bounds(end - timedelta(microseconds=1)) == (start, end)


def test_without_billing_terms_cycles_are_calendar_months() -> None:
    at = datetime(2026, 11, 25, 6, 30, tzinfo=UTC)
    assert BillingCycle().bounds(at) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )


def test_a_fixed_day_past_a_short_months_end_falls_on_its_last_day() -> None:
    cycle = BillingCycle(fixed_day=31)
    assert cycle.bounds(datetime(2026, 2, 28, 12, tzinfo=UTC)) == (
        datetime(2026, 2, 28, tzinfo=UTC),
        datetime(2026, 3, 31, tzinfo=UTC),
    )
    assert cycle.bounds(datetime(2026, 2, 27, tzinfo=UTC))[0] == datetime(2026, 1, 31, tzinfo=UTC)


def test_an_anchor_alone_repeats_monthly_at_its_day_and_time() -> None:
    cycle = BillingCycle(anchor=datetime(2026, 1, 15, 9, 30, tzinfo=UTC))
    assert cycle.bounds(datetime(2026, 11, 15, 9, 29, tzinfo=UTC)) == (
        datetime(2026, 10, 15, 9, 30, tzinfo=UTC),
        datetime(2026, 11, 15, 9, 30, tzinfo=UTC),
    )


def test_an_interval_counts_days_from_the_anchor_else_from_the_plans_creation() -> None:
    anchored = BillingCycle(interval_days=10, anchor=datetime(2026, 11, 1, tzinfo=UTC))
    assert anchored.bounds(datetime(2026, 11, 25, tzinfo=UTC)) == (
        datetime(2026, 11, 21, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    created = BillingCycle(interval_days=7, created=datetime(2026, 11, 20, 12, tzinfo=UTC))
    assert created.bounds(datetime(2026, 11, 25, tzinfo=UTC))[0] == datetime(
        2026, 11, 20, 12, tzinfo=UTC
    )
    # The interval wins over a fixed day.
    both = BillingCycle(fixed_day=3, interval_days=10, anchor=datetime(2026, 11, 1, tzinfo=UTC))
    assert both.bounds(datetime(2026, 11, 25, tzinfo=UTC))[0] == datetime(2026, 11, 21, tzinfo=UTC)


def test_a_plan_without_a_quota_is_unmetered_whatever_it_served() -> None:
    assert standing_of(None, CycleUse(10**9, 10**18)) is Standing.UNMETERED
    assert PlanQuota.of(None, "requests", 5, Decimal(1)) is None


def test_requests_quota_then_overage_then_exhausted_at_the_overage_limit() -> None:
    quota = PlanQuota.of(Decimal(100), "requests", 2 * NANO // 1000, Decimal(50))
    assert quota is not None
    assert quota.standing(CycleUse(99, 10**12)) is Standing.WITHIN_QUOTA
    assert quota.standing(CycleUse(100)) is Standing.OVERAGE
    assert quota.standing(CycleUse(149)) is Standing.OVERAGE
    assert quota.standing(CycleUse(150)) is Standing.EXHAUSTED


def test_a_credits_quota_counts_the_prices_of_the_calls_served() -> None:
    quota = PlanQuota.of(Decimal("0.5"), "credits", NANO, None)
    assert quota is not None
    assert (quota.quota, quota.unit) == (NANO // 2, QuotaUnit.CREDITS)
    assert quota.standing(CycleUse(10**6, NANO // 2 - 1)) is Standing.WITHIN_QUOTA
    assert quota.standing(CycleUse(1, NANO // 2)) is Standing.OVERAGE
    assert quota.standing(CycleUse(1, 10**18)) is Standing.OVERAGE  # no overage limit: no end


def test_an_overage_limit_of_zero_makes_the_quota_hard() -> None:
    quota = PlanQuota.of(Decimal(10), "requests", None, Decimal(0))
    assert quota is not None
    assert quota.standing(CycleUse(10)) is Standing.EXHAUSTED


def test_overage_costs_its_price_per_request_or_per_credit_of_the_calls_price() -> None:
    per_request = PlanQuota.of(Decimal(1), "requests", 3_000, None)
    per_credit = PlanQuota.of(Decimal(1), "credits", 3_000, None)
    assert per_request is not None
    assert per_credit is not None
    assert per_request.overage_cost(call_price_nano=500) == 3_000 * NANO
    assert per_credit.overage_cost(call_price_nano=500) == 3_000 * 500
    free = PlanQuota.of(Decimal(1), "requests", None, None)
    assert free is not None
    assert free.overage_cost(500) == 0
