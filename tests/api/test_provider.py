"""Provider routes: only provider-linked tokens, only their own plans; method prices reach the
routers and the public price list."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from chainrouter.domain.chains import Chain
from chainrouter.stores.sql.chains import upsert_chains
from chainrouter.stores.sql.usage import write_usage
from tests.api.conftest import ApiHarness

PROVIDER_ROUTES = [
    ("get", "/provider/plans", None),
    ("get", "/provider/plans/1/methods", None),
    ("post", "/provider/plans/1/methods", [{"method": "eth_call", "cost": "1"}]),
]


def _chain(api: ApiHarness, chain_id: int) -> None:
    with api.engine.begin() as connection:
        upsert_chains(connection, [Chain(chain_id, f"C{chain_id}", f"c{chain_id}", "E", "E", 18)])


@pytest.mark.parametrize(("method", "path", "body"), PROVIDER_ROUTES)
def test_a_token_without_a_provider_is_403_provider_not_resolved(
    api: ApiHarness, method: str, path: str, body: Any
) -> None:
    customer = api.customer()
    response = api.client.request(method, path, json=body, headers=customer.headers)
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "provider_not_resolved",
        "message": "provider not resolved",
    }
    assert api.client.request(method, path, json=body).status_code == 401


def test_plans_are_the_providers_own_and_an_empty_list_when_none(api: ApiHarness) -> None:
    mine = api.provider("mine", plans=("starter", "pro"))
    theirs = api.provider("theirs", plans=("secret-plan",))
    empty = api.provider("empty", plans=())
    plans = api.client.get("/provider/plans", headers=mine.headers).json()
    assert [p["name"] for p in plans] == ["starter", "pro"]
    assert {p["provider"] for p in plans} == {"mine"}
    assert "secret-plan" not in api.client.get("/provider/plans", headers=mine.headers).text
    assert api.client.get("/provider/plans", headers=empty.headers).json() == []
    assert [
        p["name"] for p in api.client.get("/provider/plans", headers=theirs.headers).json()
    ] == ["secret-plan"]


def test_method_prices_of_your_plan(api: ApiHarness) -> None:
    _chain(api, 1)
    mine = api.provider("mine")
    [plan_id] = mine.plan_ids
    url = f"/provider/plans/{plan_id}/methods"
    assert api.client.get(url, headers=mine.headers).json() == []
    rows = api.client.post(
        url,
        json=[
            {
                "method": "eth_call",
                "cost": "0.0000003",
                "rate_limit": 100,
                "rate_limit_interval_sec": 1,
            },
            {
                "method": "eth_call",
                "cost": 0.0000001,
                "chain_id": "1",
                "node_target_type": "archive",
            },
        ],
        headers=mine.headers,
    )
    assert rows.status_code == 200, rows.text
    assert '"cost":0.0000001' in rows.text
    assert len(api.client.get(url, headers=mine.headers).json()) == 2


def test_another_providers_plan_is_404_and_unchanged(api: ApiHarness) -> None:
    mine, theirs = api.provider("mine"), api.provider("theirs")
    [their_plan] = theirs.plan_ids
    for method, body in (("get", None), ("post", [{"method": "eth_call", "cost": "0"}])):
        response = api.client.request(
            method, f"/provider/plans/{their_plan}/methods", json=body, headers=mine.headers
        )
        assert response.status_code == 404
        assert response.json()["error"]["message"] == f"no plan {their_plan}"
    assert (
        api.client.get(f"/provider/plans/{their_plan}/methods", headers=theirs.headers).json() == []
    )
    missing = api.client.get("/provider/plans/999999/methods", headers=mine.headers)
    assert missing.status_code == 404


def test_a_price_of_100_credits_a_call_is_the_most_a_provider_may_set(api: ApiHarness) -> None:
    mine = api.provider("mine")
    response = api.client.post(
        f"/provider/plans/{mine.plan_ids[0]}/methods",
        json=[{"method": "debug_traceBlock", "cost": "100"}],
        headers=mine.headers,
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(("count", "status"), [(1, 200), (500, 200), (0, 422), (501, 422)])
def test_one_to_500_rows_per_call(api: ApiHarness, count: int, status: int) -> None:
    mine = api.provider("mine")
    rows = [{"method": f"m_{i}", "cost": "0.000000001"} for i in range(count)]
    response = api.client.post(
        f"/provider/plans/{mine.plan_ids[0]}/methods", json=rows, headers=mine.headers
    )
    assert response.status_code == status
    if status == 200:
        assert len(response.json()) == count


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"method": "", "cost": "1"}, "method"),
        ({"method": "eth_call"}, "cost"),
        ({"method": "eth_call", "cost": "-0.1"}, "cost"),
        ({"method": "eth_call", "cost": "0.0000000001"}, "cost"),
        ({"method": "eth_call", "cost": "100.000000001"}, "cost"),  # past any call's price
        ({"method": "eth_call", "cost": "9200000000"}, "cost"),
        ({"method": "eth_call", "cost": "1", "vm": "solana"}, "vm"),
        ({"method": "eth_call", "cost": "1", "node_target_type": "Full Node"}, "node_target_type"),
        ({"method": "eth_call", "cost": "1", "rate_limit": -1}, "rate_limit"),
        (
            {"method": "eth_call", "cost": "1", "rate_limit_interval_sec": 0},
            "rate_limit_interval_sec",
        ),
        ({"method": "eth_call", "cost": "1", "chain_id": "x"}, "chain_id"),
    ],
)
def test_each_row_is_validated(api: ApiHarness, row: dict[str, Any], field: str) -> None:
    mine = api.provider("mine")
    response = api.client.post(
        f"/provider/plans/{mine.plan_ids[0]}/methods",
        json=[{"method": "ok_row", "cost": "1"}, row],
        headers=mine.headers,
    )
    assert response.status_code == 422
    assert f"[1].{field}" in [d["field"] for d in response.json()["error"]["details"]]


def test_a_row_for_an_unknown_chain_is_422(api: ApiHarness) -> None:
    mine = api.provider("mine")
    response = api.client.post(
        f"/provider/plans/{mine.plan_ids[0]}/methods",
        json=[{"method": "eth_call", "cost": "1", "chain_id": 777}],
        headers=mine.headers,
    )
    assert response.status_code == 422
    assert "unknown chain_id: 777" in response.json()["error"]["message"]


def test_each_plan_shows_its_current_billing_cycle_and_use(api: ApiHarness) -> None:
    mine = api.provider("metered")
    [plan_id] = mine.plan_ids
    patched = api.client.patch(
        f"/admin/plans/{plan_id}",
        json={
            "quota": "10",
            "quota_unit": "requests",
            "overage_limit": "0",
            "billing_fixed_day": 1,
        },
        headers=api.admin,
    )
    assert patched.status_code == 200, patched.text
    customer = api.customer()
    key = api.create_key(customer)
    hour = int(datetime.now(UTC).timestamp()) // 3600 * 3600
    write_usage(
        api.engine,
        {(customer.id, key["id"], 1, "eth_call", "first_choice", hour, plan_id): [10, 2_500]},
        {customer.id: 2_500},
        reference="cycle-view",
    )
    [plan] = api.client.get("/provider/plans", headers=mine.headers).json()
    cycle = plan["cycle"]
    now = datetime.now(UTC)
    month = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert datetime.fromisoformat(cycle["start"]) == month
    assert (cycle["requests"], cycle["standing"]) == (10, "exhausted")
    assert '"credits":0.0000025' in api.client.get("/provider/plans", headers=mine.headers).text
    [seen_by_admin] = api.client.get(
        f"/admin/providers/{mine.provider_id}/plans", headers=api.admin
    ).json()
    assert seen_by_admin["cycle"] == cycle


def _price(api: ApiHarness, who: Any, plan: int, cost: str, *, admin: bool = False) -> Any:
    url = f"/admin/plans/{plan}/methods" if admin else f"/provider/plans/{plan}/methods"
    headers = api.admin if admin else who.headers
    answer = api.client.post(url, json=[{"method": "eth_call", "cost": cost}], headers=headers)
    assert answer.status_code == 200, answer.text
    [row] = [r for r in answer.json() if r["method"] == "eth_call"]
    return row


def test_a_provider_making_a_method_dearer_gives_a_days_notice_and_cheaper_applies_at_once(
    api: ApiHarness,
) -> None:
    """The old price holds for `price_notice_s` (24 h) after a provider raises it, and its rows
    say when the new one applies; a cheaper price, a new row, or an administrator's price apply
    at once (design notes, "Bounds")."""
    mine = api.provider("mine")
    plan = mine.plan_ids[0]
    first = _price(api, mine, plan, "0.000001")
    assert (first["cost"], first["next_cost"]) == (0.000001, None)  # a new row: at once
    before = datetime.now(UTC)
    raised = _price(api, mine, plan, "0.000005")
    assert raised["cost"] == 0.000001  # the old price holds
    assert raised["next_cost"] == 0.000005
    applies = datetime.fromisoformat(raised["next_cost_from"].replace("Z", "+00:00"))
    assert 24 * 3600 - 5 <= (applies - before).total_seconds() <= 24 * 3600 + 60
    cheaper = _price(api, mine, plan, "0.0000005")
    assert (cheaper["cost"], cheaper["next_cost"]) == (0.0000005, None)  # at once, none pending
    _price(api, mine, plan, "0.000002")
    by_admin = _price(api, mine, plan, "0.000003", admin=True)
    assert (by_admin["cost"], by_admin["next_cost"]) == (0.000003, None)
