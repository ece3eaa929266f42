"""The usage report: the sections a customer asks for, over a window of at most 90 days."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import Connection, Engine

from chainrouter.domain.outcomes import unserved
from chainrouter.management.errors import InvalidInputError, NotFoundError
from chainrouter.stores.sql.accounts import customer_balance
from chainrouter.stores.sql.api_keys import get_api_key
from chainrouter.stores.sql.engine import read_snapshot
from chainrouter.stores.sql.usage_report import (
    Sums,
    UsageWindow,
    bucketed_sums,
    ceil_hour,
    floor_day,
    grouped_sums,
    hourly_sums,
    key_labels,
    recent_rows,
)

DEFAULT_WINDOW = timedelta(days=30)
MAX_WINDOW = timedelta(days=90)
# The times a window may start and end within: far from the ends of Python's datetime, so that
# no offset, default window or bucket arithmetic can leave it.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)


class Section(StrEnum):
    SUMMARY = "summary"
    BALANCE = "balance"
    BY_CHAIN = "by_chain"
    BY_API_KEY = "by_api_key"
    BY_API_KEY_CHAIN = "by_api_key_chain"
    TOP_METHODS = "top_methods"
    TIME_SERIES = "time_series"
    BY_SCENARIO = "by_scenario"
    # Beyond the spec's sections: spend and calls over time broken down, and the failed calls.
    TIME_SERIES_BY_CHAIN = "time_series_by_chain"
    TIME_SERIES_BY_METHOD = "time_series_by_method"
    TIME_SERIES_BY_API_KEY = "time_series_by_api_key"
    TIME_SERIES_BY_SCENARIO = "time_series_by_scenario"
    FAILURES = "failures"


DEFAULT_SECTIONS = frozenset({Section.SUMMARY, Section.BALANCE})


class GroupBy(StrEnum):
    CHAIN = "chain"
    API_KEY = "api_key"
    API_KEY_CHAIN = "api_key,chain"
    METHOD = "method"
    DAY = "day"


class Granularity(StrEnum):
    DAY = "day"
    HOUR = "hour"


# The storage dimensions each row kind is summed by.
_SECTION_DIMENSIONS: dict[Section, tuple[str, ...]] = {
    Section.BY_CHAIN: ("chain_id",),
    Section.BY_API_KEY: ("api_key_id",),
    Section.BY_API_KEY_CHAIN: ("api_key_id", "chain_id"),
    Section.TOP_METHODS: ("method",),
    Section.BY_SCENARIO: ("scenario",),
}
_GROUP_DIMENSIONS: dict[GroupBy, tuple[str, ...]] = {
    GroupBy.CHAIN: ("chain_id",),
    GroupBy.API_KEY: ("api_key_id",),
    GroupBy.API_KEY_CHAIN: ("api_key_id", "chain_id"),
    GroupBy.METHOD: ("method",),
}  # GroupBy.DAY reads per-day sums instead
_SERIES_DIMENSION: dict[Section, str] = {
    Section.TIME_SERIES_BY_CHAIN: "chain_id",
    Section.TIME_SERIES_BY_METHOD: "method",
    Section.TIME_SERIES_BY_API_KEY: "api_key_id",
    Section.TIME_SERIES_BY_SCENARIO: "scenario",
}


@dataclass(frozen=True, slots=True)
class UsageQuery:
    customer_id: int
    start: datetime
    end: datetime
    sections: frozenset[Section]
    group_by: GroupBy | None
    granularity: Granularity
    chain_id: int | None
    api_key_id: int | None
    limit: int


def make_query(
    customer_id: int,
    *,
    start: datetime | None,
    end: datetime | None,
    sections: frozenset[Section] | None,
    group_by: GroupBy | None,
    granularity: Granularity,
    chain_id: int | None,
    api_key_id: int | None,
    limit: int,
    now: datetime | None = None,
) -> UsageQuery:
    """Apply the defaults (the last 30 days; summary and balance, or only the grouping when one
    is asked for) and the rules (start before end, at most 90 days)."""
    start, end = window_of(start, end, now)
    if sections is None:
        sections = frozenset() if group_by is not None else DEFAULT_SECTIONS
    return UsageQuery(
        customer_id=customer_id,
        start=start.astimezone(UTC),
        end=end.astimezone(UTC),
        sections=sections,
        group_by=group_by,
        granularity=granularity,
        chain_id=chain_id,
        api_key_id=api_key_id,
        limit=limit,
    )


def window_of(
    start: datetime | None, end: datetime | None, now: datetime | None = None
) -> tuple[datetime, datetime]:
    """A report's window from the caller's `from` and `to`: by default the 30 days before now;
    `from` before `to`, at most 90 days apart (422 otherwise)."""
    now = now or datetime.now(UTC)
    for name, moment in (("from", start), ("to", end)):
        if moment is not None and not _within_range(moment):
            raise InvalidInputError(
                f"`{name}` must be between {EARLIEST:%Y-%m-%d} and {LATEST:%Y-%m-%d} (UTC)"
            )
    end = end or now
    start = start or end - DEFAULT_WINDOW
    if start >= end:
        raise InvalidInputError("`from` must be before `to`")
    if end - start > MAX_WINDOW:
        raise InvalidInputError("the window from `from` to `to` may span at most 90 days")
    return start, end


def _within_range(moment: datetime) -> bool:
    try:
        return EARLIEST <= moment.astimezone(UTC) < LATEST
    except OverflowError:  # an offset that takes it past year 1 or 9999
        return False


@dataclass(frozen=True, slots=True)
class UsageRow:
    request_count: int
    credits_nano: int
    api_key_id: int | None = None
    key_hint: str | None = None
    name: str | None = None
    chain_id: int | None = None
    method: str | None = None
    scenario: str | None = None
    day: datetime | None = None
    bucket: datetime | None = None
    other: bool = False  # the sum of the values beyond the `limit` largest of a broken-down series


@dataclass(frozen=True, slots=True)
class Balance:
    credits_nano: int
    as_of: datetime


@dataclass(slots=True)
class UsageReport:
    customer_id: int
    start: datetime
    end: datetime
    summary: UsageRow | None = None
    balance: Balance | None = None
    sections: dict[Section, list[UsageRow]] = field(default_factory=dict)
    groups: list[UsageRow] | None = None


def build_report(engine: Engine, query: UsageQuery) -> UsageReport:
    """One read of the window's sums per (key, chain, method, scenario), folded here into every
    section and grouping that does not need time; time-based rows read per-day or per-hour sums.

    A customer's combinations of key, chain, method and scenario number in the hundreds or
    thousands, so folding them is cheap, and the window's rows are scanned once, not once per
    section (measured in docs/benchmarks.md).
    """
    window = UsageWindow(
        query.customer_id, query.start, query.end, query.chain_id, query.api_key_id
    )
    report = UsageReport(query.customer_id, query.start, query.end)
    with read_snapshot(engine) as connection:  # a flush landing meanwhile: in no section or all
        if query.api_key_id is not None:
            key = get_api_key(connection, query.api_key_id)
            if key is None or key.customer_id != query.customer_id:
                raise NotFoundError(f"no API key {query.api_key_id}")
        combos: list[Sums] | None = None

        def fold(dimensions: tuple[str, ...], limit: int | None) -> list[Sums]:
            nonlocal combos
            if combos is None:
                combos = grouped_sums(connection, window, _COMBINATION, by_spend=False)
            return _fold(combos, dimensions, limit)

        if Section.SUMMARY in query.sections:
            [total] = fold((), None) or [Sums((), 0, 0)]
            report.summary = UsageRow(total.request_count, total.credits_nano)
        if Section.BALANCE in query.sections:
            report.balance = Balance(
                customer_balance(connection, query.customer_id) or 0, datetime.now(UTC)
            )
        for section, dimensions in _SECTION_DIMENSIONS.items():
            if section in query.sections:
                report.sections[section] = _rows(
                    connection, dimensions, fold(dimensions, query.limit)
                )
        if Section.TIME_SERIES in query.sections:
            report.sections[Section.TIME_SERIES] = _time_series(connection, window, query)
        for section, dimension in _SERIES_DIMENSION.items():
            if section in query.sections:
                largest = {s.dimensions[0] for s in fold((dimension,), query.limit)}
                report.sections[section] = _series_by(connection, window, query, dimension, largest)
        if Section.FAILURES in query.sections:
            report.sections[Section.FAILURES] = _failures(connection, window, query.limit)
        if query.group_by is GroupBy.DAY:
            # Every day, oldest first, as in time_series: `limit` cuts rankings, and cutting a
            # run of days would drop the newest; the 90-day bound keeps it to 91 rows.
            days = sorted(_daily_sums(connection, window).items())
            report.groups = [UsageRow(n, c, day=day) for day, (n, c) in days if n or c]
        elif query.group_by is not None:
            dimensions = _GROUP_DIMENSIONS[query.group_by]
            report.groups = _rows(connection, dimensions, fold(dimensions, query.limit))
    return report


_COMBINATION = ("api_key_id", "chain_id", "method", "scenario")


def _fold(combos: list[Sums], dimensions: tuple[str, ...], limit: int | None) -> list[Sums]:
    """Sum the per-combination rows by `dimensions`, by spend, then requests, then dimensions."""
    positions = [_COMBINATION.index(name) for name in dimensions]
    totals: dict[tuple[Any, ...], list[int]] = {}
    for combo in combos:
        total = totals.setdefault(tuple(combo.dimensions[p] for p in positions), [0, 0])
        total[0] += combo.request_count
        total[1] += combo.credits_nano
    ordered = sorted(totals.items(), key=lambda item: (-item[1][1], -item[1][0], item[0]))
    return [Sums(key, n, c) for key, (n, c) in ordered[:limit]]


def _daily_sums(connection: Connection, window: UsageWindow) -> dict[datetime, tuple[int, int]]:
    """(requests, credits) per UTC day with usage; unfiltered, from the per-hour totals."""
    if window.chain_id is not None or window.api_key_id is not None:
        return {
            s.dimensions[0]: (s.request_count, s.credits_nano)
            for s in grouped_sums(connection, window, ("day",), by_spend=False)
        }
    days: dict[datetime, tuple[int, int]] = {}
    for hour, (requests, credits) in hourly_sums(connection, window).items():
        n, c = days.get(floor_day(hour), (0, 0))
        days[floor_day(hour)] = (n + requests, c + credits)
    return days


def _rows(connection: Connection, dimensions: tuple[str, ...], sums: list[Sums]) -> list[UsageRow]:
    labels = {}
    if "api_key_id" in dimensions:
        position = dimensions.index("api_key_id")
        labels = key_labels(connection, {int(s.dimensions[position]) for s in sums})
    rows = []
    for found in sums:
        values = dict(zip(dimensions, found.dimensions, strict=True))
        key_id = values.get("api_key_id")
        name, hint = labels.get(key_id, (None, None)) if key_id is not None else (None, None)
        rows.append(
            UsageRow(
                request_count=found.request_count,
                credits_nano=found.credits_nano,
                api_key_id=key_id,
                key_hint=hint,
                name=name,
                chain_id=values.get("chain_id"),
                method=values.get("method"),
                scenario=values.get("scenario"),
                day=values.get("day"),
            )
        )
    return rows


def _time_series(connection: Connection, window: UsageWindow, query: UsageQuery) -> list[UsageRow]:
    """Every bucket of the window in order, zeros included, so that a chart needs no filling."""
    if query.granularity is Granularity.HOUR:
        found = hourly_sums(connection, window)
        step = timedelta(hours=1)
        bucket = ceil_hour(window.start)
    else:
        found = _daily_sums(connection, window)
        step = timedelta(days=1)
        bucket = floor_day(window.start)
    series = []
    while bucket < window.end:
        requests, credits = found.get(bucket, (0, 0))
        series.append(UsageRow(requests, credits, bucket=bucket))
        bucket += step
    return series


def _series_by(
    connection: Connection,
    window: UsageWindow,
    query: UsageQuery,
    dimension: str,
    largest: set[Any],
) -> list[UsageRow]:
    """Per bucket with usage, a row per value of `dimension` among the `largest` (by spend in
    the window), and one `other` row summing the rest; by time, then value."""
    hourly = query.granularity is Granularity.HOUR
    rows: list[UsageRow] = []
    others: dict[datetime, list[int]] = {}
    for found in bucketed_sums(connection, window, dimension, hourly=hourly):
        if found.value in largest:
            fields = {dimension: found.value, "bucket": found.bucket}
            rows.append(UsageRow(found.request_count, found.credits_nano, **fields))
        else:
            total = others.setdefault(found.bucket, [0, 0])
            total[0] += found.request_count
            total[1] += found.credits_nano
    rows.extend(UsageRow(n, c, bucket=bucket, other=True) for bucket, (n, c) in others.items())
    if dimension == "api_key_id":
        labels = key_labels(connection, {r.api_key_id for r in rows if r.api_key_id is not None})
        rows = [_labelled(r, labels) for r in rows]
    return sorted(rows, key=lambda r: (r.bucket, r.other, str(_value(r, dimension))))


def _value(row: UsageRow, dimension: str) -> Any:
    return getattr(row, dimension)


def _labelled(row: UsageRow, labels: dict[int, tuple[str, str]]) -> UsageRow:
    if row.api_key_id is None:
        return row
    name, hint = labels.get(row.api_key_id, (None, None))
    return replace(row, name=name, key_hint=hint)


def _failures(connection: Connection, window: UsageWindow, limit: int) -> list[UsageRow]:
    """The window's calls that were not served (failed or limited), by hour, key, chain,
    method and scenario: newest hour first. The router stores usage per hour, not per call."""
    found = recent_rows(connection, window, unserved(), limit)
    labels = key_labels(connection, {row.api_key_id for row in found})
    return [
        UsageRow(
            request_count=row.request_count,
            credits_nano=row.credits_nano,
            api_key_id=row.api_key_id,
            name=labels.get(row.api_key_id, ("", ""))[0],
            key_hint=labels.get(row.api_key_id, ("", ""))[1],
            chain_id=row.chain_id,
            method=row.method,
            scenario=row.scenario,
            bucket=row.bucket,
        )
        for row in found
    ]
