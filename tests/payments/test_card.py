"""Card payments through Stripe Checkout: a checkout is made with Stripe's library (against the
local stand-in for Stripe's API), a paid session credits its credits once, refunds and disputes
are adjustments, and nothing is believed whose signature does not verify. Events are signed with
a test secret by Stripe's own scheme."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, select

from chainrouter.stores.sql import schema as t
from tests.api.conftest import ApiHarness, Customer, make_harness
from tests.payments.stripe_standin import StripeStandIn, signed

SECRET_KEY = "sk_test_" + "k" * 24
WEBHOOK_SECRET = "whsec_" + "w" * 32
NANO = 10**9


@pytest.fixture
def stripe_api() -> Iterator[StripeStandIn]:
    with StripeStandIn(SECRET_KEY) as standin:
        yield standin


@pytest.fixture
def api(engine: Engine, stripe_api: StripeStandIn) -> Iterator[ApiHarness]:
    harness = make_harness(
        engine,
        stripe_secret_key=SECRET_KEY,
        stripe_webhook_secret=WEBHOOK_SECRET,
        stripe_api_base=stripe_api.url,
    )
    with harness.client:
        yield harness


def _balance(api: ApiHarness, customer: Customer) -> int:
    with api.engine.connect() as connection:
        balance: int = connection.execute(
            select(t.customers.c.balance_nano).where(t.customers.c.id == customer.id)
        ).scalar_one()
        return balance


def _checkout(api: ApiHarness, customer: Customer, credits: object = "25") -> dict[str, Any]:
    made = api.client.post("/billing/checkout", json={"credits": credits}, headers=customer.headers)
    assert made.status_code == 201, made.text
    result: dict[str, Any] = made.json()
    return result


def _event(kind: str, found: dict[str, Any]) -> bytes:
    body = {"id": f"evt_{time.monotonic_ns()}", "object": "event", "type": kind}
    return json.dumps({**body, "data": {"object": found}}).encode()


def _deliver(api: ApiHarness, payload: bytes, signature: str | None = None) -> Any:
    header = signed(payload, WEBHOOK_SECRET) if signature is None else signature
    return api.client.post(
        "/webhooks/stripe",
        content=payload,
        headers={"Stripe-Signature": header, "Content-Type": "application/json"},
    )


def _paid(session_id: str, cents: int, intent: str = "pi_1") -> bytes:
    session = {
        "id": session_id,
        "object": "checkout.session",
        "payment_status": "paid",
        "amount_total": cents,
        "currency": "usd",
        "payment_intent": intent,
    }
    return _event("checkout.session.completed", session)


def test_checkout_asks_stripe_for_the_credits_in_dollars_and_returns_its_page(
    api: ApiHarness, stripe_api: StripeStandIn
) -> None:
    customer = api.customer()
    made = _checkout(api, customer, "25.50")
    assert made["url"].startswith("https://checkout.stripe.com/")
    assert made["credits"] == 25.5
    [form] = stripe_api.sessions
    assert form["mode"] == "payment"
    assert form["line_items[0][price_data][unit_amount]"] == "2550"
    assert form["line_items[0][price_data][currency]"] == "usd"
    assert form["client_reference_id"] == str(customer.id)
    assert form["success_url"].endswith("/dashboard?checkout=success")
    assert _balance(api, customer) == 0  # nothing until Stripe says it is paid


@pytest.mark.parametrize(
    ("credits", "field_message"),
    [("4.99", "5 to 10000"), ("10000.01", "5 to 10000"), ("10.001", "2 decimal places")],
)
def test_checkout_refuses_amounts_outside_the_operators_bounds(
    api: ApiHarness, stripe_api: StripeStandIn, credits: str, field_message: str
) -> None:
    refused = api.client.post(
        "/billing/checkout", json={"credits": credits}, headers=api.customer().headers
    )
    assert refused.status_code == 422
    assert field_message in refused.json()["error"]["message"]
    assert stripe_api.sessions == []


def test_stripe_refusing_the_checkout_is_a_502_and_records_nothing(
    api: ApiHarness, stripe_api: StripeStandIn
) -> None:
    stripe_api.fail_with = 400
    refused = api.client.post(
        "/billing/checkout", json={"credits": 10}, headers=api.customer().headers
    )
    assert refused.status_code == 502
    assert refused.json()["error"]["code"] == "payment_provider_error"
    with api.engine.connect() as connection:
        assert connection.execute(select(t.card_payments)).all() == []


def test_a_paid_session_credits_its_customer_once_however_often_it_is_delivered(
    api: ApiHarness,
) -> None:
    customer = api.customer()
    session = _checkout(api, customer, 25)["session_id"]
    payload = _paid(session, 2500)
    for _ in range(3):
        delivered = _deliver(api, payload)
        assert delivered.status_code == 200, delivered.text
    assert _balance(api, customer) == 25 * NANO
    purchases = api.client.get("/billing/purchases", headers=customer.headers).json()
    assert [(p["kind"], p["amount"], p["reference"]) for p in purchases] == [
        ("purchase", 25, f"stripe:{session}")
    ]


def test_a_session_not_paid_yet_or_paid_another_amount_is_not_credited(api: ApiHarness) -> None:
    customer = api.customer()
    session = _checkout(api, customer, 25)["session_id"]
    waiting = _event(
        "checkout.session.completed",
        {"id": session, "payment_status": "unpaid", "amount_total": 2500, "currency": "usd"},
    )
    assert _deliver(api, waiting).json()["outcome"].startswith("waiting")
    assert _deliver(api, _paid(session, 2400)).json()["outcome"].startswith("mismatch")
    assert _deliver(api, _paid(session, 2500)).json()["outcome"] == "already mismatch"
    assert _balance(api, customer) == 0


@pytest.mark.parametrize(
    "signature",
    [
        "",
        "t=1,v1=00",
        signed(b"another body", WEBHOOK_SECRET),
        signed(b"", "whsec_other"),
        "stale",
    ],
    # Named, not shown: signatures carry the time, and every test process must collect alike.
    ids=["none", "malformed", "another body", "another secret", "stale"],
)
def test_an_event_whose_signature_does_not_verify_changes_nothing(
    api: ApiHarness, signature: str
) -> None:
    customer = api.customer()
    payload = _paid(_checkout(api, customer, 25)["session_id"], 2500)
    if signature == "stale":  # signed correctly, but more than 5 minutes ago
        signature = signed(payload, WEBHOOK_SECRET, at=int(time.time()) - 600)
    refused = _deliver(api, payload, signature)
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "bad_signature"
    assert _balance(api, customer) == 0


def test_refunds_and_disputes_are_adjustments(api: ApiHarness) -> None:
    customer = api.customer()
    session = _checkout(api, customer, 40)["session_id"]
    _deliver(api, _paid(session, 4000, intent="pi_refund"))

    def refunded(cents: int) -> bytes:
        charge = {"id": "ch_1", "payment_intent": "pi_refund", "amount_refunded": cents}
        return _event("charge.refunded", charge)

    assert _deliver(api, refunded(1000)).json()["outcome"] == "adjusted"
    assert _deliver(api, refunded(1000)).json()["outcome"] == "already adjusted"
    assert _balance(api, customer) == 30 * NANO
    _deliver(api, refunded(1500))  # another 5 USD, 15 in all
    assert _balance(api, customer) == 25 * NANO

    dispute = {"id": "dp_1", "payment_intent": "pi_refund", "amount": 2500, "status": "won"}
    for _ in range(2):
        _deliver(api, _event("charge.dispute.created", {**dispute, "status": "needs_response"}))
    assert _balance(api, customer) == 0
    _deliver(api, _event("charge.dispute.closed", dispute))
    _deliver(api, _event("charge.dispute.closed", dispute))
    assert _balance(api, customer) == 25 * NANO
    kinds = [
        (p["kind"], p["amount"])
        for p in api.client.get("/billing/purchases", headers=customer.headers).json()
    ]
    assert kinds == [
        ("adjustment", 25),
        ("adjustment", -25),
        ("adjustment", -5),
        ("adjustment", -10),
        ("purchase", 40),
    ]


def test_card_payments_are_off_unless_both_keys_are_set(engine: Engine) -> None:
    harness = make_harness(engine, stripe_secret_key=SECRET_KEY)
    with harness.client:
        customer = harness.customer()
        off = harness.client.post(
            "/billing/checkout", json={"credits": 10}, headers=customer.headers
        )
        assert off.status_code == 404
        assert "not offered" in off.json()["error"]["message"]
        options = harness.client.get("/billing/options", headers=customer.headers).json()
        assert options["card"]["enabled"] is False
        assert harness.client.post("/webhooks/stripe", content=b"{}").status_code == 404
