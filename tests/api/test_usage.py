"""`GET /usage`: every section and grouping of the usage report, filters, limits and the window
rules, checked against sums computed here from the very rows the router's flush wrote."""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from chainrouter.domain.enums import Scenario
from chainrouter.management import usage as usage_report
from chainrouter.stores.sql.usage import write_usage
from tests.api.conftest import ApiHarness, Customer

NOW_HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
METHODS = ("eth_call", "eth_getLogs", "eth_blockNumber")
SCENARIOS = ("first_choice", "failover")


@dataclass
class Row:
    key_id: int
    chain_id: int
    method: str
    scenario: str
    hour: datetime
    requests: int
    nano: int


@dataclass
class UsageWorld:
    api: ApiHarness
    customer: Customer
    keys: list[dict[str, Any]]
    rows: list[Row]
    other: Customer
    other_key: dict[str, Any]

    def get(self, **params: Any) -> Any:
        response = self.api.client.get("/usage", params=params, headers=self.customer.headers)
        assert response.status_code == 200, response.text
        return response.json()

    def expected(
        self,
        start: datetime,
        end: datetime,
        by: tuple[str, ...] = (),
        chain_id: int | None = None,
        key_id: int | None = None,
    ) -> dict[tuple[Any, ...], tuple[int, int]]:
        sums: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])
        for row in self.rows:
            if not start <= row.hour < end:
                continue
            if chain_id is not None and row.chain_id != chain_id:
                continue
            if key_id is not None and row.key_id != key_id:
                continue
            values = {
                "key": row.key_id,
                "chain": row.chain_id,
                "method": row.method,
                "scenario": row.scenario,
                "day": row.hour.date().isoformat(),
            }
            total = sums[tuple(values[name] for name in by)]
            total[0] += row.requests
            total[1] += row.nano
        return {k: (v[0], v[1]) for k, v in sums.items()}


def _write(api: ApiHarness, customer_id: int, rows: list[Row]) -> None:
    aggregated: dict[tuple[int, int, int, str, str, int, int], list[int]] = {}
    spend: dict[int, int] = defaultdict(int)
    for row in rows:
        key = (
            customer_id,
            row.key_id,
            row.chain_id,
            row.method,
            row.scenario,
            int(row.hour.timestamp()),
            0,
        )
        total = aggregated.setdefault(key, [0, 0])
        total[0] += row.requests
        total[1] += row.nano
        spend[customer_id] += row.nano
    write_usage(api.engine, aggregated, dict(spend), reference=f"test:{customer_id}:{len(rows)}")


def _random_rows(rng: random.Random, key_ids: list[int], hours: int, count: int) -> list[Row]:
    return [
        Row(
            key_id=rng.choice(key_ids),
            chain_id=rng.choice((1, 10, 31337)),
            method=rng.choice(METHODS),
            scenario=rng.choice(SCENARIOS),
            hour=NOW_HOUR - timedelta(hours=rng.randrange(hours)),
            requests=rng.randrange(1, 50),
            nano=rng.choice((0, 300, 1_000, 2_500_000)),
        )
        for _ in range(count)
    ]


@pytest.fixture
def world(api: ApiHarness) -> UsageWorld:
    customer = api.customer("Usage")
    keys = [api.create_key(customer, name=f"key-{i}") for i in range(3)]
    other = api.customer("Other")
    other_key = api.create_key(other, name="theirs")
    api.client.post(
        f"/admin/customers/{customer.id}/credits",
        json={"kind": "grant", "amount": "100"},
        headers=api.admin,
    )
    rng = random.Random(7)
    rows = _random_rows(rng, [k["id"] for k in keys], hours=24 * 45, count=400)
    _write(api, customer.id, rows)
    _write(api, other.id, _random_rows(rng, [other_key["id"]], hours=24 * 10, count=50))
    return UsageWorld(api, customer, keys, rows, other, other_key)


def _credits(nano: int) -> Decimal:
    return Decimal(nano).scaleb(-9)


def _as_sums(
    rows: list[dict[str, Any]], *fields: str
) -> dict[tuple[Any, ...], tuple[int, Decimal]]:
    return {
        tuple(row[f] for f in fields): (row["request_count"], Decimal(str(row["credits_consumed"])))
        for row in rows
    }


def _expected_sums(
    expected: dict[tuple[Any, ...], tuple[int, int]], convert: Any = lambda k: k
) -> dict[tuple[Any, ...], tuple[int, Decimal]]:
    return {convert(k): (n, _credits(c)) for k, (n, c) in expected.items()}


def test_the_default_is_summary_and_balance_of_the_last_30_days(world: UsageWorld) -> None:
    report = world.get()
    assert set(report) == {"customer_id", "period", "summary", "balance"}
    assert report["customer_id"] == world.customer.id
    start = datetime.fromisoformat(report["period"]["from"])
    end = datetime.fromisoformat(report["period"]["to"])
    assert end - start == timedelta(days=30)
    [(requests, nano)] = world.expected(start, end).values()
    assert report["summary"]["request_count"] == requests
    assert Decimal(str(report["summary"]["credits_consumed"])) == _credits(nano)
    spent_in_all = sum(row.nano for row in world.rows)
    assert Decimal(str(report["balance"]["credits"])) == Decimal(100) - _credits(spent_in_all)
    assert report["balance"]["as_of"].endswith("Z")


def test_every_section_matches_the_stored_rows(world: UsageWorld) -> None:
    start, end = NOW_HOUR - timedelta(days=20, hours=5), NOW_HOUR + timedelta(hours=1)
    report = world.get(
        **{"from": start.isoformat(), "to": end.isoformat()},
        include="summary,balance,by_chain,by_api_key,by_api_key_chain,top_methods,time_series,by_scenario",
        limit=100,
    )
    names = {k["id"]: (k["name"], k["key_hint"]) for k in world.keys}
    assert _as_sums(report["by_chain"], "chain_id") == _expected_sums(
        world.expected(start, end, ("chain",)), lambda k: (str(k[0]),)
    )
    assert _as_sums(report["by_api_key"], "api_key_id") == _expected_sums(
        world.expected(start, end, ("key",))
    )
    for row in report["by_api_key"] + report["by_api_key_chain"]:
        assert (row["name"], row["key_hint"]) == names[row["api_key_id"]]
    assert _as_sums(report["by_api_key_chain"], "api_key_id", "chain_id") == _expected_sums(
        world.expected(start, end, ("key", "chain")), lambda k: (k[0], str(k[1]))
    )
    assert _as_sums(report["top_methods"], "method") == _expected_sums(
        world.expected(start, end, ("method",))
    )
    spend = [Decimal(str(row["credits_consumed"])) for row in report["top_methods"]]
    assert spend == sorted(spend, reverse=True)
    assert _as_sums(report["by_scenario"], "scenario") == _expected_sums(
        world.expected(start, end, ("scenario",))
    )
    series = report["time_series"]
    first_day = start.replace(hour=0)
    last_day = (end - timedelta(microseconds=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert len(series) == (last_day - first_day).days + 1  # partial days at the edges included
    assert series[0]["bucket"] == (start.replace(hour=0)).strftime("%Y-%m-%dT%H:%M:%SZ")
    by_day = world.expected(start, end, ("day",))
    for bucket in series:
        day = bucket["bucket"][:10]
        requests, nano = by_day.get((day,), (0, 0))
        assert (bucket["request_count"], Decimal(str(bucket["credits_consumed"]))) == (
            requests,
            _credits(nano),
        )
    summary = report["summary"]
    total = world.expected(start, end)[()]
    assert summary["request_count"] == total[0]
    average = Decimal(str(summary["credits_per_request"]))
    assert abs(average - _credits(total[1]) / total[0]) < Decimal("1e-12")


def test_an_hourly_series_has_every_hour_zeros_included(world: UsageWorld) -> None:
    start = NOW_HOUR - timedelta(hours=47, minutes=30)
    end = NOW_HOUR + timedelta(hours=1)
    key_id = world.keys[0]["id"]
    for params, filters in (
        ({}, {}),
        ({"api_key_id": key_id}, {"key_id": key_id}),
        ({"chain_id": "0xa"}, {"chain_id": 10}),
    ):
        report = world.get(
            **{"from": start.isoformat(), "to": end.isoformat()},
            include="time_series",
            granularity="hour",
            **params,
        )
        series = report["time_series"]
        assert len(series) == 48  # hours starting inside the window
        hourly: dict[str, tuple[int, int]] = defaultdict(lambda: (0, 0))
        for row in world.rows:
            if start <= row.hour < end and all(
                getattr(row, name) == value for name, value in filters.items()
            ):
                n, c = hourly[row.hour.strftime("%Y-%m-%dT%H:%M:%SZ")]
                hourly[row.hour.strftime("%Y-%m-%dT%H:%M:%SZ")] = (n + row.requests, c + row.nano)
        for bucket in series:
            n, c = hourly[bucket["bucket"]]
            assert bucket["request_count"] == n
            assert Decimal(str(bucket["credits_consumed"])) == _credits(c)


@pytest.mark.parametrize(
    ("group_by", "fields", "dims"),
    [
        ("chain", ("chain_id",), ("chain",)),
        ("api_key", ("api_key_id",), ("key",)),
        ("api_key,chain", ("api_key_id", "chain_id"), ("key", "chain")),
        ("method", ("method",), ("method",)),
        ("day", ("day",), ("day",)),
    ],
)
def test_grouping_fills_groups_only(
    world: UsageWorld, group_by: str, fields: tuple[str, ...], dims: tuple[str, ...]
) -> None:
    report = world.get(group_by=group_by, limit=1000)
    assert set(report) == {"customer_id", "period", "groups"}
    start = datetime.fromisoformat(report["period"]["from"])
    end = datetime.fromisoformat(report["period"]["to"])

    def stringify(key: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(str(v) if d == "chain" else v for v, d in zip(key, dims, strict=True))

    assert _as_sums(report["groups"], *fields) == _expected_sums(
        world.expected(start, end, dims), stringify
    )
    if group_by == "day":
        days = [row["day"] for row in report["groups"]]
        assert days == sorted(days)
    with_include = world.get(group_by="method", include="summary")
    assert set(with_include) == {"customer_id", "period", "groups", "summary"}


def test_day_groups_are_every_day_of_the_window_whatever_the_limit(world: UsageWorld) -> None:
    """The default window has 31 days with usage, more than the default limit of 20 rows: the
    newest days were the ones left out."""
    for params in ({}, {"limit": 2}):
        report = world.get(group_by="day", **params)
        start = datetime.fromisoformat(report["period"]["from"])
        end = datetime.fromisoformat(report["period"]["to"])
        expected = world.expected(start, end, ("day",))
        assert len(expected) > world.api.settings.usage_default_rows
        assert _as_sums(report["groups"], "day") == _expected_sums(expected)


def test_filters_by_chain_and_key(world: UsageWorld) -> None:
    key_id = world.keys[1]["id"]
    report = world.get(chain_id="31337", api_key_id=key_id, include="summary,by_api_key_chain")
    start = datetime.fromisoformat(report["period"]["from"])
    end = datetime.fromisoformat(report["period"]["to"])
    [(requests, nano)] = world.expected(start, end, chain_id=31337, key_id=key_id).values()
    assert report["summary"]["request_count"] == requests
    assert Decimal(str(report["summary"]["credits_consumed"])) == _credits(nano)
    assert {(r["api_key_id"], r["chain_id"]) for r in report["by_api_key_chain"]} == {
        (key_id, "31337")
    }


def test_another_customers_key_is_404_and_their_usage_never_shows(world: UsageWorld) -> None:
    response = world.api.client.get(
        "/usage", params={"api_key_id": world.other_key["id"]}, headers=world.customer.headers
    )
    assert response.status_code == 404
    report = world.get(include="by_api_key", limit=100)
    assert world.other_key["id"] not in {row["api_key_id"] for row in report["by_api_key"]}


def test_the_row_limit_has_a_default_and_a_maximum(world: UsageWorld) -> None:
    api = world.api
    default = world.get(include="by_api_key_chain")
    assert len(default["by_api_key_chain"]) == min(api.settings.usage_default_rows, 9)
    assert len(world.get(include="by_api_key_chain", limit=2)["by_api_key_chain"]) == 2
    too_many = api.client.get(
        "/usage",
        params={"limit": api.settings.usage_max_rows + 1},
        headers=world.customer.headers,
    )
    assert too_many.status_code == 422
    assert (
        api.client.get("/usage", params={"limit": 0}, headers=world.customer.headers).status_code
        == 422
    )


@pytest.mark.parametrize(
    "params",
    [
        {"from": "2026-01-01T00:00:00Z", "to": "2026-04-02T00:00:00Z"},  # 91 days
        {"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "2026-01-01T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"from": "yesterday"},
        {"from": "2026-01-01T00:00:00"},  # no time zone
        {"include": "summary,bogus"},
        {"include": ""},
        {"group_by": "week"},
        {"granularity": "minute"},
        {"chain_id": "ethereum"},
        {"api_key_id": "k"},
        # Extreme times: an offset past year 1, the ends of the calendar (security.md).
        {"from": "0001-01-01T00:00:00+14:00", "to": "0001-01-02T00:00:00+14:00"},
        {"from": "0001-01-01T00:00:00Z"},
        {"to": "0001-01-20T00:00:00Z"},
        {"from": "9999-12-30T00:00:00Z", "to": "9999-12-31T23:59:59-14:00"},
        {"api_key_id": str(2**64)},
        {"chain_id": str(2**80)},
    ],
)
def test_bad_usage_queries_are_422(api: ApiHarness, params: dict[str, str]) -> None:
    customer = api.customer()
    response = api.client.get("/usage", params=params, headers=customer.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_input"


def test_exactly_90_days_is_allowed(api: ApiHarness) -> None:
    customer = api.customer()
    response = api.client.get(
        "/usage",
        params={"from": "2026-01-01T00:00:00Z", "to": "2026-04-01T00:00:00+00:00"},
        headers=customer.headers,
    )
    assert response.status_code == 200
    assert response.json()["summary"] == {
        "credits_consumed": 0,
        "request_count": 0,
        "credits_per_request": 0,
    }


def test_random_windows_agree_with_the_hourly_rows(world: UsageWorld) -> None:
    """Whole days come from the daily roll-up and the edges from hourly rows: any window, cut
    anywhere, must add up to exactly what the hourly rows say."""
    rng = random.Random(11)
    for _ in range(25):
        start = NOW_HOUR - timedelta(hours=rng.randrange(24 * 44), minutes=rng.choice((0, 17)))
        end = start + timedelta(hours=rng.randrange(1, 24 * 12), minutes=rng.choice((0, 42)))
        chain = rng.choice((None, 1, 10))
        params: dict[str, Any] = {
            "from": start.isoformat(),
            "to": end.isoformat(),
            "include": "summary,by_chain",
            "limit": 10,
        }
        if chain is not None:
            params["chain_id"] = chain
        report = world.get(**params)
        expected = world.expected(
            start.replace(minute=0) + (timedelta(hours=1) if start.minute else timedelta()),
            end,
            chain_id=chain,
        )
        requests, nano = expected.get((), (0, 0))
        assert report["summary"]["request_count"] == requests, params
        assert Decimal(str(report["summary"]["credits_consumed"])) == _credits(nano), params
        assert sum(row["request_count"] for row in report["by_chain"]) == requests


def test_a_flush_landing_while_the_report_is_read_shows_in_no_section_or_all(
    api: ApiHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Routers flush every few seconds, so one can commit between the report's statements:
    every section must read the same snapshot (on PostgreSQL and SQLite alike)."""
    customer = api.customer()
    key = api.create_key(customer)
    hour = int(NOW_HOUR.timestamp())

    def flush(requests: int, reference: str) -> None:
        row = (customer.id, key["id"], 1, "eth_call", "first_choice", hour, 0)
        write_usage(api.engine, {row: [requests, requests * 100]}, {}, reference=reference)

    flush(5, "before")
    read_hours = usage_report.hourly_sums  # type: ignore[attr-defined]
    flushed: list[bool] = []

    def hourly_sums_after_a_flush(connection: Any, window: Any) -> Any:
        if not flushed:  # a router's flush commits after the summary was read
            flush(7, "between")
            flushed.append(True)
        return read_hours(connection, window)

    monkeypatch.setattr(usage_report, "hourly_sums", hourly_sums_after_a_flush)
    params = {
        "include": "summary,time_series",
        "granularity": "hour",
        "from": (NOW_HOUR - timedelta(hours=3)).isoformat(),
        "to": (NOW_HOUR + timedelta(hours=1)).isoformat(),
    }
    for expected in (5, 12):  # the next report sees the flush, in every section
        report = api.client.get("/usage", params=params, headers=customer.headers).json()
        assert flushed
        assert report["summary"]["request_count"] == expected
        assert sum(bucket["request_count"] for bucket in report["time_series"]) == expected


def test_every_scenario_by_scenario_can_return_is_documented() -> None:
    """Customers read what a `by_scenario` row means in the API's docs: each has a table row."""
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("management-api.md", "router.md"):
        rows = re.findall(r"^\| `([a-z_]+)` \|", (docs / page).read_text(), re.MULTILINE)
        assert {scenario.value for scenario in Scenario} <= set(rows), page


def test_credits_are_exact_decimal_numbers_in_the_json(api: ApiHarness) -> None:
    customer = api.customer()
    key = api.create_key(customer)
    hour = int(NOW_HOUR.timestamp())
    write_usage(
        api.engine,
        {(customer.id, key["id"], 1, "eth_call", "first_choice", hour, 0): [3, 900]},
        {customer.id: 900},
        reference="exact",
    )
    response = api.client.get("/usage", params={"include": "summary"}, headers=customer.headers)
    assert '"credits_consumed":0.0000009' in response.text
    assert '"credits_per_request":0.0000003' in response.text
