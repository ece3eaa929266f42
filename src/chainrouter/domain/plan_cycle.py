"""Plan economics: a plan's billing cycle, what its quota leaves, and what one more call on it
costs the operator (design notes, "Plans: quota, overage and the billing cycle").

A plan is what the operator buys from a provider: `price` per cycle, `quota` units included
(`requests`, or `credits`: the method prices of the calls served), `overage_price` per unit
beyond the quota, `overage_limit` the most units beyond it. Customers still pay the method price;
this is about which plan the operator should spend next.

- A plan without a quota is flat: one more call costs nothing more (`UNMETERED`).
- Within its quota, one more call costs nothing more (`WITHIN_QUOTA`).
- Beyond it, each unit costs `overage_price` (`OVERAGE`; no overage price: beyond the quota is
  not charged).
- At `quota + overage_limit` the plan is `EXHAUSTED` and routes nothing until its cycle ends
  (no overage limit: no end; an overage limit of 0 makes the quota a hard one).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, Decimal
from enum import StrEnum

NANO = 1_000_000_000


class QuotaUnit(StrEnum):
    REQUESTS = "requests"  # calls the plan's nodes answered
    CREDITS = "credits"  # the method prices of those calls


class Standing(StrEnum):
    UNMETERED = "unmetered"
    WITHIN_QUOTA = "within_quota"
    OVERAGE = "overage"
    EXHAUSTED = "exhausted"


@dataclass(frozen=True, slots=True)
class CycleUse:
    """What a plan's nodes answered in one cycle."""

    requests: int = 0
    credits_nano: int = 0

    def __add__(self, other: CycleUse) -> CycleUse:
        return CycleUse(self.requests + other.requests, self.credits_nano + other.credits_nano)


@dataclass(frozen=True, slots=True)
class BillingCycle:
    """When a plan's cycles start, all in UTC. Of the terms, the first that is set decides:
    - `interval_days`: cycles of that many days from `anchor` (else from the plan's creation);
    - `fixed_day`: monthly, on that day of the month at 00:00 (a shorter month's last day);
    - `anchor`: monthly, on the anchor's day of the month and time of day (clamped likewise);
    - none: calendar months."""

    fixed_day: int | None = None
    interval_days: int | None = None
    anchor: datetime | None = None
    created: datetime | None = None

    def bounds(self, at: datetime) -> tuple[datetime, datetime]:
        """The cycle holding `at`: its start (inclusive) and end (exclusive)."""
        at = at.astimezone(UTC)
        if self.interval_days:
            origin = (self.anchor or self.created or datetime(1970, 1, 1, tzinfo=UTC)).astimezone(
                UTC
            )
            length = timedelta(days=self.interval_days)
            start = origin + length * ((at - origin) // length)
            return start, start + length
        if self.fixed_day:
            return _monthly(at, self.fixed_day, (0, 0, 0, 0))
        if self.anchor is not None:
            anchor = self.anchor.astimezone(UTC)
            clock = (anchor.hour, anchor.minute, anchor.second, anchor.microsecond)
            return _monthly(at, anchor.day, clock)
        return _monthly(at, 1, (0, 0, 0, 0))


CALENDAR_MONTHS = BillingCycle()


def _on_day(year: int, month: int, day: int, clock: tuple[int, int, int, int]) -> datetime:
    last = calendar.monthrange(year, month)[1]
    return datetime(year, month, min(day, last), *clock, tzinfo=UTC)


def _shift(year: int, month: int, by: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + by
    return index // 12, index % 12 + 1


def _monthly(at: datetime, day: int, clock: tuple[int, int, int, int]) -> tuple[datetime, datetime]:
    start = _on_day(at.year, at.month, day, clock)
    if start > at:
        start = _on_day(*_shift(at.year, at.month, -1), day, clock)
    following = _on_day(*_shift(start.year, start.month, 1), day, clock)
    return start, following


@dataclass(frozen=True, slots=True)
class PlanQuota:
    """A plan's quota terms, in the units the router counts: calls, or nano-credits."""

    quota: int
    unit: QuotaUnit
    overage_price_nano: int | None = None  # per request, or per credit
    overage_limit: int | None = None  # units beyond the quota; None: no limit

    @classmethod
    def of(
        cls,
        quota: Decimal | None,
        unit: str | None,
        overage_price_nano: int | None,
        overage_limit: Decimal | None,
    ) -> PlanQuota | None:
        """From the stored terms; None for a plan without a quota. Credits are counted in
        nano-credits, requests whole (a fraction of a unit is dropped)."""
        if quota is None:
            return None
        kind = QuotaUnit.CREDITS if unit == QuotaUnit.CREDITS else QuotaUnit.REQUESTS
        scale = NANO if kind is QuotaUnit.CREDITS else 1

        def units(amount: Decimal) -> int:
            return int((amount * scale).to_integral_value(ROUND_FLOOR))

        return cls(
            units(quota),
            kind,
            overage_price_nano,
            None if overage_limit is None else units(overage_limit),
        )

    def used(self, use: CycleUse) -> int:
        return use.credits_nano if self.unit is QuotaUnit.CREDITS else use.requests

    def standing(self, use: CycleUse) -> Standing:
        used = self.used(use)
        if used < self.quota:
            return Standing.WITHIN_QUOTA
        if self.overage_limit is not None and used >= self.quota + self.overage_limit:
            return Standing.EXHAUSTED
        return Standing.OVERAGE

    def overage_cost(self, call_price_nano: int) -> int:
        """What one call costs the operator in overage, in nano-credits times 10^9 (exact, for
        ordering): `overage_price` for a request, or per credit of the call's price."""
        price = self.overage_price_nano or 0
        if self.unit is QuotaUnit.CREDITS:
            return price * call_price_nano
        return price * NANO


@dataclass(frozen=True, slots=True)
class PlanTerms:
    """What decides a plan's cycles and standing."""

    quota: PlanQuota | None
    cycle: BillingCycle


@dataclass(frozen=True, slots=True)
class CycleReport:
    """One plan's current cycle: its bounds, what its nodes answered, and its standing."""

    start: datetime
    end: datetime
    use: CycleUse
    standing: Standing


def standing_of(quota: PlanQuota | None, use: CycleUse) -> Standing:
    return Standing.UNMETERED if quota is None else quota.standing(use)
