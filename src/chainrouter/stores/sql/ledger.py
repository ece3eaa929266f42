"""The credit ledger: every change of a balance is one row, and the balance moves with it."""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.money import MAX_NANO, BalanceOutOfRangeError
from chainrouter.domain.records import LedgerLine
from chainrouter.stores.sql.schema import credit_ledger, customers, utcnow


def record_credit_change(
    connection: Connection,
    *,
    customer_id: int,
    kind: LedgerEntryKind,
    amount_nano: int,
    reference: str | None = None,
    note: str = "",
) -> LedgerLine:
    """Append a ledger row and move the customer's balance by `amount_nano`, atomically.

    Must run inside the caller's transaction. The balance update is a single relative UPDATE, so
    concurrent writers (routers flushing usage, an admin granting credits) never lose each other's
    changes; the row lock it takes orders them. A change that would take the balance past the
    64-bit range raises `BalanceOutOfRangeError` and writes nothing. Routers learn of purchases
    and grants through the configuration version, which the caller bumps; usage written by
    routers does not bump it.
    """
    # Guarded in the statement itself, with the bound computed here: PostgreSQL would fail the
    # sum with an error and SQLite would silently turn it into a float.
    in_range = (
        customers.c.balance_nano <= MAX_NANO - amount_nano
        if amount_nano >= 0
        else customers.c.balance_nano >= -MAX_NANO - amount_nano
    )
    balance_after = connection.execute(
        update(customers)
        .where(customers.c.id == customer_id, in_range)
        .values(balance_nano=customers.c.balance_nano + amount_nano)
        .returning(customers.c.balance_nano)
    ).scalar_one_or_none()
    if balance_after is None:
        # No row matched: an unknown customer (NoResultFound, as before the guard) or the bound.
        connection.execute(select(customers.c.id).where(customers.c.id == customer_id)).one()
        raise BalanceOutOfRangeError
    created_at = utcnow()
    entry_id = connection.execute(
        credit_ledger.insert().values(
            customer_id=customer_id,
            kind=kind.value,
            amount_nano=amount_nano,
            balance_after_nano=balance_after,
            reference=reference,
            note=note,
            created_at=created_at,
        )
    ).inserted_primary_key
    assert entry_id is not None
    return LedgerLine(
        id=int(entry_id[0]),
        customer_id=customer_id,
        kind=kind,
        amount_nano=amount_nano,
        balance_after_nano=int(balance_after),
        reference=reference,
        note=note,
        created_at=created_at,
    )


def find_by_reference(
    connection: Connection, customer_id: int, reference: str
) -> LedgerLine | None:
    row = connection.execute(
        select(credit_ledger).where(
            credit_ledger.c.customer_id == customer_id, credit_ledger.c.reference == reference
        )
    ).first()
    if row is None:
        return None
    return LedgerLine(
        id=row.id,
        customer_id=row.customer_id,
        kind=LedgerEntryKind(row.kind),
        amount_nano=row.amount_nano,
        balance_after_nano=row.balance_after_nano,
        reference=row.reference,
        note=row.note,
        created_at=row.created_at,
    )
