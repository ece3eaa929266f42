"""Card payments through Stripe Checkout, with Stripe's own library.

`checkout` makes a Checkout Session for a number of credits (1 credit = 1 USD, so the price is
that many dollars) and records it for the customer. Stripe then calls the webhook: a paid session
is credited once (ledger reference `stripe:{session_id}`); refunds and disputes are adjustments
(negative entries; a dispute won gives the credits back). Every event's signature is verified
with the endpoint's secret before anything in it is believed (docs/billing.md).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import stripe
from sqlalchemy import Connection, Engine
from sqlalchemy.exc import IntegrityError

from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.money import format_credits
from chainrouter.management.errors import InvalidInputError, ManagementError, NotFoundError
from chainrouter.stores.sql import payments
from chainrouter.stores.sql.accounts import lock_customer
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import find_by_reference, record_credit_change

log = logging.getLogger(__name__)

CURRENCY = "usd"
NANO_PER_CENT = 10**7  # 1 credit = 1 USD = 100 cents
DEFAULT_TERMS = payments.CardTerms(5 * 10**9, 10_000 * 10**9, None, None)
NOT_OFFERED = "card payments are not offered here: the operator has not configured Stripe"


class PaymentProviderError(ManagementError):
    """Stripe did not make the checkout; nothing was charged."""

    code = "payment_provider_error"
    status = 502


class BadSignatureError(ManagementError):
    """A webhook call whose signature is not Stripe's with this endpoint's secret."""

    code = "bad_signature"
    status = 400


@dataclass(frozen=True, slots=True)
class Checkout:
    session_id: str
    url: str
    credits_nano: int


class CardPayments:
    def __init__(self, secret_key: str, webhook_secret: str, api_base: str | None) -> None:
        addresses: Any = {"api": api_base.rstrip("/")} if api_base else None
        self._client = stripe.StripeClient(
            secret_key, base_addresses=addresses, max_network_retries=2
        )
        self._webhook_secret = webhook_secret

    # -- checkout ---------------------------------------------------------------------------

    def checkout(
        self, engine: Engine, customer_id: int, credits_nano: int, return_url: str
    ) -> Checkout:
        with engine.connect() as connection:
            terms = payments.payment_config(connection).card or DEFAULT_TERMS
        if credits_nano % NANO_PER_CENT:
            raise InvalidInputError(
                "credits: must be a whole number of cents (at most 2 decimal places)",
                details=[{"field": "credits", "message": "at most 2 decimal places"}],
            )
        low, high = terms.min_credits_nano, terms.max_credits_nano
        if not low <= credits_nano <= high:
            bounds = f"{format_credits(low)} to {format_credits(high)}"
            raise InvalidInputError(
                f"credits: one checkout buys {bounds} credits",
                details=[{"field": "credits", "message": f"must be {bounds}"}],
            )
        cents = credits_nano // NANO_PER_CENT
        amount = format_credits(credits_nano)
        metadata = {"customer_id": str(customer_id), "credits": amount}
        params: Any = {
            "mode": "payment",
            "line_items": [
                {
                    "quantity": 1,
                    "price_data": {
                        "currency": CURRENCY,
                        "unit_amount": cents,
                        "product_data": {"name": f"{amount} credits"},
                    },
                }
            ],
            "client_reference_id": str(customer_id),
            "metadata": metadata,
            "payment_intent_data": {"metadata": metadata},
            "success_url": terms.success_url or f"{return_url}?checkout=success",
            "cancel_url": terms.cancel_url or f"{return_url}?checkout=cancelled",
        }
        try:
            session = self._client.v1.checkout.sessions.create(params=params)
        except stripe.StripeError as exc:
            log.warning("Stripe refused a checkout: %s", exc.user_message or type(exc).__name__)
            raise PaymentProviderError(
                "the card payment could not be started; try again later"
            ) from None
        if not session.id or not session.url:
            raise PaymentProviderError("Stripe answered without a checkout page")
        with engine.begin() as connection:
            payments.insert_card_payment(
                connection,
                session_id=session.id,
                customer_id=customer_id,
                credits_nano=credits_nano,
                amount_cents=cents,
                currency=CURRENCY,
            )
        return Checkout(session.id, session.url, credits_nano)

    # -- webhook ----------------------------------------------------------------------------

    def receive(self, engine: Engine, payload: bytes, signature: str | None) -> str:
        """Verify and act on one event; the outcome, for the answer and the log."""
        try:
            stripe.Webhook.construct_event(payload, signature or "", self._webhook_secret)
        except (stripe.SignatureVerificationError, ValueError):
            raise BadSignatureError(
                "the Stripe-Signature header does not verify with this endpoint's secret"
            ) from None
        event = json.loads(payload)
        kind = event.get("type")
        found = event.get("data", {}).get("object", {})
        if kind in ("checkout.session.completed", "checkout.session.async_payment_succeeded"):
            return _on_session(engine, found)
        if kind == "charge.refunded":
            return _on_refund(engine, found)
        if kind == "charge.dispute.created":
            return _on_dispute(engine, found, won=False)
        if kind == "charge.dispute.closed" and found.get("status") == "won":
            return _on_dispute(engine, found, won=True)
        return "ignored"


def _credit_once(
    connection: Connection,
    customer_id: int,
    kind: LedgerEntryKind,
    amount_nano: int,
    reference: str,
    note: str,
) -> tuple[int, bool]:
    """The ledger entry with `reference`, written now unless it was before; (id, written)."""
    entry = find_by_reference(connection, customer_id, reference)
    if entry is not None:
        return entry.id, False
    entry = record_credit_change(
        connection,
        customer_id=customer_id,
        kind=kind,
        amount_nano=amount_nano,
        reference=reference,
        note=note,
    )
    bump_config_version(connection)  # routers read the balance at once
    return entry.id, True


def _on_session(engine: Engine, session: dict[str, Any]) -> str:
    session_id = session.get("id")
    if not isinstance(session_id, str):
        return "ignored: no session id"
    if session.get("payment_status") != "paid":
        return "waiting: not paid yet"
    try:
        with engine.begin() as connection:
            payment = payments.card_payment(connection, session_id)
            if payment is None:
                log.warning("Stripe: a paid session %s that no checkout here made", session_id)
                return "ignored: unknown session"
            lock_customer(connection, payment.customer_id)
            payment = payments.card_payment(connection, session_id, lock=True)
            assert payment is not None
            if payment.state != "open":
                return f"already {payment.state}"
            intent = session.get("payment_intent")
            intent = intent if isinstance(intent, str) else None
            if (session.get("amount_total"), session.get("currency")) != (
                payment.amount_cents,
                payment.currency,
            ):
                log.error(
                    "Stripe: session %s paid %s %s, not the %s %s asked: not credited",
                    session_id,
                    session.get("amount_total"),
                    session.get("currency"),
                    payment.amount_cents,
                    payment.currency,
                )
                payments.settle_card_payment(
                    connection, session_id, state="mismatch", payment_intent=intent, ledger_id=None
                )
                return "mismatch: not credited"
            ledger_id, _ = _credit_once(
                connection,
                payment.customer_id,
                LedgerEntryKind.PURCHASE,
                payment.credits_nano,
                f"stripe:{session_id}",
                "card payment (Stripe Checkout)",
            )
            payments.settle_card_payment(
                connection, session_id, state="paid", payment_intent=intent, ledger_id=ledger_id
            )
    except IntegrityError:
        return "already paid"  # another delivery of the same event won the race
    return "credited"


def _payment_of(connection: Connection, found: dict[str, Any]) -> payments.CardPayment | None:
    intent = found.get("payment_intent")
    return payments.card_payment_by_intent(connection, intent) if isinstance(intent, str) else None


def _on_refund(engine: Engine, charge: dict[str, Any]) -> str:
    charge_id = charge.get("id")
    refunded = charge.get("amount_refunded")
    if not isinstance(charge_id, str) or not isinstance(refunded, int) or refunded < 0:
        return "ignored: not a charge"
    try:
        with engine.begin() as connection:
            payment = _payment_of(connection, charge)
            if payment is None:
                return "ignored: unknown payment"
            lock_customer(connection, payment.customer_id)
            prefix = f"stripe:refund:{charge_id}:"
            done = -payments.ledger_sum_with_prefix(connection, payment.customer_id, prefix)
            owed = min(refunded * NANO_PER_CENT, payment.credits_nano) - done
            if owed <= 0:
                return "already adjusted"
            _credit_once(
                connection,
                payment.customer_id,
                LedgerEntryKind.ADJUSTMENT,
                -owed,
                f"{prefix}{refunded}",
                f"card refund of {format_credits(refunded * NANO_PER_CENT)} USD in all",
            )
    except IntegrityError:
        return "already adjusted"
    return "adjusted"


def _on_dispute(engine: Engine, dispute: dict[str, Any], *, won: bool) -> str:
    dispute_id = dispute.get("id")
    amount = dispute.get("amount")
    if not isinstance(dispute_id, str) or not isinstance(amount, int) or amount < 0:
        return "ignored: not a dispute"
    try:
        with engine.begin() as connection:
            payment = _payment_of(connection, dispute)
            if payment is None:
                return "ignored: unknown payment"
            lock_customer(connection, payment.customer_id)
            nano = min(amount * NANO_PER_CENT, payment.credits_nano)
            reference = f"stripe:dispute:{dispute_id}"
            if won:
                if find_by_reference(connection, payment.customer_id, reference) is None:
                    return "ignored: no dispute taken"
                nano, reference, note = nano, f"{reference}:won", "card dispute won: credits back"
            else:
                nano, note = -nano, "card payment disputed"
            _, written = _credit_once(
                connection, payment.customer_id, LedgerEntryKind.ADJUSTMENT, nano, reference, note
            )
    except IntegrityError:
        return "already adjusted"
    return "adjusted" if written else "already adjusted"


def card_payments(
    secret_key: str | None, webhook_secret: str | None, api_base: str | None
) -> CardPayments | None:
    """Card payments when both Stripe keys are set, else None (the routes answer 404)."""
    if not secret_key or not webhook_secret:
        return None
    return CardPayments(secret_key, webhook_secret, api_base)


def require(card: CardPayments | None) -> CardPayments:
    if card is None:
        raise NotFoundError(NOT_OFFERED)
    return card
