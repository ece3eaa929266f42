"""The credit ledger: every balance change is a row, and the balance always equals their sum."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, text
from sqlalchemy.exc import IntegrityError

from chainrouter.domain.enums import LedgerEntryKind
from chainrouter.domain.money import MAX_NANO, BalanceOutOfRangeError
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.accounts import ledger_lines
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.ledger import find_by_reference, record_credit_change
from chainrouter.stores.sql.schema import credit_ledger, customers


def _customer(engine: Engine, email: str = "a@example.com") -> int:
    with engine.begin() as connection:
        result = connection.execute(customers.insert().values(name="A", email=email))
        assert result.inserted_primary_key is not None
        return int(result.inserted_primary_key[0])


def _balance_and_ledger_sum(engine: Engine, customer_id: int) -> tuple[int, int]:
    with engine.connect() as connection:
        balance = connection.execute(
            select(customers.c.balance_nano).where(customers.c.id == customer_id)
        ).scalar_one()
        total = connection.execute(
            select(func.coalesce(func.sum(credit_ledger.c.amount_nano), 0)).where(
                credit_ledger.c.customer_id == customer_id
            )
        ).scalar_one()
    return int(balance), int(total)


def test_each_change_moves_the_balance_and_records_the_balance_after(engine: Engine) -> None:
    customer_id = _customer(engine)
    with engine.begin() as connection:
        grant = record_credit_change(
            connection, customer_id=customer_id, kind=LedgerEntryKind.GRANT, amount_nano=5 * 10**9
        )
        usage = record_credit_change(
            connection, customer_id=customer_id, kind=LedgerEntryKind.USAGE, amount_nano=-300
        )
    assert grant.balance_after_nano == 5 * 10**9
    assert usage.balance_after_nano == 5 * 10**9 - 300
    assert _balance_and_ledger_sum(engine, customer_id) == (4_999_999_700, 4_999_999_700)


def test_a_reference_is_recorded_once_per_customer(engine: Engine) -> None:
    customer_id = _customer(engine)

    def purchase() -> None:
        with engine.begin() as connection:
            record_credit_change(
                connection,
                customer_id=customer_id,
                kind=LedgerEntryKind.PURCHASE,
                amount_nano=10,
                reference="order-1",
            )

    purchase()
    with pytest.raises(IntegrityError):
        purchase()
    assert _balance_and_ledger_sum(engine, customer_id) == (10, 10)
    with engine.connect() as connection:
        entry = find_by_reference(connection, customer_id, "order-1")
    assert entry is not None
    assert entry.amount_nano == 10


def test_concurrent_writers_never_lose_a_change(engine: Engine) -> None:
    customer_id = _customer(engine)
    amounts = [(-1) ** i * (i + 1) * 1_000 for i in range(40)]

    def write(amount: int) -> None:
        with engine.begin() as connection:
            record_credit_change(
                connection,
                customer_id=customer_id,
                kind=LedgerEntryKind.ADJUSTMENT,
                amount_nano=amount,
            )

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(write, amounts))
    assert _balance_and_ledger_sum(engine, customer_id) == (sum(amounts), sum(amounts))


@pytest.mark.parametrize(
    ("start", "change"),
    [(MAX_NANO - 10, 11), (MAX_NANO, MAX_NANO), (-1, -MAX_NANO), (-MAX_NANO, -1)],
)
def test_a_change_past_the_64_bit_range_is_refused_and_writes_nothing(
    engine: Engine, start: int, change: int
) -> None:
    customer_id = _customer(engine)
    with engine.begin() as connection:
        record_credit_change(
            connection, customer_id=customer_id, kind=LedgerEntryKind.GRANT, amount_nano=start
        )
    with pytest.raises(BalanceOutOfRangeError), engine.begin() as connection:
        record_credit_change(
            connection, customer_id=customer_id, kind=LedgerEntryKind.USAGE, amount_nano=change
        )
    assert _balance_and_ledger_sum(engine, customer_id) == (start, start)


def test_a_change_may_reach_the_edge_of_the_range_exactly(engine: Engine) -> None:
    customer_id = _customer(engine)
    with engine.begin() as connection:
        for amount in (MAX_NANO - 10, 10):
            record_credit_change(
                connection, customer_id=customer_id, kind=LedgerEntryKind.GRANT, amount_nano=amount
            )
    assert _balance_and_ledger_sum(engine, customer_id) == (MAX_NANO, MAX_NANO)


def test_a_ledger_page_is_read_newest_first_from_an_index_without_sorting_the_customers_rows(
    postgresql_database_url: str,
) -> None:
    """A usage flush adds a ledger row per customer every few seconds: a page (newest first, from
    `before_id` down) must not read and sort them all (PostgreSQL's plan, with the table's
    statistics)."""
    engine = create_database_engine(postgresql_database_url)
    migrate.upgrade(engine)
    customer_id = _customer(engine)
    other = _customer(engine, "b@example.com")
    rows = [
        {"customer_id": owner, "kind": "usage", "amount_nano": -1, "balance_after_nano": 0}
        for owner in [customer_id] * 20_000 + [other] * 20_000
    ]
    with engine.begin() as connection:
        connection.execute(credit_ledger.insert(), rows)
        connection.execute(text("ANALYZE credit_ledger"))
        newest = connection.execute(select(func.max(credit_ledger.c.id))).scalar_one()
        executed: list[tuple[str, Any]] = []

        def capture(*args: Any) -> None:
            executed.append((args[2], args[3]))  # the statement and its parameters, as sent

        event.listen(connection, "before_cursor_execute", capture)
        assert len(ledger_lines(connection, customer_id, limit=50, before_id=newest)) == 50
        event.remove(connection, "before_cursor_execute", capture)
        [(statement, parameters)] = executed
        explained = connection.exec_driver_sql("EXPLAIN " + statement, parameters)
        plan = "\n".join(row[0] for row in explained)
    engine.dispose()
    assert "ix_credit_ledger_customer_id" in plan, plan
    assert "Sort" not in plan, plan
