"""The usage report as JSON (spec section 2): every row has `credits_consumed` and
`request_count`; sections appear only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any, TypeVar

from pydantic import Field

from chainrouter.api.common import ChainIdOut, CreditsOut, OutModel, credits_out
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


class ScenarioRow(Totals):
    scenario: str = Field(description="Routing outcome, e.g. first_choice, failover.")


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
                lambda r: ScenarioRow(**_totals(r), scenario=str(r.scenario)),
            ),
            groups=_each(report.groups, _group),
        )


def _totals(row: UsageRow) -> dict[str, Any]:
    return {"credits_consumed": credits_out(row.credits_nano), "request_count": row.request_count}


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
