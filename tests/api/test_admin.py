"""Administrator routes: customers, credits (exact, idempotent, reaching routers), providers and
their customers, plans and method prices (1 to 500 rows)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from chainrouter.operator_config.model import MAX_ROW_ID
from chainrouter.stores.sql.usage import write_usage
from tests.api.conftest import ApiHarness


def _chain(api: ApiHarness, chain_id: int) -> None:
    from chainrouter.domain.chains import Chain
    from chainrouter.stores.sql.chains import upsert_chains

    with api.engine.begin() as connection:
        upsert_chains(
            connection, [Chain(chain_id, f"Chain {chain_id}", f"c{chain_id}", "Ether", "ETH", 18)]
        )


def test_an_email_longer_than_its_column_once_lower_cased_is_refused(api: ApiHarness) -> None:
    """ "\u0130" is one character, two in lower case: 305 as sent, 605 as stored (the column
    holds 320). A 422, not a failure of the database (PostgreSQL refuses, SQLite does not)."""
    long = "\u0130" * 300 + "@a.bc"
    made = api.client.post(
        "/admin/customers", json={"name": "Long", "email": long}, headers=api.admin
    )
    assert made.status_code == 422


def test_control_characters_in_admin_bodies_are_422_naming_the_field(api: ApiHarness) -> None:
    """PostgreSQL text cannot hold NUL (SQLite stores it): these were 500s there. Every string
    refuses control characters; a description or note may hold tabs and line breaks."""
    customer = api.customer()
    provider = api.client.post(
        "/admin/providers", json={"slug": "p", "name": "P"}, headers=api.admin
    ).json()["id"]
    plan = api.client.post(
        f"/admin/providers/{provider}/plans", json={"name": "basic"}, headers=api.admin
    ).json()["id"]
    cases: list[tuple[str, str, Any, str]] = [
        ("post", "/admin/customers", {"name": "a\u0000b", "email": "x@y.co"}, "name"),
        ("post", "/admin/customers", {"name": "A", "email": "x\u0000@y.co"}, "email"),
        ("post", "/admin/providers", {"slug": "q", "name": "Q\u001b"}, "name"),
        ("post", "/admin/providers", {"slug": "q\n", "name": "Q"}, "slug"),
        ("post", f"/admin/providers/{provider}/plans", {"name": "n\u0000"}, "name"),
        (
            "post",
            f"/admin/providers/{provider}/plans",
            {"name": "n", "description": "a\u0000"},
            "description",
        ),
        ("patch", f"/admin/plans/{plan}", {"description": "\u0007"}, "description"),
        (
            "post",
            f"/admin/plans/{plan}/methods",
            [{"method": "eth_call\n", "cost": 1}],
            "[0].method",
        ),
        (
            "post",
            f"/admin/customers/{customer.id}/credits",
            {"kind": "grant", "amount": "1", "note": "a\u0000"},
            "note",
        ),
        (
            "post",
            f"/admin/customers/{customer.id}/credits",
            {"kind": "grant", "amount": "1", "reference": "r\u0000"},
            "reference",
        ),
        ("post", f"/admin/customers/{customer.id}/tokens", {"label": "a\u0000"}, "label"),
        (
            "post",
            "/admin/chain-requests/1/approve",
            {"native_currency_symbol": "E\u0000"},
            "native_currency_symbol",
        ),
        ("post", "/admin/chain-requests/1/reject", {"note": "\u0000"}, "note"),
        ("post", "/admin/node-requests/1/approve", {"plan_id": plan, "note": "\u0000"}, "note"),
    ]
    for method, path, body, field in cases:
        response = api.client.request(method, path, json=body, headers=api.admin)
        assert response.status_code == 422, (path, body, response.text)
        error = response.json()["error"]
        assert error["code"] == "invalid_input"
        assert [d["field"] for d in error["details"]] == [field], (path, body)
        assert "control characters" in error["message"] or field in ("slug", "[0].method")

    layout = "line one\nline two,\ttabbed\r\n"
    made = api.client.post(
        f"/admin/providers/{provider}/plans",
        json={"name": "laid out", "description": layout},
        headers=api.admin,
    )
    assert made.status_code == 201, made.text
    assert made.json()["description"] == layout


def test_customers_are_created_listed_and_unique_by_email(api: ApiHarness) -> None:
    made = api.client.post(
        "/admin/customers", json={"name": "Acme", "email": "Billing@Acme.io"}, headers=api.admin
    )
    assert made.status_code == 201
    customer = made.json()
    assert customer["email"] == "billing@acme.io"
    assert customer["balance"] == 0
    assert customer["provider_id"] is None
    again = api.client.post(
        "/admin/customers", json={"name": "Acme 2", "email": "billing@acme.io"}, headers=api.admin
    )
    assert again.status_code == 409
    assert (
        api.client.get(f"/admin/customers/{customer['id']}", headers=api.admin).json() == customer
    )
    assert api.client.get("/admin/customers/999999", headers=api.admin).status_code == 404
    bad = api.client.post("/admin/customers", json={"name": "", "email": "nope"}, headers=api.admin)
    assert bad.status_code == 422
    assert {d["field"] for d in bad.json()["error"]["details"]} == {"name", "email"}


def test_purchases_and_grants_apply_at_once_and_exactly(api: ApiHarness) -> None:
    customer = api.customer()
    url = f"/admin/customers/{customer.id}/credits"
    first = api.client.post(url, json={"kind": "purchase", "amount": 0.1}, headers=api.admin)
    assert first.status_code == 201
    assert '"amount":0.1' in first.text
    second = api.client.post(
        url, json={"kind": "grant", "amount": "0.2", "note": "welcome"}, headers=api.admin
    )
    assert '"balance_after":0.3' in second.text
    balance = api.client.get("/usage", params={"include": "balance"}, headers=customer.headers)
    assert '"credits":0.3' in balance.text
    ledger = api.client.get(url, headers=api.admin).json()
    assert [(line["kind"], Decimal(str(line["amount"]))) for line in ledger] == [
        ("grant", Decimal("0.2")),
        ("purchase", Decimal("0.1")),
    ]


def test_a_repeated_reference_records_the_credit_once(api: ApiHarness) -> None:
    customer = api.customer()
    url = f"/admin/customers/{customer.id}/credits"
    body = {"kind": "purchase", "amount": "25", "reference": "stripe:pi_123"}
    first = api.client.post(url, json=body, headers=api.admin)
    repeat = api.client.post(url, json=body, headers=api.admin)
    assert (first.status_code, repeat.status_code) == (201, 200)
    assert repeat.json() == first.json()
    different = api.client.post(url, json={**body, "amount": "26"}, headers=api.admin)
    assert different.status_code == 409
    assert len(api.client.get(url, headers=api.admin).json()) == 1


@pytest.mark.parametrize(
    "body",
    [
        {"kind": "purchase", "amount": "0"},
        {"kind": "purchase", "amount": "-5"},
        {"kind": "purchase", "amount": "0.0000000001"},
        {"kind": "usage", "amount": "5"},
        {"kind": "purchase"},
        {"kind": "purchase", "amount": "ten"},
        {"kind": "purchase", "amount": True},
        {"kind": "purchase", "amount": "1e30"},
    ],
)
def test_invalid_credits_are_422(api: ApiHarness, body: dict[str, Any]) -> None:
    customer = api.customer()
    response = api.client.post(
        f"/admin/customers/{customer.id}/credits", json=body, headers=api.admin
    )
    assert response.status_code == 422, response.text


def test_credits_that_would_overflow_the_balance_are_422_and_change_nothing(
    api: ApiHarness,
) -> None:
    customer = api.customer()
    url = f"/admin/customers/{customer.id}/credits"
    first = api.client.post(url, json={"kind": "grant", "amount": "5000000000"}, headers=api.admin)
    assert first.status_code == 201
    second = api.client.post(url, json={"kind": "grant", "amount": "5000000000"}, headers=api.admin)
    assert second.status_code == 422, second.text
    error = second.json()["error"]
    assert error["code"] == "invalid_input"
    assert "beyond the largest one held" in error["message"]
    assert len(api.client.get(url, headers=api.admin).json()) == 1
    balance = api.client.get("/usage", params={"include": "balance"}, headers=customer.headers)
    assert '"credits":5000000000' in balance.text


def test_ledger_pages_by_before_id_neither_repeat_nor_skip_while_flushes_add_entries(
    api: ApiHarness,
) -> None:
    customer = api.customer()
    key = api.create_key(customer)
    url = f"/admin/customers/{customer.id}/credits"
    for i in range(4):
        body = {"kind": "grant", "amount": "1", "reference": f"g{i}"}
        assert api.client.post(url, json=body, headers=api.admin).status_code == 201
    first = api.client.get(url, params={"limit": 2}, headers=api.admin)
    # A router's usage flush adds the newest entry between the two pages.
    hour = int(datetime.now(UTC).replace(minute=0, second=0, microsecond=0).timestamp())
    row = (customer.id, key["id"], 1, "eth_call", "first_choice", hour, 0)
    write_usage(api.engine, {row: [1, 5]}, {customer.id: 5}, reference="usage:r:1")
    cursor = first.headers["X-Next-Before-Id"]
    second = api.client.get(url, params={"limit": 2, "before_id": cursor}, headers=api.admin)
    assert second.status_code == 200, second.text
    pages = [[line["reference"] for line in page.json()] for page in (first, second)]
    assert pages == [["g3", "g2"], ["g1", "g0"]]
    assert cursor == str(first.json()[-1]["id"])
    assert "X-Next-Before-Id" not in second.headers  # nothing older: no empty page to ask for
    newest = api.client.get(url, params={"limit": 1, "offset": 0}, headers=api.admin).json()
    assert [line["kind"] for line in newest] == ["usage"]  # offset still pages from the newest
    for bad in ("0", "-1", str(MAX_ROW_ID + 1), "x"):
        refused = api.client.get(url, params={"before_id": bad}, headers=api.admin)
        assert refused.status_code == 422, bad
    listed = api.client.get("/openapi.json").json()["paths"][
        "/admin/customers/{customer_id}/credits"
    ]
    [documented] = [p for p in listed["get"]["parameters"] if p["name"] == "before_id"]
    bounds = documented["schema"]["anyOf"][0]  # the integer; the other is null
    assert (bounds["minimum"], bounds["maximum"]) == (1, MAX_ROW_ID)
    assert "X-Next-Before-Id" in listed["get"]["responses"]["200"]["headers"]


def test_credits_for_an_unknown_customer_are_404(api: ApiHarness) -> None:
    response = api.client.post(
        "/admin/customers/424242/credits", json={"kind": "grant", "amount": "1"}, headers=api.admin
    )
    assert response.status_code == 404


@pytest.mark.anyio
async def test_a_purchase_reaches_the_routers_credit_check(api: ApiHarness) -> None:
    customer = api.customer()
    async with api.router() as router:
        assert router.credits.available(customer.id) == 0
        api.client.post(
            f"/admin/customers/{customer.id}/credits",
            json={"kind": "purchase", "amount": "12.5"},
            headers=api.admin,
        )
        assert await router.refresh()
        assert router.credits.available(customer.id) == 12_500_000_000


def test_providers_plans_and_customer_links(api: ApiHarness) -> None:
    provider = api.client.post(
        "/admin/providers", json={"slug": "nodeco", "name": "NodeCo"}, headers=api.admin
    )
    assert provider.status_code == 201
    provider_id = provider.json()["id"]
    assert (
        api.client.post(
            "/admin/providers", json={"slug": "nodeco", "name": "Again"}, headers=api.admin
        ).status_code
        == 409
    )
    assert (
        api.client.post(
            "/admin/providers", json={"slug": "Node Co", "name": "x"}, headers=api.admin
        ).status_code
        == 422
    )
    plan = api.client.post(
        f"/admin/providers/{provider_id}/plans",
        json={
            "name": "pro",
            "price": "49.99",
            "quota": "1000000",
            "quota_unit": "requests",
            "rate_limit_req": 100,
            "rate_limit_req_interval_sec": 1,
            "rate_limit_cr": 5,
            "rate_limit_cr_interval_sec": 60,
            "billing_anchored_start_date": "2026-01-01T00:00:00Z",
        },
        headers=api.admin,
    )
    assert plan.status_code == 201, plan.text
    body = plan.json()
    assert body["provider"] == "nodeco"
    assert body["provider_id"] == provider_id
    assert '"price":49.99' in plan.text
    assert body["rate_limit_cr"] == 5  # an integer, as the spec has it
    patched = api.client.patch(
        f"/admin/plans/{body['id']}", json={"description": "for pros"}, headers=api.admin
    )
    assert patched.json()["description"] == "for pros"
    assert patched.json()["name"] == "pro"
    listed = api.client.get(f"/admin/providers/{provider_id}/plans", headers=api.admin).json()
    assert [p["name"] for p in listed] == ["pro"]
    duplicate = api.client.post(
        f"/admin/providers/{provider_id}/plans", json={"name": "pro"}, headers=api.admin
    )
    assert duplicate.status_code == 409
    customer = api.customer()
    linked = api.client.put(
        f"/admin/customers/{customer.id}/provider",
        json={"provider_id": provider_id},
        headers=api.admin,
    )
    assert linked.json()["provider_id"] == provider_id
    unlinked = api.client.put(
        f"/admin/customers/{customer.id}/provider", json={"provider_id": None}, headers=api.admin
    )
    assert unlinked.json()["provider_id"] is None
    missing = api.client.put(
        f"/admin/customers/{customer.id}/provider", json={"provider_id": 9999}, headers=api.admin
    )
    assert missing.status_code == 404


def _plan(api: ApiHarness) -> int:
    provider = api.client.post(
        "/admin/providers", json={"slug": "prices", "name": "Prices"}, headers=api.admin
    ).json()
    plan = api.client.post(
        f"/admin/providers/{provider['id']}/plans", json={"name": "p"}, headers=api.admin
    ).json()
    plan_id: int = plan["id"]
    return plan_id


def test_method_prices_are_created_and_repriced_by_identity(api: ApiHarness) -> None:
    _chain(api, 1)
    plan_id = _plan(api)
    url = f"/admin/plans/{plan_id}/methods"
    rows = api.client.post(
        url,
        json=[
            {"method": "eth_call", "cost": "0.0000003"},
            {"method": "eth_call", "cost": "0.0000001", "chain_id": "0x1"},
        ],
        headers=api.admin,
    )
    assert rows.status_code == 200, rows.text
    assert {(r["chain_id"], Decimal(str(r["cost"]))) for r in rows.json()} == {
        (None, Decimal("0.0000003")),
        ("1", Decimal("0.0000001")),
    }
    repriced = api.client.post(
        url, json=[{"method": "eth_call", "cost": "0.0000005"}], headers=api.admin
    ).json()
    assert len(repriced) == 2
    assert {(r["chain_id"], Decimal(str(r["cost"]))) for r in repriced} == {
        (None, Decimal("0.0000005")),
        ("1", Decimal("0.0000001")),
    }
    row_id = next(r["id"] for r in repriced if r["chain_id"] == "1")
    assert api.client.delete(f"{url}/{row_id}", headers=api.admin).status_code == 204
    assert api.client.delete(f"{url}/{row_id}", headers=api.admin).status_code == 404
    assert len(api.client.get(url, headers=api.admin).json()) == 1


def test_one_to_500_method_rows_per_call(api: ApiHarness) -> None:
    plan_id = _plan(api)
    url = f"/admin/plans/{plan_id}/methods"

    def rows(n: int) -> list[dict[str, Any]]:
        return [{"method": f"m_{i}", "cost": "0.000000001"} for i in range(n)]

    assert api.client.post(url, json=rows(1), headers=api.admin).status_code == 200
    full = api.client.post(url, json=rows(500), headers=api.admin)
    assert full.status_code == 200
    assert len(full.json()) == 500
    for count in (0, 501):
        refused = api.client.post(url, json=rows(count), headers=api.admin)
        assert refused.status_code == 422, count


@pytest.mark.parametrize(
    ("row", "status"),
    [
        ({"method": "eth call", "cost": "1"}, 422),
        ({"method": "eth_call", "cost": "-1"}, 422),
        ({"method": "eth_call", "cost": 0.1 + 0.2}, 422),  # 0.30000000000000004: too precise
        ({"method": "eth_call", "cost": "1", "vm": "svm"}, 422),
        ({"method": "eth_call", "cost": "1", "rate_limit_interval_sec": 0}, 422),
        ({"method": "eth_call", "cost": "1", "chain_id": "777777"}, 422),
        ({"method": "eth_call", "cost": "1", "extra": 1}, 422),
    ],
)
def test_invalid_method_rows_are_refused(api: ApiHarness, row: dict[str, Any], status: int) -> None:
    plan_id = _plan(api)
    response = api.client.post(f"/admin/plans/{plan_id}/methods", json=[row], headers=api.admin)
    assert response.status_code == status, response.text
    assert api.client.get(f"/admin/plans/{plan_id}/methods", headers=api.admin).json() == []


def test_the_same_row_twice_in_one_call_is_422(api: ApiHarness) -> None:
    plan_id = _plan(api)
    response = api.client.post(
        f"/admin/plans/{plan_id}/methods",
        json=[{"method": "eth_call", "cost": "1"}, {"method": "eth_call", "cost": "2"}],
        headers=api.admin,
    )
    assert response.status_code == 422
    assert "rows[1]" in response.json()["error"]["message"]


def test_prices_of_an_unknown_plan_are_404(api: ApiHarness) -> None:
    response = api.client.post(
        "/admin/plans/98765/methods", json=[{"method": "eth_call", "cost": "1"}], headers=api.admin
    )
    assert response.status_code == 404


@pytest.mark.parametrize(
    "terms",
    [
        {"quota_unit": "compute units"},  # the router counts requests or credits, nothing else
        {"quota": "-1"},
        {"overage_limit": "-5"},
        {"billing_fixed_day": 32},
        # More digits than SQLite keeps (a double): it stored 123456789.123456791.
        {"quota": "123456789.123456789"},
        {"overage_limit": "1000000000.000000001"},
        {"billing_interval_days": 0},
        # A cycle's end must be a date: past year 9999 every router failed to load its routes.
        {"billing_interval_days": 3_000_000},
        {"billing_interval_days": 3661},
        {"billing_anchored_start_date": "0001-01-01T00:00:00+01:00"},
        {"billing_anchored_start_date": "9999-12-31T23:00:00-05:00"},
        {"billing_anchored_start_date": "1969-12-31T23:59:59+00:00"},
    ],
)
def test_plan_terms_the_router_cannot_count_are_refused(
    api: ApiHarness, terms: dict[str, Any]
) -> None:
    plan_id = _plan(api)
    response = api.client.patch(f"/admin/plans/{plan_id}", json=terms, headers=api.admin)
    assert response.status_code == 422, response.text


def test_a_quota_of_fifteen_significant_digits_is_kept_exactly(api: ApiHarness) -> None:
    plan_id = _plan(api)
    terms = {"quota": "123456.123456789", "overage_limit": "999999999999999"}
    response = api.client.patch(f"/admin/plans/{plan_id}", json=terms, headers=api.admin)
    assert response.status_code == 200, response.text
    provider_id = response.json()["provider_id"]
    [plan] = api.client.get(f"/admin/providers/{provider_id}/plans", headers=api.admin).json()
    assert (Decimal(str(plan["quota"])), Decimal(str(plan["overage_limit"]))) == (
        Decimal("123456.123456789"),
        Decimal("999999999999999"),
    )


def test_the_longest_billing_cycle_from_the_latest_anchor_is_still_shown(api: ApiHarness) -> None:
    plan_id = _plan(api)
    terms = {
        "quota": "5",
        "billing_interval_days": 3660,
        "billing_anchored_start_date": "9000-12-31T00:00:00+00:00",
    }
    response = api.client.patch(f"/admin/plans/{plan_id}", json=terms, headers=api.admin)
    assert response.status_code == 200, response.text
    provider_id = response.json()["provider_id"]
    plans = api.client.get(f"/admin/providers/{provider_id}/plans", headers=api.admin)
    assert plans.status_code == 200, plans.text
    [plan] = plans.json()
    assert plan["cycle"]["standing"] == "within_quota"
