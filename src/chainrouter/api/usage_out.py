"""The usage report as JSON (spec section 2): every row has `credits_consumed` and
`request_count`; sections appear only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, TypeVar

from pydantic import Field

from chainrouter.api.common import ChainIdOut, CreditsOut, OutModel, credits_out
from chainrouter.domain.outcomes import Outcome, meaning
from chainrouter.management.usage import Section, UsageReport, UsageRow

_AVERAGE_PLACES = Decimal("1e-12")
T = TypeVar("T")


class Period(OutModel):
    start: datetime = Field(serialization_alias="from")
    end: datetime = Field(serialization_alias="to")


class Totals(OutModel):
    credits_consumed: CreditsOut
    request_count: int


class Summary(Totals):
    credits_per_request: CreditsOut = Field(
        description="Average spend per request, to 12 decimal places; 0 without requests."
    )


class BalanceOut(OutModel):
    credits: CreditsOut
    as_of: datetime


class ChainRow(Totals):
    chain_id: ChainIdOut


class KeyRow(Totals):
    api_key_id: int
    key_hint: str | None
    name: str | None


class KeyChainRow(KeyRow):
    chain_id: ChainIdOut


class MethodRow(Totals):
    method: str


class BucketRow(Totals):
    bucket: datetime = Field(description="Start of the day or hour (UTC).")


class Meaning(OutModel):
    """What a scenario meant to the caller (docs/management-api.md#the-usage-report)."""

    outcome: Outcome = Field(
        description="served: answered; failed: an error; limited: refused by a rate limit, "
        "a cooldown or the balance."
    )
    error_codes: list[int] = Field(description="The JSON-RPC error codes the calls got.")
    error: str | None = Field(
        default=None, description="What went wrong, for people; left out when served."
    )


class ScenarioRow(Totals, Meaning):
    scenario: str = Field(description="Routing outcome, e.g. first_choice, failover.")


class SeriesRow(BucketRow):
    other: bool = Field(
        default=False,
        description="true: the sum of every value beyond the `limit` largest by spend.",
    )


class ChainSeriesRow(SeriesRow):
    chain_id: ChainIdOut | None = None


class MethodSeriesRow(SeriesRow):
    method: str | None = None


class KeySeriesRow(SeriesRow):
    api_key_id: int | None = None
    key_hint: str | None = None
    name: str | None = None


class ScenarioSeriesRow(SeriesRow):
    scenario: str | None = None
    outcome: Outcome | None = None


class FailureRow(Totals, Meaning):
    bucket: datetime = Field(description="The hour the calls were made in (UTC).")
    api_key_id: int
    key_hint: str
    name: str
    chain_id: ChainIdOut
    method: str
    scenario: str


class GroupRow(Totals):
    api_key_id: int | None = None
    name: str | None = None
    key_hint: str | None = None
    chain_id: ChainIdOut | None = None
    method: str | None = None
    scenario: str | None = None
    day: str | None = Field(default=None, description="YYYY-MM-DD (UTC).")


class UsageReportOut(OutModel):
    customer_id: int
    period: Period
    summary: Summary | None = None
    balance: BalanceOut | None = None
    by_chain: list[ChainRow] | None = None
    by_api_key: list[KeyRow] | None = None
    by_api_key_chain: list[KeyChainRow] | None = None
    top_methods: list[MethodRow] | None = Field(default=None, description="Ordered by spend.")
    time_series: list[BucketRow] | None = None
    by_scenario: list[ScenarioRow] | None = None
    groups: list[GroupRow] | None = None
    time_series_by_chain: list[ChainSeriesRow] | None = None
    time_series_by_method: list[MethodSeriesRow] | None = None
    time_series_by_api_key: list[KeySeriesRow] | None = None
    time_series_by_scenario: list[ScenarioSeriesRow] | None = None
    failures: list[FailureRow] | None = Field(
        default=None,
        description="Calls not served, per hour, key, chain, method and scenario, newest first.",
    )

    @classmethod
    def of(cls, report: UsageReport) -> UsageReportOut:
        rows = report.sections
        return cls(
            customer_id=report.customer_id,
            period=Period(start=report.start, end=report.end),
            summary=None if report.summary is None else _summary(report.summary),
            balance=None
            if report.balance is None
            else BalanceOut(
                credits=credits_out(report.balance.credits_nano), as_of=report.balance.as_of
            ),
            by_chain=_each(
                rows.get(Section.BY_CHAIN),
                lambda r: ChainRow(**_totals(r), chain_id=str(r.chain_id)),
            ),
            by_api_key=_each(rows.get(Section.BY_API_KEY), lambda r: KeyRow(**_key(r))),
            by_api_key_chain=_each(
                rows.get(Section.BY_API_KEY_CHAIN),
                lambda r: KeyChainRow(**_key(r), chain_id=str(r.chain_id)),
            ),
            top_methods=_each(
                rows.get(Section.TOP_METHODS),
                lambda r: MethodRow(**_totals(r), method=str(r.method)),
            ),
            time_series=_each(
                rows.get(Section.TIME_SERIES),
                lambda r: BucketRow(**_totals(r), bucket=_required(r.bucket)),
            ),
            by_scenario=_each(
                rows.get(Section.BY_SCENARIO),
                lambda r: ScenarioRow(
                    **_totals(r), **_meaning(str(r.scenario)), scenario=str(r.scenario)
                ),
            ),
            groups=_each(report.groups, _group),
            time_series_by_chain=_each(
                rows.get(Section.TIME_SERIES_BY_CHAIN),
                lambda r: ChainSeriesRow(
                    **_series(r), chain_id=None if r.chain_id is None else str(r.chain_id)
                ),
            ),
            time_series_by_method=_each(
                rows.get(Section.TIME_SERIES_BY_METHOD),
                lambda r: MethodSeriesRow(**_series(r), method=r.method),
            ),
            time_series_by_api_key=_each(
                rows.get(Section.TIME_SERIES_BY_API_KEY),
                lambda r: KeySeriesRow(
                    **_series(r), api_key_id=r.api_key_id, key_hint=r.key_hint, name=r.name
                ),
            ),
            time_series_by_scenario=_each(
                rows.get(Section.TIME_SERIES_BY_SCENARIO),
                lambda r: ScenarioSeriesRow(
                    **_series(r),
                    scenario=r.scenario,
                    outcome=None if r.scenario is None else meaning(r.scenario).outcome,
                ),
            ),
            failures=_each(rows.get(Section.FAILURES), _failure),
        )


def _totals(row: UsageRow) -> dict[str, Any]:
    return {"credits_consumed": credits_out(row.credits_nano), "request_count": row.request_count}


def _series(row: UsageRow) -> dict[str, Any]:
    return {**_totals(row), "bucket": _required(row.bucket), "other": row.other}


def _meaning(scenario: str) -> dict[str, Any]:
    found = meaning(scenario)
    return {
        "outcome": found.outcome,
        "error_codes": list(found.error_codes),
        "error": found.error,
    }


def _failure(row: UsageRow) -> FailureRow:
    return FailureRow(
        **_totals(row),
        **_meaning(str(row.scenario)),
        bucket=_required(row.bucket),
        api_key_id=int(row.api_key_id or 0),
        key_hint=row.key_hint or "",
        name=row.name or "",
        chain_id=str(row.chain_id),
        method=str(row.method),
        scenario=str(row.scenario),
    )


def _key(row: UsageRow) -> dict[str, Any]:
    return {
        **_totals(row),
        "api_key_id": row.api_key_id,
        "key_hint": row.key_hint,
        "name": row.name,
    }


def _summary(row: UsageRow) -> Summary:
    average = Decimal(0)
    if row.request_count:
        average = (credits_out(row.credits_nano) / row.request_count).quantize(
            _AVERAGE_PLACES, rounding=ROUND_HALF_EVEN
        )
    return Summary(**_totals(row), credits_per_request=average)


def _group(row: UsageRow) -> GroupRow:
    return GroupRow(
        **_totals(row),
        api_key_id=row.api_key_id,
        name=row.name,
        key_hint=row.key_hint,
        chain_id=None if row.chain_id is None else str(row.chain_id),
        method=row.method,
        scenario=row.scenario,
        day=None if row.day is None else row.day.date().isoformat(),
    )


def _each(rows: list[UsageRow] | None, make: Callable[[UsageRow], T]) -> list[T] | None:
    return None if rows is None else [make(row) for row in rows]


def _required(moment: datetime | None) -> datetime:
    assert moment is not None
    return moment
