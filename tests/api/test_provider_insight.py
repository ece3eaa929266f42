"""What a provider and a customer read of how nodes are doing and what they earned: each node's
head, how far it is behind its chain's head and its latency as routers last reported them
(`GET /provider/nodes`); each chain's spread of node latencies (`GET /latency`); and what a
provider's plans earned, per plan and over time (`GET /provider/earnings`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import select

from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.domain.routing import HealthReport
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.node_health import write_node_health
from chainrouter.stores.sql.usage import write_usage
from tests.api.conftest import ApiHarness

NOW_HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)


def _chain(chain_id: int, name: str) -> dict[str, Any]:
    return {
        "chain_id": chain_id,
        "name": name,
        "short_name": name.lower(),
        "native_currency": {"name": "Ether", "symbol": "ETH"},
    }


def _world(api: ApiHarness) -> tuple[dict[str, str], dict[str, int], dict[str, int]]:
    """Providers `mine` (plans fast and slow) and `theirs`, nodes on chains 1 and 10."""
    token = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    methods = [{"method": "eth_call", "cost": "0.000001"}]

    def plan(name: str, urls: list[tuple[str, int]]) -> dict[str, Any]:
        nodes = [{"url": url, "chain_id": chain} for url, chain in urls]
        return {"name": name, "methods": methods, "nodes": nodes}

    apply_config(
        api.engine,
        validate_document(
            {
                "chains": [_chain(1, "One"), _chain(10, "Ten")],
                "providers": [
                    {
                        "slug": "mine",
                        "name": "Mine",
                        "plans": [
                            plan(
                                "fast",
                                [("https://a.mine.example/", 1), ("https://b.mine.example/", 1)],
                            ),
                            plan("slow", [("https://c.mine.example/", 10)]),
                        ],
                    },
                    {
                        "slug": "theirs",
                        "name": "Theirs",
                        "plans": [plan("other", [("https://d.theirs.example/", 1)])],
                    },
                ],
                "customers": [
                    {
                        "email": "ops@mine.example",
                        "name": "Ops",
                        "provider": "mine",
                        "management_tokens": [{"label": "ops", "secret": token}],
                    }
                ],
            }
        ),
    )
    with api.engine.connect() as connection:
        nodes = {
            row.url.split("/")[2].split(".")[0]: row.id
            for row in connection.execute(select(t.nodes))
        }
        plans = {row.name: row.id for row in connection.execute(select(t.plans))}
    return {"X-Api-Key": token}, nodes, plans


def _report(
    node_id: int,
    head: int | None,
    latency: float | None,
    *,
    in_sync: bool = True,
    failures: int = 0,
) -> HealthReport:
    return HealthReport(node_id, in_sync, head, latency, failures, NOW_HOUR)


def test_a_provider_sees_each_nodes_head_lag_and_latency_as_routers_report_them(
    api: ApiHarness,
) -> None:
    headers, nodes, _ = _world(api)
    listed = api.client.get("/provider/nodes", headers=headers).json()
    assert {n["status"]["status"] for n in listed} == {"pending check"}
    assert all(n["status"]["head_lag"] is None for n in listed)  # nothing reported yet
    write_node_health(
        api.engine,
        [
            _report(nodes["a"], 1_000, 12.5),
            _report(nodes["b"], 990, 40.25, in_sync=False),
            _report(nodes["c"], 77, 8.0, failures=2),
            _report(nodes["d"], 1_003, 5.0),  # another provider's node sets the chain's head
        ],
    )
    listed = api.client.get("/provider/nodes", headers=headers).json()
    seen = {n["node"]["id"]: n["status"] for n in listed}
    assert set(seen) == {nodes["a"], nodes["b"], nodes["c"]}  # never another provider's node
    a, b, c = seen[nodes["a"]], seen[nodes["b"]], seen[nodes["c"]]
    assert (a["status"], a["head_block"], a["chain_head"], a["head_lag"]) == (
        "healthy",
        1_000,
        1_003,
        3,
    )
    assert Decimal(str(a["latency_ms"])) == Decimal("12.5")
    assert a["consecutive_failures"] == 0
    assert datetime.fromisoformat(a["checked_at"]) == NOW_HOUR
    assert (b["status"], b["head_lag"]) == ("out of sync", 13)
    assert (c["status"], c["head_block"], c["chain_head"], c["head_lag"]) == ("failing", 77, 77, 0)
    one = api.client.get(f"/provider/nodes/{nodes['a']}/status", headers=headers).json()
    assert one["head_lag"] == 3


def test_latency_by_chain_spreads_over_its_enabled_in_sync_measured_nodes(
    api: ApiHarness,
) -> None:
    headers, nodes, _ = _world(api)
    customer = api.customer()
    assert api.client.get("/latency", headers=customer.headers).json() == []
    write_node_health(
        api.engine,
        [
            _report(nodes["a"], 1_000, 12.5),
            _report(nodes["b"], 1_000, 40.25),
            _report(nodes["d"], 1_000, 5.0),
            _report(nodes["c"], 50, 99.0, in_sync=False),  # out of sync: left out
        ],
    )
    rows = api.client.get("/latency", headers=customer.headers).json()
    assert [(r["chain_id"], r["name"], r["nodes"]) for r in rows] == [("1", "One", 3)]
    [one] = rows
    assert [Decimal(str(one[k])) for k in ("fastest_ms", "median_ms", "slowest_ms")] == [
        Decimal("5"),
        Decimal("12.5"),
        Decimal("40.25"),
    ]
    disabled = api.client.post(
        "/provider/nodes/status",
        json={"node_id": nodes["b"], "status": "disabled by provider"},
        headers=headers,
    )
    assert disabled.status_code == 200
    [one] = api.client.get("/latency", params={"chain_id": 1}, headers=customer.headers).json()
    assert (one["nodes"], Decimal(str(one["median_ms"]))) == (2, Decimal("8.75"))
    assert (
        api.client.get("/latency", params={"chain_id": 10}, headers=customer.headers).json() == []
    )
    assert api.client.get("/latency").status_code == 401


def test_earnings_are_what_customers_paid_for_the_calls_each_plan_served(api: ApiHarness) -> None:
    headers, _, plans = _world(api)
    customer = api.customer()
    key = api.create_key(customer)["id"]
    hours = [NOW_HOUR - timedelta(hours=h) for h in (0, 1, 30, 24 * 40)]
    rows: dict[tuple[int, int, int, str, str, int, int], list[int]] = {}
    for hour, plan, n, nano in [
        (hours[0], "fast", 3, 3_000),
        (hours[1], "fast", 2, 2_000),
        (hours[1], "slow", 5, 50_000),
        (hours[2], "slow", 1, 10_000),
        (hours[3], "fast", 9, 9_000),  # 40 days ago: outside the default 30
        (hours[0], "other", 7, 7_000),  # another provider's plan
    ]:
        rows[
            (customer.id, key, 1, "eth_call", "first_choice", int(hour.timestamp()), plans[plan])
        ] = [n, nano]
    write_usage(api.engine, rows, {customer.id: 0}, reference="earnings")
    earned = api.client.get("/provider/earnings", headers=headers).json()
    assert (earned["total"]["request_count"], Decimal(str(earned["total"]["credits"]))) == (
        11,
        Decimal("0.000065"),
    )
    assert [
        (p["name"], p["request_count"], Decimal(str(p["credits"]))) for p in earned["by_plan"]
    ] == [
        ("slow", 6, Decimal("0.00006")),
        ("fast", 5, Decimal("0.000005")),
    ]
    series = {(r["bucket"], r["name"]): r["request_count"] for r in earned["time_series"]}
    assert sum(series.values()) == 11
    assert list(series) == sorted(series)  # oldest first
    hourly = api.client.get(
        "/provider/earnings",
        params={"from": (NOW_HOUR - timedelta(hours=2)).isoformat(), "granularity": "hour"},
        headers=headers,
    ).json()
    assert [(r["bucket"], r["name"], r["request_count"]) for r in hourly["time_series"]] == [
        (hours[1].strftime("%Y-%m-%dT%H:%M:%SZ"), "fast", 2),
        (hours[1].strftime("%Y-%m-%dT%H:%M:%SZ"), "slow", 5),
        (hours[0].strftime("%Y-%m-%dT%H:%M:%SZ"), "fast", 3),
    ]
    too_long = api.client.get(
        "/provider/earnings",
        params={"from": (NOW_HOUR - timedelta(days=91)).isoformat()},
        headers=headers,
    )
    assert too_long.status_code == 422
    not_provider = api.client.get("/provider/earnings", headers=customer.headers)
    assert (not_provider.status_code, not_provider.json()["error"]["message"]) == (
        403,
        "provider not resolved",
    )
