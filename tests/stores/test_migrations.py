"""Migrations build the schema on both backends, take it down again, and agree with schema.py."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.schema import metadata

EXPECTED_TABLES = {
    "api_keys",
    "chain_requests",
    "chains",
    "config_version",
    "credit_ledger",
    "customers",
    "management_tokens",
    "node_requests",
    "node_health",
    "nodes",
    "plan_methods",
    "plans",
    "provider_customers",
    "providers",
    "usage_aggregates",
    "usage_daily",
    "usage_hourly_totals",
    "ws_nodes",
}


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_upgrade_creates_every_table_and_records_the_head_revision(empty_engine: Engine) -> None:
    assert migrate.current_revision(empty_engine) is None
    migrate.upgrade(empty_engine)
    assert _tables(empty_engine) == EXPECTED_TABLES == set(metadata.tables)
    assert migrate.current_revision(empty_engine) == migrate.head_revision()


def test_downgrade_to_base_removes_everything_and_upgrade_works_again(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)
    migrate.downgrade(empty_engine, "base")
    assert _tables(empty_engine) == set()
    assert migrate.current_revision(empty_engine) is None
    migrate.upgrade(empty_engine)
    assert _tables(empty_engine) == EXPECTED_TABLES


def test_migrated_database_matches_the_schema_module(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, metadata)
    assert differences == []


def test_an_unmigrated_database_is_reported_with_the_command_to_run(empty_engine: Engine) -> None:
    with pytest.raises(migrate.SchemaNotCurrentError, match="run `chainrouter migrate`"):
        migrate.require_current_schema(empty_engine)
