"""A customer's own account, self-served (spec section 5, rule 1: management tokens are created
and revoked in the dashboard, the secret shown once): who the caller is, their management
tokens, and the demo's sign-up.

A customer mints only customer tokens here, whatever the role of the token it uses: agent and
administrator tokens are an administrator's to issue (`management/admin.py`).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine

from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import LedgerEntryKind, Role
from chainrouter.domain.money import credits_decimal
from chainrouter.domain.records import Customer, ManagementToken, Principal, Provider
from chainrouter.management.admin import IssuedToken
from chainrouter.management.errors import ConflictError, NotFoundError
from chainrouter.stores.sql import accounts
from chainrouter.stores.sql import api_keys as key_store
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import record_credit_change
from chainrouter.stores.sql.usage_report import floor_day, spent_by_key_since


def credits_text(nano: int) -> str:
    """An amount as exact decimal text, without trailing zeros: 1.5, 0.0000003."""
    return format(credits_decimal(nano).normalize(), "f")


MAX_LIVE_TOKENS = 20  # per customer; revoked ones do not count
SIGNUP_TOKEN_LABEL = "first token"  # noqa: S105 (a label, not a secret)
# `.invalid` is reserved (RFC 2606): a placeholder address can never be anybody's.
SIGNUP_PLACEHOLDER_DOMAIN = "signup.invalid"


@dataclass(frozen=True, slots=True)
class Alert:
    """Something the customer asked to be told of, true now."""

    kind: str  # low_balance or key_spend
    message: str
    api_key_id: int | None = None


@dataclass(frozen=True, slots=True)
class Account:
    """The caller: their customer record, the role, id and label of the token in use, their
    provider, and the alerts they set that hold now."""

    customer: Customer
    role: Role
    token_id: int
    token_label: str
    provider: Provider | None
    alerts: tuple[Alert, ...] = ()


@dataclass(frozen=True, slots=True)
class SignedUp:
    customer: Customer
    issued: IssuedToken
    granted_nano: int


def account(engine: Engine, principal: Principal, now: datetime | None = None) -> Account:
    with engine.connect() as connection:
        customer = accounts.get_customer(connection, principal.customer_id)
        if customer is None:  # deleted while the token lived
            raise NotFoundError("no such customer")
        provider = (
            None
            if principal.provider_id is None
            else accounts.get_provider(connection, principal.provider_id)
        )
        token = accounts.get_token(connection, principal.token_id)
        alerts = _alerts(connection, customer, now or datetime.now(UTC))
    label = "" if token is None else token.label
    return Account(customer, principal.role, principal.token_id, label, provider, alerts)


def _alerts(connection: Connection, customer: Customer, now: datetime) -> tuple[Alert, ...]:
    """The low-balance alert when the balance is below its threshold, and a key-spend alert
    for each key that spent more than its alert today (UTC), as usage has been flushed."""
    found = []
    if customer.low_balance_alert_nano and customer.balance_nano < customer.low_balance_alert_nano:
        found.append(
            Alert(
                "low_balance",
                f"the balance, {credits_text(customer.balance_nano)} credits, is below "
                f"{credits_text(customer.low_balance_alert_nano)}",
            )
        )
    keys = [k for k in key_store.list_api_keys(connection, customer.id) if k.spend_alert_nano]
    if keys:
        spent = spent_by_key_since(connection, customer.id, floor_day(now))
        for key in keys:
            today = spent.get(key.id, 0)
            if today > key.spend_alert_nano:
                found.append(
                    Alert(
                        "key_spend",
                        f"key {key.name or key.key_hint} spent {credits_text(today)} credits "
                        f"today (UTC), more than its alert of {credits_text(key.spend_alert_nano)}",
                        api_key_id=key.id,
                    )
                )
    return tuple(found)


def set_low_balance_alert(engine: Engine, customer_id: int, nano: int) -> None:
    """Warn below this balance (0: never)."""
    with engine.begin() as connection:
        accounts.set_low_balance_alert(connection, customer_id, nano)


def list_own_tokens(engine: Engine, customer_id: int) -> list[ManagementToken]:
    with engine.connect() as connection:
        return accounts.list_tokens(connection, customer_id)


def issue_own_token(engine: Engine, customer_id: int, label: str) -> IssuedToken:
    """A new customer token; 409 when the label is taken (revoked tokens keep theirs) or the
    customer already holds `MAX_LIVE_TOKENS` live tokens."""
    with engine.begin() as connection:
        accounts.lock_customer(connection, customer_id)
        live = [t for t in accounts.list_tokens(connection, customer_id) if t.revoked_at is None]
        if len(live) >= MAX_LIVE_TOKENS:
            raise ConflictError(
                f"at most {MAX_LIVE_TOKENS} live management tokens: revoke one first"
            )
        return _issue(connection, customer_id, label)


def revoke_own_token(engine: Engine, customer_id: int, token_id: int) -> ManagementToken:
    """Revoke one of the customer's tokens for good (the one in use too: it signs out).
    Another customer's token is 404, so that its existence is not revealed."""
    with engine.begin() as connection:
        token = accounts.get_token(connection, token_id)
        if token is None or token.customer_id != customer_id:
            raise NotFoundError(f"no management token {token_id}")
        accounts.mark_token_revoked(connection, token_id)
        revoked = accounts.get_token(connection, token_id)
    assert revoked is not None
    return revoked


def sign_up(engine: Engine, *, name: str, email: str, free_credits_nano: int) -> SignedUp:
    """A new customer with `free_credits_nano` granted and a first management token, in one
    transaction: nothing half made.

    The address is kept as the account's contact, unverified (nothing here can confirm that
    whoever signs up owns it), so it is never an identity: another account may give the same
    one, and a sign-up answers alike whether or not an account already has it, which tells
    nobody who has an account. The account's own `email` column, the one administrators and
    the operator file look customers up by, gets a placeholder that no address matches.
    """
    with engine.begin() as connection:
        placeholder = f"signup-{secrets.token_hex(12)}@{SIGNUP_PLACEHOLDER_DOMAIN}"
        customer_id = accounts.insert_customer(
            connection, name=name, email=placeholder, contact_email=email
        )
        if free_credits_nano > 0:
            record_credit_change(
                connection,
                customer_id=customer_id,
                kind=LedgerEntryKind.GRANT,
                amount_nano=free_credits_nano,
                reference=f"signup:{customer_id}",
                note="free credits at sign-up",
            )
            bump_config_version(connection)  # routers read the new balance at once
        issued = _issue(connection, customer_id, SIGNUP_TOKEN_LABEL)
        customer = accounts.get_customer(connection, customer_id)
    assert customer is not None
    return SignedUp(customer, issued, free_credits_nano)


def _issue(connection: Connection, customer_id: int, label: str) -> IssuedToken:
    if accounts.token_label_taken(connection, customer_id, label):
        raise ConflictError(f"you already have a token labelled {label!r}")
    secret = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    token = accounts.insert_token(
        connection,
        customer_id=customer_id,
        label=label,
        role=Role.CUSTOMER,
        digest=hash_secret(secret),
        hint=secret_hint(secret),
    )
    return IssuedToken(token, secret)
