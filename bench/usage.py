"""Usage report benchmark: a customer with a year of hourly aggregates over 50 keys and 100 chains,
every report the API offers over a 90-day window, on PostgreSQL, through the HTTP API in process.

Data: each key uses 2 chains (together all 100) and 4 methods every hour, with a failover row for
one call in ten: 440 hourly rows an hour, 3.85 million rows for the year, written with COPY and
rolled up as the router's flush would. Baseline, in the same run: the 90-day summary computed from
the hourly rows alone, which is what a report costs without the roll-ups.
Target: every report under 100 ms. Results: bench/results/usage.json and bench/results/usage.md.
"""

from __future__ import annotations

import json
import platform
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select, text

from bench.run import RESULTS, database
from chainrouter.api.app import build_api_app
from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import Role
from chainrouter.management import admin
from chainrouter.settings import Settings
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t

KEYS = 50
CHAINS = 100
METHODS = ("eth_call", "eth_getBalance", "eth_blockNumber", "eth_getLogs")
HOURS = 365 * 24
RUNS = 15
TARGET_MS = 100.0
END = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)  # data up to this hour
EVERY_SECTION = (
    "summary,balance,by_chain,by_api_key,by_api_key_chain,top_methods,time_series,by_scenario"
)


def _populate(engine: Engine) -> tuple[int, str, list[int]]:
    customer = admin.create_customer(engine, name="Big", email="big@example.com")
    token = admin.issue_token(engine, customer.id, label="bench", role=Role.CUSTOMER)
    key_ids = []
    with engine.begin() as connection:
        for index in range(KEYS):
            secret = generate_secret(SecretKind.API_KEY)
            key_ids.append(
                connection.execute(
                    t.api_keys.insert()
                    .values(
                        customer_id=customer.id,
                        name=f"key-{index}",
                        key_hash=hash_secret(secret),
                        key_hint=secret_hint(secret),
                        allowed_domains=["*"],
                        routing_strategy="economy",
                        created_at=END,
                        updated_at=END,
                    )
                    .returning(t.api_keys.c.id)
                ).scalar_one()
            )
    rng = random.Random(1)
    start = END - timedelta(hours=HOURS)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        copy_sql = (
            "COPY usage_aggregates (customer_id, api_key_id, chain_id, method, scenario, "
            "bucket_start, request_count, credits_nano) FROM STDIN"
        )
        with cursor.copy(copy_sql) as copy:
            for hour in range(HOURS):
                bucket = (start + timedelta(hours=hour)).replace(tzinfo=None)
                for k, key_id in enumerate(key_ids):
                    for chain in (1 + 2 * k, 2 + 2 * k):
                        for method in METHODS:
                            calls = rng.randrange(1, 200)
                            copy.write_row(
                                (
                                    customer.id,
                                    key_id,
                                    chain,
                                    method,
                                    "first_choice",
                                    bucket,
                                    calls,
                                    calls * 300,
                                )
                            )
                            if rng.random() < 0.1:
                                copy.write_row(
                                    (customer.id, key_id, chain, method, "failover", bucket, 1, 300)
                                )
        raw.commit()
    finally:
        raw.close()
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO usage_daily (customer_id, day, api_key_id, chain_id, method, scenario,"
                " request_count, credits_nano) SELECT customer_id, date_trunc('day', bucket_start),"
                " api_key_id, chain_id, method, scenario, sum(request_count), sum(credits_nano)"
                " FROM usage_aggregates GROUP BY 1, 2, 3, 4, 5, 6"
            )
        )
        connection.execute(
            text(
                "INSERT INTO usage_hourly_totals (customer_id, bucket_start, request_count,"
                " credits_nano) SELECT customer_id, bucket_start, sum(request_count),"
                " sum(credits_nano) FROM usage_aggregates GROUP BY 1, 2"
            )
        )
    # The steady state autovacuum keeps: statistics and a visibility map (index-only scans).
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE"))
    return customer.id, token.secret, key_ids


def _timed(call: Any) -> list[float]:
    call()  # warm
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    with database("postgresql") as engine:
        migrate.upgrade(engine)
        began = time.perf_counter()
        customer_id, token, key_ids = _populate(engine)
        load_s = time.perf_counter() - began
        with engine.connect() as connection:
            hourly_rows = connection.execute(
                select(func.count()).select_from(t.usage_aggregates)
            ).scalar_one()
            daily_rows = connection.execute(
                select(func.count()).select_from(t.usage_daily)
            ).scalar_one()
        client = TestClient(build_api_app(engine, Settings(database_url=str(engine.url))))
        headers = {"X-Api-Key": token}
        window = {
            "from": (END - timedelta(days=90, hours=5)).isoformat(),
            "to": (END - timedelta(hours=5)).isoformat(),
        }
        every = EVERY_SECTION
        reports: dict[str, dict[str, Any]] = {
            "default (summary, balance; last 30 days)": {},
            **{f"include={s}": {**window, "include": s} for s in every.split(",")},
            "include=all eight sections": {**window, "include": every, "limit": 100},
            **{
                f"group_by={g}": {**window, "group_by": g, "limit": 100}
                for g in ("chain", "api_key", "api_key,chain", "method", "day")
            },
            "time_series hourly, 90 days": {
                **window,
                "include": "time_series",
                "granularity": "hour",
            },
            "time_series hourly, 90 days, one key": {
                **window,
                "include": "time_series",
                "granularity": "hour",
                "api_key_id": key_ids[7],
            },
            "all sections, one chain": {**window, "include": every, "chain_id": 42},
            "all sections, one key": {**window, "include": every, "api_key_id": key_ids[3]},
        }
        rows: list[dict[str, Any]] = []
        for name, params in reports.items():

            def call(params: dict[str, Any] = params) -> None:
                response = client.get("/usage", params=params, headers=headers)
                assert response.status_code == 200, response.text

            times = _timed(call)
            rows.append(
                {
                    "report": name,
                    "p50_ms": statistics.median(times),
                    "max_ms": max(times),
                }
            )

        def baseline() -> None:
            with engine.connect() as connection:
                connection.execute(
                    select(
                        func.sum(t.usage_aggregates.c.request_count),
                        func.sum(t.usage_aggregates.c.credits_nano),
                    ).where(
                        t.usage_aggregates.c.customer_id == customer_id,
                        t.usage_aggregates.c.bucket_start >= datetime.fromisoformat(window["from"]),
                        t.usage_aggregates.c.bucket_start < datetime.fromisoformat(window["to"]),
                    )
                ).one()

        baseline_ms = statistics.median(_timed(baseline))
    summary_ms = next(r["p50_ms"] for r in rows if r["report"] == "include=summary")
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} ({platform.machine()}), shared",
        "hourly_rows": hourly_rows,
        "daily_rows": daily_rows,
        "load_s": round(load_s, 1),
        "baseline_summary_from_hourly_rows_ms": baseline_ms,
        "reports": rows,
        "target_ms": TARGET_MS,
        "all_under_target": all(r["max_ms"] < TARGET_MS for r in rows),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "usage.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Usage report benchmark (PostgreSQL)",
        "",
        f"Run {result['when']} on {result['machine']}.",
        f"Data: {hourly_rows:,} hourly rows (a year, {KEYS} keys, {CHAINS} chains, "
        f"{len(METHODS)} methods), {daily_rows:,} daily roll-up rows; loaded in {load_s:.0f} s.",
        f"Window: 90 days. Each report through the HTTP API in process, {RUNS} runs after "
        "a warm-up.",
        "",
        "| report | p50 ms | max ms | vs baseline |",
        "|---|---|---|---|",
        *(
            f"| {r['report']} | {r['p50_ms']:.1f} | {r['max_ms']:.1f} | "
            f"{r['p50_ms'] / baseline_ms:.2f}x |"
            for r in rows
        ),
        "",
        f"Baseline: the 90-day summary summed from the hourly rows alone, {baseline_ms:.1f} ms "
        f"(the summary report through the API with roll-ups: {summary_ms:.1f} ms).",
        f"Target: every report under {TARGET_MS:.0f} ms: "
        + ("met." if result["all_under_target"] else "NOT met."),
        "",
    ]
    (RESULTS / "usage.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
