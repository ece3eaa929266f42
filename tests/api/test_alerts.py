"""Alerts a customer sets: a balance below a threshold (`PATCH /account`), and a key spending
more in a UTC day than its `spend_alert`. They are told in `GET /account` (and so on every page
of the dashboard) while they hold; nothing is refused because of them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from chainrouter.stores.sql.usage import write_usage
from tests.api.conftest import ApiHarness, Customer


def _spend(api: ApiHarness, customer: Customer, key_id: int, nano: int, tag: str) -> None:
    hour = int(datetime.now(UTC).replace(minute=0, second=0, microsecond=0).timestamp())
    row = (customer.id, key_id, 1, "eth_call", "first_choice", hour, 0)
    write_usage(api.engine, {row: [1, nano]}, {customer.id: nano}, reference=f"alert:{tag}")


def _grant(api: ApiHarness, customer: Customer, amount: str) -> None:
    granted = api.client.post(
        f"/admin/customers/{customer.id}/credits",
        json={"kind": "grant", "amount": amount},
        headers=api.admin,
    )
    assert granted.status_code == 201, granted.text


def test_a_low_balance_alert_holds_while_the_balance_is_below_it(api: ApiHarness) -> None:
    customer = api.customer()
    _grant(api, customer, "1")
    account = api.client.get("/account", headers=customer.headers).json()
    assert (account["low_balance_alert"], account["alerts"]) == (0, [])
    set_ = api.client.patch("/account", json={"low_balance_alert": "0.5"}, headers=customer.headers)
    assert set_.status_code == 200, set_.text
    assert Decimal(str(set_.json()["low_balance_alert"])) == Decimal("0.5")
    assert set_.json()["alerts"] == []
    key = api.create_key(customer)
    _spend(api, customer, key["id"], 600_000_000, "low")  # 0.6 spent: 0.4 left
    alerts = api.client.get("/account", headers=customer.headers).json()["alerts"]
    assert alerts == [
        {
            "kind": "low_balance",
            "api_key_id": None,
            "message": "the balance, 0.4 credits, is below 0.5",
        }
    ]
    off = api.client.patch("/account", json={"low_balance_alert": 0}, headers=customer.headers)
    assert off.json()["alerts"] == []


def test_a_key_spending_more_than_its_alert_today_raises_it(api: ApiHarness) -> None:
    customer = api.customer()
    _grant(api, customer, "10")
    watched = api.create_key(customer, name="watched", spend_alert="0.25")
    quiet = api.create_key(customer, name="quiet")
    assert (watched["spend_alert"], quiet["spend_alert"]) == (0.25, 0)
    _spend(api, customer, watched["id"], 200_000_000, "a")
    _spend(api, customer, quiet["id"], 900_000_000, "b")
    listed = {k["name"]: k for k in api.client.get("/api-keys", headers=customer.headers).json()}
    assert (listed["watched"]["spent_today"], listed["quiet"]["spent_today"]) == (0.2, 0.9)
    assert api.client.get("/account", headers=customer.headers).json()["alerts"] == []
    _spend(api, customer, watched["id"], 100_000_000, "c")
    alerts = api.client.get("/account", headers=customer.headers).json()["alerts"]
    assert alerts == [
        {
            "kind": "key_spend",
            "api_key_id": watched["id"],
            "message": "key watched spent 0.3 credits today (UTC), more than its alert of 0.25",
        }
    ]
    raised = api.client.patch(
        f"/api-keys/{watched['id']}", json={"spend_alert": "1"}, headers=customer.headers
    )
    assert raised.json()["spend_alert"] == 1
    assert raised.json()["spent_today"] == 0.3
    assert api.client.get("/account", headers=customer.headers).json()["alerts"] == []


def test_bad_alert_amounts_are_422_at_their_field(api: ApiHarness) -> None:
    customer = api.customer()
    key = api.create_key(customer)
    for method, path, body, field in [
        ("PATCH", "/account", {"low_balance_alert": "-1"}, "low_balance_alert"),
        ("PATCH", "/account", {"low_balance_alert": "0.0000000001"}, "low_balance_alert"),
        ("PATCH", "/account", {}, "low_balance_alert"),
        ("PATCH", f"/api-keys/{key['id']}", {"spend_alert": "-0.1"}, "spend_alert"),
        (
            "POST",
            "/api-keys",
            {"allowed_domains": ["*"], "routing_strategy": "economy", "spend_alert": "lots"},
            "spend_alert",
        ),
    ]:
        answer = api.client.request(method, path, json=body, headers=customer.headers)
        assert answer.status_code == 422, (body, answer.text)
        assert [d["field"] for d in answer.json()["error"]["details"]] == [field], answer.text
