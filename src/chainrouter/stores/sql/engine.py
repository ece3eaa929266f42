"""Engine creation for both backends; the only place that knows their connection quirks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

SQLITE_BUSY_TIMEOUT_MS = 5000


def normalise_database_url(url: str | URL) -> URL:
    """Accept the URLs people write (`postgresql://`, `postgres://`); use the psycopg 3 driver."""
    parsed = make_url(url) if isinstance(url, str) else url
    if parsed.drivername in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def _configure_sqlite_connection(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets readers proceed while one writer commits; foreign keys are off by default in SQLite.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def create_database_engine(url: str | URL) -> Engine:
    parsed = normalise_database_url(url)
    if is_sqlite(parsed):
        engine = create_engine(parsed)
        event.listen(engine, "connect", _configure_sqlite_connection)
        return engine
    return create_engine(parsed, pool_pre_ping=True)


@contextmanager
def read_snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection whose reads all see the database as it was at the first of them, however
    many commits land meanwhile; for answers built from several statements that must agree.

    PostgreSQL's default READ COMMITTED takes a new snapshot per statement, so the transaction is
    REPEATABLE READ (read only: nothing here writes). pysqlite begins a transaction only before
    a write, so each read would be its own; an explicit (deferred) BEGIN makes the first read
    fix one WAL snapshot for the rest. Either statement must be the transaction's first.
    """
    with engine.connect() as connection, connection.begin():
        if connection.dialect.name == "sqlite":
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield connection


def describe_database(url: str | URL) -> str:
    """The URL for messages and logs, with any password masked."""
    return normalise_database_url(url).render_as_string(hide_password=True)


def database_away(exc: BaseException) -> bool:
    """Whether a failed statement may well succeed later as it is: the database is unreachable,
    busy or restarting. Anything else (a constraint, a value out of range, a bug) would fail
    again."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        exc, OperationalError | InterfaceError | DisconnectionError | PoolTimeoutError
    )
