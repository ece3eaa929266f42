"""The configuration version: how routers learn, cheaply, that what they cache has changed."""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from chainrouter.stores.sql.schema import config_version, utcnow


def bump_config_version(connection: Connection) -> int:
    """Record a change of cached configuration (in the caller's transaction); return the version."""
    return int(
        connection.execute(
            update(config_version)
            .where(config_version.c.id == 1)
            .values(version=config_version.c.version + 1, changed_at=utcnow())
            .returning(config_version.c.version)
        ).scalar_one()
    )


def read_config_version(connection: Connection) -> int:
    return int(
        connection.execute(
            select(config_version.c.version).where(config_version.c.id == 1)
        ).scalar_one()
    )
