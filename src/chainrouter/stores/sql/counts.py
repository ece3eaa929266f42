"""Adding counts to rows that may already exist: one statement, safe under concurrent writers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def add_counts(
    connection: Connection, table: Table, key_columns: Sequence[str], rows: list[dict[str, Any]]
) -> None:
    """Insert the rows, or add their `request_count` and `credits_nano` to the rows there.
    Callers pass rows sorted by key, so that concurrent writers lock in the same order (no
    deadlock on PostgreSQL), and at most one row per key."""
    insert = (
        postgresql.insert(table)
        if connection.dialect.name == "postgresql"
        else sqlite.insert(table)
    )
    statement = insert.on_conflict_do_update(
        index_elements=list(key_columns),
        set_={
            "request_count": table.c.request_count + insert.excluded.request_count,
            "credits_nano": table.c.credits_nano + insert.excluded.credits_nano,
        },
    )
    connection.execute(statement, rows)
