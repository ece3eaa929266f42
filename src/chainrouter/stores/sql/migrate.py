"""Schema migrations (Alembic) for both backends, driven from code rather than an ini file."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

_MIGRATIONS_DIR = Path(__file__).with_name("migrations")


class SchemaNotCurrentError(Exception):
    """The database is not at the schema this code expects; the message says what to run."""


def _config(engine: Engine | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS_DIR))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


def _with_connection(engine: Engine, action: str, revision: str) -> None:
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        if action == "upgrade":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)


def upgrade(engine: Engine, revision: str = "head") -> None:
    _with_connection(engine, "upgrade", revision)


def downgrade(engine: Engine, revision: str) -> None:
    _with_connection(engine, "downgrade", revision)


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def require_current_schema(engine: Engine) -> None:
    current = current_revision(engine)
    head = head_revision()
    if current != head:
        state = "empty" if current is None else f"at revision {current}"
        raise SchemaNotCurrentError(
            f"the database schema is {state}, this version needs {head}: run `chainrouter migrate`"
        )


def create_revision(engine: Engine, message: str) -> None:
    """Write a new migration: the difference between schema.py and the migrations so far.

    `engine` should point at a scratch database; it is brought to head first.
    """
    upgrade(engine)
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)
