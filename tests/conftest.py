"""Shared fixtures: real databases (a SQLite file and a PostgreSQL server) and migrated engines.

Every test that takes `database_url` or `engine` runs once per backend. PostgreSQL comes from
CHAINROUTER_TEST_POSTGRES_URL (default: the local server at 127.0.0.1:5432); each test gets a
database of its own, dropped afterwards. If the server is unreachable these tests fail: both
backends are first-class, so a missing one is never skipped silently.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import REPO_ROOT, AnvilNodes, start_anvil_nodes
from tests.tls_nodes import MiningNode, Tls, make_tls, start_mining_anvil

__all__ = ["REPO_ROOT"]

POSTGRES_ADMIN_URL = os.environ.get(
    "CHAINROUTER_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"
CHAINS_JSON = SHARED_DIR / "data" / "chains.json"


@pytest.fixture(autouse=True)
def _no_chainrouter_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests decide their own settings; variables of the developer's shell must not leak in."""
    for name in list(os.environ):
        if name.startswith("CHAINROUTER_") and not name.startswith("CHAINROUTER_TEST_"):
            monkeypatch.delenv(name)


@pytest.fixture
def postgresql_database_url() -> Iterator[str]:
    name = f"chainrouter_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture
def sqlite_database_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'chainrouter.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    backend = request.param
    url: str = request.getfixturevalue(f"{backend}_database_url")
    return url


@pytest.fixture
def empty_engine(database_url: str) -> Iterator[Engine]:
    engine = create_database_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def engine(empty_engine: Engine) -> Engine:
    migrate.upgrade(empty_engine)
    return empty_engine


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def anvil() -> Iterator[AnvilNodes]:
    """Three real anvil nodes for the whole run: a1 and a2 on chain 31337, b1 on 31338."""
    yield from start_anvil_nodes()


@pytest.fixture(scope="session")
def upstream_server() -> Iterator[FaultyUpstream]:
    """One fault-injecting upstream for the whole run."""
    with FaultyUpstream() as server:
        yield server


@pytest.fixture
def upstream(upstream_server: FaultyUpstream) -> FaultyUpstream:
    """The fault-injecting upstream with its counts, downed and held paths cleared for this
    test: a test run once per driver or backend sees only its own requests."""
    upstream_server.requests.clear()
    upstream_server.down.clear()
    upstream_server.held.clear()
    return upstream_server


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    """A private CA and a server certificate for localhost and 127.0.0.1."""
    return make_tls(tmp_path_factory)


@pytest.fixture(scope="session")
def mining_anvil(tls: Tls) -> Iterator[MiningNode]:
    yield from start_mining_anvil(tls)
