"""Alembic environment: the connection comes from `chainrouter.stores.sql.migrate`."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from chainrouter.stores.sql.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `chainrouter migrate`, which supplies a connection")
_run(connection)
