"""Prices set with notice (stores/sql/plans.py): a dearer price is stored beside the one charged
until its notice ends; routers load the price a row charges now, and know when the next one
applies (stores/sql/snapshot.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, insert

from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.stores.sql.plans import upsert_methods
from chainrouter.stores.sql.schema import utcnow
from chainrouter.stores.sql.snapshot import load_route_table, next_price_at

DAY = 24 * 3600.0


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = create_database_engine(f"sqlite:///{tmp_path / 'prices.db'}")
    migrate.upgrade(made)
    now = utcnow()
    with made.begin() as connection:
        connection.execute(
            insert(t.providers).values(id=1, slug="p", name="P", created_at=now, updated_at=now)
        )
        connection.execute(
            insert(t.plans).values(id=1, provider_id=1, name="plan", created_at=now, updated_at=now)
        )
    yield made
    made.dispose()


def _row(cost_nano: int) -> dict[str, object]:
    return {
        "plan_id": 1,
        "method": "eth_call",
        "vm": "evm",
        "node_target_type": "full",
        "cost_nano": cost_nano,
        "rate_limit": None,
        "rate_limit_interval_sec": None,
        "chain_id": None,
    }


def _charged(engine: Engine) -> list[int]:
    with engine.connect() as connection:
        table = load_route_table(connection)
    return sorted(price.cost_nano for price in table.prices.values())


def test_a_dearer_price_applies_once_its_notice_has_run(engine: Engine) -> None:
    with engine.begin() as connection:
        upsert_methods(connection, [_row(100)], notice_s=DAY)
        upsert_methods(connection, [_row(500)], notice_s=DAY)
    assert _charged(engine) == [100]  # the old price holds
    with engine.connect() as connection:
        due = next_price_at(connection)
    assert due is not None
    assert abs((due - utcnow()).total_seconds() - DAY) < 60
    with engine.begin() as connection:  # as if raised two days ago: its notice has run
        upsert_methods(connection, [_row(100)])
        upsert_methods(connection, [_row(500)], notice_s=DAY, now=utcnow() - timedelta(days=2))
    assert _charged(engine) == [500]
    with engine.connect() as connection:
        assert next_price_at(connection) is None
