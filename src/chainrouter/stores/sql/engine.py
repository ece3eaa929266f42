"""Engine creation for both backends; the only place that knows their connection quirks."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url

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


def describe_database(url: str | URL) -> str:
    """The URL for messages and logs, with any password masked."""
    return normalise_database_url(url).render_as_string(hide_password=True)
