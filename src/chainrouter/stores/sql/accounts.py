"""Customers, providers, the link between them, management tokens and the ledger's history."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, delete, select, update

from chainrouter.domain.enums import LedgerEntryKind, Role
from chainrouter.domain.records import Customer, LedgerLine, ManagementToken, Principal, Provider
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow


def _customer(row: Row[Any]) -> Customer:
    return Customer(
        id=row.id,
        name=row.name,
        email=row.contact_email or row.email,
        balance_nano=row.balance_nano,
        provider_id=row.provider_id,
        created_at=row.created_at,
        updated_at=row.updated_at,
        low_balance_alert_nano=row.low_balance_alert_nano,
    )


def _customers_query() -> Any:
    return select(t.customers, t.provider_customers.c.provider_id).outerjoin(
        t.provider_customers, t.provider_customers.c.customer_id == t.customers.c.id
    )


def lock_customer(connection: Connection, customer_id: int) -> None:
    """Hold the customer until the transaction ends, so that a count and the insert it allows
    (a bounded number of tokens or keys) are not interleaved with another's. SQLite locks the
    whole database at a transaction's first write, and pysqlite starts the transaction there:
    a write that changes nothing takes it."""
    customers = t.customers
    if connection.dialect.name == "sqlite":
        # updated_at named too: left out, its onupdate would stamp the customer as changed.
        connection.execute(
            update(customers)
            .where(customers.c.id == customer_id)
            .values(id=customers.c.id, updated_at=customers.c.updated_at)
        )
    else:
        connection.execute(
            select(customers.c.id).where(customers.c.id == customer_id).with_for_update()
        )


def get_customer(connection: Connection, customer_id: int) -> Customer | None:
    row = connection.execute(_customers_query().where(t.customers.c.id == customer_id)).first()
    return None if row is None else _customer(row)


def list_customers(connection: Connection, *, limit: int, offset: int) -> list[Customer]:
    query = _customers_query().order_by(t.customers.c.id).limit(limit).offset(offset)
    return [_customer(row) for row in connection.execute(query)]


def customer_id_by_email(connection: Connection, email: str) -> int | None:
    query = select(t.customers.c.id).where(t.customers.c.email == email.strip().lower())
    return connection.execute(query).scalar_one_or_none()


def customer_email_taken(connection: Connection, email: str) -> bool:
    return customer_id_by_email(connection, email) is not None


def insert_customer(
    connection: Connection, *, name: str, email: str, contact_email: str | None = None
) -> int:
    now = utcnow()
    key = connection.execute(
        t.customers.insert().values(
            name=name, email=email, contact_email=contact_email, created_at=now, updated_at=now
        )
    ).inserted_primary_key
    assert key is not None
    return int(key[0])


def set_low_balance_alert(connection: Connection, customer_id: int, nano: int) -> None:
    connection.execute(
        update(t.customers)
        .where(t.customers.c.id == customer_id)
        .values(low_balance_alert_nano=nano, updated_at=utcnow())
    )


def _provider(row: Row[Any]) -> Provider:
    return Provider(id=row.id, slug=row.slug, name=row.name, created_at=row.created_at)


def get_provider(connection: Connection, provider_id: int) -> Provider | None:
    row = connection.execute(select(t.providers).where(t.providers.c.id == provider_id)).first()
    return None if row is None else _provider(row)


def list_providers(connection: Connection) -> list[Provider]:
    return [
        _provider(r) for r in connection.execute(select(t.providers).order_by(t.providers.c.id))
    ]


def provider_slug_taken(connection: Connection, slug: str) -> bool:
    found = connection.execute(select(t.providers.c.id).where(t.providers.c.slug == slug))
    return found.first() is not None


def insert_provider(connection: Connection, *, slug: str, name: str) -> int:
    now = utcnow()
    key = connection.execute(
        t.providers.insert().values(slug=slug, name=name, created_at=now, updated_at=now)
    ).inserted_primary_key
    assert key is not None
    return int(key[0])


def set_provider_link(connection: Connection, customer_id: int, provider_id: int | None) -> None:
    connection.execute(
        delete(t.provider_customers).where(t.provider_customers.c.customer_id == customer_id)
    )
    if provider_id is not None:
        connection.execute(
            t.provider_customers.insert().values(
                customer_id=customer_id, provider_id=provider_id, created_at=utcnow()
            )
        )


def _token(row: Row[Any]) -> ManagementToken:
    return ManagementToken(
        id=row.id,
        customer_id=row.customer_id,
        label=row.label,
        role=Role(row.role),
        token_hint=row.token_hint,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )


def find_principal(connection: Connection, token_hash: str) -> Principal | None:
    """The live (not revoked) token with this digest, as the principal it authenticates."""
    row = connection.execute(
        select(
            t.management_tokens.c.id,
            t.management_tokens.c.customer_id,
            t.management_tokens.c.role,
            t.provider_customers.c.provider_id,
        )
        .outerjoin(
            t.provider_customers,
            t.provider_customers.c.customer_id == t.management_tokens.c.customer_id,
        )
        .where(
            t.management_tokens.c.token_hash == token_hash,
            t.management_tokens.c.revoked_at.is_(None),
        )
    ).first()
    if row is None:
        return None
    return Principal(
        token_id=row.id,
        customer_id=row.customer_id,
        role=Role(row.role),
        provider_id=row.provider_id,
    )


def insert_token(
    connection: Connection, *, customer_id: int, label: str, role: Role, digest: str, hint: str
) -> ManagementToken:
    now = utcnow()
    key = connection.execute(
        t.management_tokens.insert().values(
            customer_id=customer_id,
            label=label,
            role=role.value,
            token_hash=digest,
            token_hint=hint,
            created_at=now,
            updated_at=now,
        )
    ).inserted_primary_key
    assert key is not None
    token = get_token(connection, int(key[0]))
    assert token is not None
    return token


def token_label_taken(connection: Connection, customer_id: int, label: str) -> bool:
    found = connection.execute(
        select(t.management_tokens.c.id).where(
            t.management_tokens.c.customer_id == customer_id, t.management_tokens.c.label == label
        )
    )
    return found.first() is not None


def get_token(connection: Connection, token_id: int) -> ManagementToken | None:
    row = connection.execute(
        select(t.management_tokens).where(t.management_tokens.c.id == token_id)
    ).first()
    return None if row is None else _token(row)


def list_tokens(connection: Connection, customer_id: int) -> list[ManagementToken]:
    query = (
        select(t.management_tokens)
        .where(t.management_tokens.c.customer_id == customer_id)
        .order_by(t.management_tokens.c.id)
    )
    return [_token(row) for row in connection.execute(query)]


def mark_token_revoked(connection: Connection, token_id: int) -> None:
    now = utcnow()
    connection.execute(
        t.management_tokens.update()
        .where(t.management_tokens.c.id == token_id, t.management_tokens.c.revoked_at.is_(None))
        .values(revoked_at=now, updated_at=now)
    )


def ledger_lines(
    connection: Connection,
    customer_id: int,
    *,
    limit: int,
    offset: int = 0,
    before_id: int | None = None,
) -> list[LedgerLine]:
    """Newest first. Usage flushes add rows every few seconds, which shift an `offset` between
    pages; `before_id` (only rows older than it) names where the last page ended, so it does not
    move."""
    conditions = [t.credit_ledger.c.customer_id == customer_id]
    if before_id is not None:
        conditions.append(t.credit_ledger.c.id < before_id)
    query = (
        select(t.credit_ledger)
        .where(*conditions)
        .order_by(t.credit_ledger.c.id.desc())
        .limit(limit)
        .offset(offset)
    )
    return [
        LedgerLine(
            id=row.id,
            customer_id=row.customer_id,
            kind=LedgerEntryKind(row.kind),
            amount_nano=row.amount_nano,
            balance_after_nano=row.balance_after_nano,
            reference=row.reference,
            note=row.note,
            created_at=row.created_at,
        )
        for row in connection.execute(query)
    ]


def customer_balance(connection: Connection, customer_id: int) -> int | None:
    return connection.execute(
        select(t.customers.c.balance_nano).where(t.customers.c.id == customer_id)
    ).scalar_one_or_none()
