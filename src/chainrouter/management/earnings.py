"""What a provider's nodes earned: the prices of the calls and notifications they served.

Customers pay, per served call, the method price of the route that served it (the provider's
own price list); every usage flush adds each plan's share by the hour (`plan_hourly_usage`, the
counts behind the plan's billing cycle). Cache hits, failures and refusals earn nothing
(docs/router.md#plans-quota-overage-and-billing-cycles). Usage is not stored per node, so
earnings are per plan: a plan's nodes share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine

from chainrouter.management.usage import Granularity
from chainrouter.stores.sql.plan_usage import provider_hours
from chainrouter.stores.sql.usage_report import ceil_hour, floor_day


@dataclass(frozen=True, slots=True)
class Earned:
    plan_id: int
    plan_name: str
    request_count: int
    credits_nano: int
    bucket: datetime | None = None  # the hour or UTC day; None in totals


@dataclass(frozen=True, slots=True)
class Earnings:
    start: datetime
    end: datetime
    by_plan: list[Earned]  # every plan with earnings in the window, by credits, then id
    time_series: list[Earned]  # per bucket and plan with earnings, by time, then plan


def provider_earnings(
    engine: Engine, provider_id: int, start: datetime, end: datetime, granularity: Granularity
) -> Earnings:
    """The provider's earnings from `start` to `end` (hours that start inside it)."""
    with engine.connect() as connection:
        hours = provider_hours(connection, provider_id, ceil_hour(start), end)
    buckets: dict[tuple[datetime, int], list[int]] = {}
    totals: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for hour, plan_id, name, requests, credits in hours:
        names[plan_id] = name
        bucket = hour if granularity is Granularity.HOUR else floor_day(hour)
        for total in (
            buckets.setdefault((bucket, plan_id), [0, 0]),
            totals.setdefault(plan_id, [0, 0]),
        ):
            total[0] += requests
            total[1] += credits
    by_plan = sorted(
        (Earned(p, names[p], n, c) for p, (n, c) in totals.items()),
        key=lambda e: (-e.credits_nano, e.plan_id),
    )
    series = [Earned(p, names[p], n, c, bucket=b) for (b, p), (n, c) in sorted(buckets.items())]
    return Earnings(start, end, by_plan, series)
