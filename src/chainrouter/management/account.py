"""A customer's own account, self-served (spec section 5, rule 1: management tokens are created
and revoked in the dashboard, the secret shown once): who the caller is, their management
tokens, and the demo's sign-up.

A customer mints only customer tokens here, whatever the role of the token it uses: agent and
administrator tokens are an administrator's to issue (`management/admin.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import LedgerEntryKind, Role
from chainrouter.domain.records import Customer, ManagementToken, Principal, Provider
from chainrouter.management.admin import IssuedToken
from chainrouter.management.errors import ConflictError, NotFoundError
from chainrouter.stores.sql import accounts
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.ledger import record_credit_change

MAX_LIVE_TOKENS = 20  # per customer; revoked ones do not count
SIGNUP_TOKEN_LABEL = "first token"  # noqa: S105 (a label, not a secret)


@dataclass(frozen=True, slots=True)
class Account:
    """The caller: their customer record, the role and id of the token in use, their provider."""

    customer: Customer
    role: Role
    token_id: int
    provider: Provider | None


@dataclass(frozen=True, slots=True)
class SignedUp:
    customer: Customer
    issued: IssuedToken
    granted_nano: int


def account(engine: Engine, principal: Principal) -> Account:
    with engine.connect() as connection:
        customer = accounts.get_customer(connection, principal.customer_id)
        if customer is None:  # deleted while the token lived
            raise NotFoundError("no such customer")
        provider = (
            None
            if principal.provider_id is None
            else accounts.get_provider(connection, principal.provider_id)
        )
    return Account(customer, principal.role, principal.token_id, provider)


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
    transaction: nothing half made. 409 when the e-mail is taken."""
    with engine.begin() as connection:
        if accounts.customer_email_taken(connection, email):
            raise ConflictError(f"a customer with e-mail {email} exists")
        customer_id = accounts.insert_customer(connection, name=name, email=email)
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
