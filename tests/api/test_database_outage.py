"""The management API while PostgreSQL is away (docs/deployment.md, "Outages"): every call that
needs the database gets 503 `database_unavailable` with Retry-After, nothing half-written; once
the database is back the same write succeeds, and is there once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, make_url, select

from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.api.conftest import make_harness
from tests.tcp_gate import TcpGate


@pytest.fixture
def gated(postgresql_database_url: str) -> Iterator[tuple[Engine, TcpGate]]:
    """An engine on a fresh PostgreSQL database, reached through a gate the test can shut."""
    real = make_url(postgresql_database_url)
    gate = TcpGate(real.port or 5432)
    engine = create_database_engine(real.set(host="127.0.0.1", port=gate.port))
    migrate.upgrade(engine)
    yield engine, gate
    gate.shut()
    engine.dispose()


def test_a_write_while_postgresql_is_away_is_503_and_lands_once_when_it_returns(
    gated: tuple[Engine, TcpGate],
) -> None:
    engine, gate = gated
    api = make_harness(engine)
    customer = {"name": "Late Ltd", "email": "late@example.com"}
    with api.client:
        gate.shut()
        refused = api.client.post("/admin/customers", json=customer, headers=api.admin)
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "database_unavailable"
        assert refused.headers["retry-after"] == "5"
        assert api.client.get("/admin/customers", headers=api.admin).status_code == 503
        gate.open()
        made = api.client.post("/admin/customers", json=customer, headers=api.admin)
        assert made.status_code == 201, made.text
    with engine.connect() as connection:
        count = connection.execute(
            select(func.count()).where(t.customers.c.email == customer["email"])
        ).scalar_one()
    assert count == 1
