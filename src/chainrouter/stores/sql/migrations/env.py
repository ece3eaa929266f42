"""Alembic environment: the connection comes from `chainrouter.stores.sql.migrate`."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import Connection

from chainrouter.stores.sql.schema import UtcDateTime, metadata


def _render_item(kind: str, item: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Write the storage type of our own column types, so migrations never import schema.py."""
    if kind == "type" and isinstance(item, UtcDateTime):
        return "sa.DateTime()"
    return False


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite cannot ALTER most things in place; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `chainrouter migrate`, which supplies a connection")
_run(connection)
