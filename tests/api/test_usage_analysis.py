"""`GET /usage` beyond the spec's sections, for the dashboard's analysis: spend and calls over
time broken down by chain, method, key and scenario; what each scenario meant to the caller
(served, failed, limited, with the error it got); and the calls that were not served, per
hour, newest first. Checked against the rows a router's flush wrote."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from chainrouter.domain.enums import Scenario
from chainrouter.domain.outcomes import MEANINGS, Outcome
from chainrouter.stores.sql.usage import write_usage
from tests.api.conftest import ApiHarness, Customer

NOW_HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
Row = tuple[int, int, str, str, datetime, int, int]  # key, chain, method, scenario, hour, n, nano


def _write(api: ApiHarness, customer: Customer, rows: list[Row]) -> None:
    aggregated: dict[tuple[int, int, int, str, str, int, int], list[int]] = {}
    for key, chain, method, scenario, hour, n, nano in rows:
        total = aggregated.setdefault(
            (customer.id, key, chain, method, scenario, int(hour.timestamp()), 0), [0, 0]
        )
        total[0] += n
        total[1] += nano
    spend = {customer.id: sum(row[6] for row in rows)}
    write_usage(api.engine, aggregated, spend, reference=f"analysis:{customer.id}:{len(rows)}")


def _get(api: ApiHarness, customer: Customer, **params: Any) -> dict[str, Any]:
    answer = api.client.get("/usage", params=params, headers=customer.headers)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _world(api: ApiHarness) -> tuple[Customer, list[int], list[Row]]:
    customer = api.customer("Analyst")
    keys = [api.create_key(customer, name=f"key-{i}")["id"] for i in range(3)]
    rows: list[Row] = []
    methods = ("eth_call", "eth_getLogs", "eth_blockNumber", "eth_getBalance")
    for i in range(60):
        rows.append(
            (
                keys[i % 3],
                (1, 10, 31337)[i % 3 if i % 5 else 2],
                methods[i % 4],
                ("first_choice", "failover", "all_failed", "rate_limited")[i % 4],
                NOW_HOUR - timedelta(hours=(i * 7) % 70),
                1 + i % 9,
                0 if i % 4 >= 2 else 1_000 * (1 + i % 13),
            )
        )
    _write(api, customer, rows)
    return customer, keys, rows


def _in_window(rows: list[Row], start: datetime, end: datetime) -> list[Row]:
    return [r for r in rows if start <= r[4] < end]


def test_a_broken_down_series_sums_to_the_time_series_in_every_bucket(api: ApiHarness) -> None:
    customer, _, _rows = _world(api)
    start, end = NOW_HOUR - timedelta(hours=47), NOW_HOUR + timedelta(hours=1)
    sections = ("chain", "method", "api_key", "scenario")
    for granularity in ("hour", "day"):
        report = _get(
            api,
            customer,
            **{"from": start.isoformat(), "to": end.isoformat()},
            include="time_series," + ",".join(f"time_series_by_{s}" for s in sections),
            granularity=granularity,
            limit=100,
        )
        totals = {
            r["bucket"]: (r["request_count"], Decimal(str(r["credits_consumed"])))
            for r in report["time_series"]
        }
        for section in sections:
            summed: dict[str, list[Any]] = defaultdict(lambda: [0, Decimal(0)])
            for r in report[f"time_series_by_{section}"]:
                assert r["request_count"] or r["credits_consumed"]  # only buckets with usage
                assert r["other"] is False  # 100 values allowed: nothing folded
                summed[r["bucket"]][0] += r["request_count"]
                summed[r["bucket"]][1] += Decimal(str(r["credits_consumed"]))
            for bucket, (n, c) in totals.items():
                assert tuple(summed.get(bucket, [0, Decimal(0)])) == (n, c), (section, bucket)


def test_a_series_by_chain_matches_the_stored_rows_per_hour(api: ApiHarness) -> None:
    customer, _, rows = _world(api)
    start, end = NOW_HOUR - timedelta(hours=23), NOW_HOUR + timedelta(hours=1)
    report = _get(
        api,
        customer,
        **{"from": start.isoformat(), "to": end.isoformat()},
        include="time_series_by_chain,time_series_by_api_key",
        granularity="hour",
    )
    expected: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for _, chain, _, _, hour, n, nano in _in_window(rows, start, end):
        total = expected[(hour.strftime("%Y-%m-%dT%H:%M:%SZ"), str(chain))]
        total[0] += n
        total[1] += nano
    got = {
        (r["bucket"], r["chain_id"]): [
            r["request_count"],
            int(Decimal(str(r["credits_consumed"])) * 10**9),
        ]
        for r in report["time_series_by_chain"]
    }
    assert got == dict(expected)
    buckets = [r["bucket"] for r in report["time_series_by_chain"]]
    assert buckets == sorted(buckets)
    names = {r["name"] for r in report["time_series_by_api_key"]}
    assert names == {"key-0", "key-1", "key-2"}


def test_values_beyond_the_limit_are_summed_as_other(api: ApiHarness) -> None:
    customer, _, _rows = _world(api)
    report = _get(api, customer, include="time_series,time_series_by_method,top_methods", limit=2)
    largest = {r["method"] for r in report["top_methods"]}
    assert len(largest) == 2
    shown = {r["method"] for r in report["time_series_by_method"] if not r["other"]}
    assert shown <= largest
    others = [r for r in report["time_series_by_method"] if r["other"]]
    assert others
    assert all("method" not in r for r in others)  # left out, as every null in the report
    assert sum(r["request_count"] for r in report["time_series_by_method"]) == sum(
        r["request_count"] for r in report["time_series"]
    )


def test_each_scenario_says_whether_the_call_was_served_failed_or_limited(
    api: ApiHarness,
) -> None:
    customer, _, _ = _world(api)
    report = _get(api, customer, include="by_scenario,time_series_by_scenario")
    meanings = {
        r["scenario"]: (r["outcome"], r["error_codes"], r.get("error"))
        for r in report["by_scenario"]
    }
    assert meanings["first_choice"] == ("served", [], None)
    assert meanings["failover"] == ("served", [], None)
    assert meanings["all_failed"][:2] == ("failed", [-32009])
    assert meanings["rate_limited"][:2] == ("limited", [-32003])
    assert "failed or timed out" in str(meanings["all_failed"][2])
    outcomes = {(r["scenario"], r["outcome"]) for r in report["time_series_by_scenario"]}
    assert ("all_failed", "failed") in outcomes
    assert ("first_choice", "served") in outcomes


def test_every_scenario_has_a_meaning_and_every_unserved_one_an_error() -> None:
    assert set(MEANINGS) == set(Scenario)
    for scenario, meaning in MEANINGS.items():
        served = meaning.outcome is Outcome.SERVED
        assert served == (meaning.error is None) == (not meaning.error_codes), scenario


def test_failed_calls_are_listed_newest_hour_first_with_their_error_and_nothing_served(
    api: ApiHarness,
) -> None:
    customer, keys, rows = _world(api)
    report = _get(api, customer, include="failures", limit=1000)
    failures = report["failures"]
    unserved = [r for r in rows if r[3] in ("all_failed", "rate_limited")]
    assert sum(f["request_count"] for f in failures) == sum(r[5] for r in unserved)
    hours = [f["bucket"] for f in failures]
    assert hours == sorted(hours, reverse=True)
    for failure in failures:
        assert failure["scenario"] in ("all_failed", "rate_limited")
        assert failure["outcome"] == (
            "failed" if failure["scenario"] == "all_failed" else "limited"
        )
        assert failure["error_codes"]
        assert failure["error"]
        assert failure["api_key_id"] in keys
        assert failure["name"].startswith("key-")
        assert set(failure) == {
            "bucket",
            "api_key_id",
            "key_hint",
            "name",
            "chain_id",
            "method",
            "scenario",
            "outcome",
            "error_codes",
            "error",
            "request_count",
            "credits_consumed",
        }  # no parameters of the calls: usage never stores them
    few = _get(api, customer, include="failures", limit=3)["failures"]
    assert few == failures[:3]
    one_key = _get(api, customer, include="failures", api_key_id=keys[1], limit=1000)["failures"]
    assert one_key
    assert {f["api_key_id"] for f in one_key} == {keys[1]}
