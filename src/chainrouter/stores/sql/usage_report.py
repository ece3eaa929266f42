"""Reading usage for reports: sums over a window, grouped by any of its dimensions.

A window is read as whole UTC days from `usage_daily` plus the partial days at its edges from the
hourly `usage_aggregates`, so a 90-day report touches about 90 days of roll-ups, not 2,160 hours
of detail. An hour belongs to the window when it starts inside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    Subquery,
    func,
    literal,
    select,
    union_all,
)

from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import UtcDateTime

DIMENSIONS = ("api_key_id", "chain_id", "method", "scenario", "day")
_DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class UsageWindow:
    customer_id: int
    start: datetime  # inclusive, timezone-aware
    end: datetime  # exclusive
    chain_id: int | None = None
    api_key_id: int | None = None


def floor_day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def ceil_day(moment: datetime) -> datetime:
    floor = floor_day(moment)
    return floor if floor == moment else floor + _DAY


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def ceil_hour(moment: datetime) -> datetime:
    floor = floor_hour(moment)
    return floor if floor == moment else floor + timedelta(hours=1)


def _filters(table: Any, window: UsageWindow) -> list[ColumnElement[bool]]:
    conditions = [table.c.customer_id == window.customer_id]
    if window.chain_id is not None:
        conditions.append(table.c.chain_id == window.chain_id)
    if window.api_key_id is not None:
        conditions.append(table.c.api_key_id == window.api_key_id)
    return conditions


def _hourly_part(window: UsageWindow, start: datetime, end: datetime) -> Any:
    """Hourly rows in [start, end), all within one day, labelled with that day."""
    hourly = t.usage_aggregates
    return select(
        *(hourly.c[name] for name in DIMENSIONS[:4]),
        literal(floor_day(start), UtcDateTime()).label("day"),
        hourly.c.request_count,
        hourly.c.credits_nano,
    ).where(*_filters(hourly, window), hourly.c.bucket_start >= start, hourly.c.bucket_start < end)


def usage_source(window: UsageWindow) -> Subquery:
    """Rows (api_key_id, chain_id, method, scenario, day, request_count, credits_nano)."""
    whole_start, whole_end = ceil_day(window.start), floor_day(window.end)
    parts: list[Any] = []
    head_end = min(window.end, whole_start)
    if window.start < head_end:
        parts.append(_hourly_part(window, window.start, head_end))
    if whole_start < whole_end:
        daily = t.usage_daily
        parts.append(
            select(
                *(daily.c[name] for name in DIMENSIONS),
                daily.c.request_count,
                daily.c.credits_nano,
            ).where(*_filters(daily, window), daily.c.day >= whole_start, daily.c.day < whole_end)
        )
    tail_start = max(whole_end, head_end)
    if tail_start < window.end:
        parts.append(_hourly_part(window, tail_start, window.end))
    if not parts:  # an empty window: keep the shape, select nothing
        parts.append(_hourly_part(window, window.start, window.start))
    if len(parts) == 1:
        single: Select[Any] = parts[0]
        return single.subquery("usage_rows")
    return union_all(*parts).subquery("usage_rows")


@dataclass(frozen=True, slots=True)
class Sums:
    dimensions: tuple[Any, ...]
    request_count: int
    credits_nano: int


def grouped_sums(
    connection: Connection,
    window: UsageWindow,
    dimensions: Sequence[str],
    *,
    limit: int | None = None,
    by_spend: bool = True,
) -> list[Sums]:
    """Sums per combination of `dimensions` (none: one total row), by spend or by dimensions."""
    source = usage_source(window)
    group = [source.c[name] for name in dimensions]
    requests = func.coalesce(func.sum(source.c.request_count), 0)
    credits = func.coalesce(func.sum(source.c.credits_nano), 0)
    query = select(*group, requests, credits)
    if group:
        query = query.group_by(*group)
        order = [credits.desc(), requests.desc(), *group] if by_spend else group
        query = query.order_by(*order)
    if limit is not None:
        query = query.limit(limit)
    return [
        Sums(tuple(row[: len(group)]), int(row[len(group)]), int(row[len(group) + 1]))
        for row in connection.execute(query)
    ]


def hourly_sums(connection: Connection, window: UsageWindow) -> dict[datetime, tuple[int, int]]:
    """(requests, credits) per hour with usage, from the per-hour totals when unfiltered."""
    if window.chain_id is None and window.api_key_id is None:
        table: Any = t.usage_hourly_totals
        query = select(table.c.bucket_start, table.c.request_count, table.c.credits_nano).where(
            table.c.customer_id == window.customer_id
        )
    else:
        table = t.usage_aggregates
        query = (
            select(
                table.c.bucket_start,
                func.sum(table.c.request_count),
                func.sum(table.c.credits_nano),
            )
            .where(*_filters(table, window))
            .group_by(table.c.bucket_start)
        )
    query = query.where(table.c.bucket_start >= window.start, table.c.bucket_start < window.end)
    return {row[0]: (int(row[1]), int(row[2])) for row in connection.execute(query)}


def key_labels(connection: Connection, key_ids: set[int]) -> dict[int, tuple[str, str]]:
    """name and hint per API key id."""
    if not key_ids:
        return {}
    query = select(t.api_keys.c.id, t.api_keys.c.name, t.api_keys.c.key_hint).where(
        t.api_keys.c.id.in_(key_ids)
    )
    return {row.id: (row.name, row.key_hint) for row in connection.execute(query)}


@dataclass(frozen=True, slots=True)
class BucketSums:
    bucket: datetime  # the hour, or the UTC day
    value: Any  # the dimension's value (a key id, a chain id, a method, a scenario)
    request_count: int
    credits_nano: int


def bucketed_sums(
    connection: Connection, window: UsageWindow, dimension: str, *, hourly: bool
) -> list[BucketSums]:
    """Sums per (hour or UTC day, value of `dimension`), only where there was usage, by time."""
    bucket: Any
    value: Any
    if hourly:
        table = t.usage_aggregates
        bucket, value = table.c.bucket_start, table.c[dimension]
        query = (
            select(bucket, value, func.sum(table.c.request_count), func.sum(table.c.credits_nano))
            .where(*_filters(table, window), bucket >= window.start, bucket < window.end)
            .group_by(bucket, value)
            .order_by(bucket, value)
        )
    else:
        source = usage_source(window)
        bucket, value = source.c.day, source.c[dimension]
        query = (
            select(bucket, value, func.sum(source.c.request_count), func.sum(source.c.credits_nano))
            .group_by(bucket, value)
            .order_by(bucket, value)
        )
    return [
        BucketSums(row[0], row[1], int(row[2]), int(row[3])) for row in connection.execute(query)
    ]


@dataclass(frozen=True, slots=True)
class HourRow:
    bucket: datetime
    api_key_id: int
    chain_id: int
    method: str
    scenario: str
    request_count: int
    credits_nano: int


def recent_rows(
    connection: Connection, window: UsageWindow, scenarios: Sequence[str], limit: int
) -> list[HourRow]:
    """The window's hourly rows of these scenarios, newest hour first, most calls first."""
    table = t.usage_aggregates
    query = (
        select(
            table.c.bucket_start,
            table.c.api_key_id,
            table.c.chain_id,
            table.c.method,
            table.c.scenario,
            table.c.request_count,
            table.c.credits_nano,
        )
        .where(
            *_filters(table, window),
            table.c.bucket_start >= window.start,
            table.c.bucket_start < window.end,
            table.c.scenario.in_(scenarios),
        )
        .order_by(
            table.c.bucket_start.desc(),
            table.c.request_count.desc(),
            table.c.api_key_id,
            table.c.chain_id,
            table.c.method,
            table.c.scenario,
        )
        .limit(limit)
    )
    return [HourRow(*row) for row in connection.execute(query)]


def spent_by_key_since(connection: Connection, customer_id: int, since: datetime) -> dict[int, int]:
    """Credits (nano) each of the customer's keys spent in the hours from `since`."""
    table = t.usage_aggregates
    query = (
        select(table.c.api_key_id, func.sum(table.c.credits_nano))
        .where(table.c.customer_id == customer_id, table.c.bucket_start >= since)
        .group_by(table.c.api_key_id)
    )
    return {int(row[0]): int(row[1]) for row in connection.execute(query)}
