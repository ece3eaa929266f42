"""The configuration version moves with every change routers cache, and only then."""

from __future__ import annotations

from sqlalchemy import Engine

from chainrouter.catalog.importer import import_catalog
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import load_config_file
from chainrouter.stores.sql.config_version import bump_config_version, read_config_version
from tests.conftest import CHAINS_JSON
from tests.operator_config.test_load import EXAMPLE


def _version(engine: Engine) -> int:
    with engine.connect() as connection:
        return read_config_version(connection)


def test_a_fresh_database_starts_at_version_zero_and_bumps_count_up(engine: Engine) -> None:
    assert _version(engine) == 0
    with engine.begin() as connection:
        assert bump_config_version(connection) == 1
        assert bump_config_version(connection) == 2
    assert _version(engine) == 2


def test_apply_bumps_the_version_when_it_changes_something_and_not_otherwise(
    engine: Engine,
) -> None:
    config = load_config_file(EXAMPLE)
    apply_config(engine, config, dry_run=True)
    assert _version(engine) == 0
    apply_config(engine, config)
    assert _version(engine) == 1
    apply_config(engine, config)
    assert _version(engine) == 1


def test_a_catalog_import_bumps_the_version_only_when_chains_change(engine: Engine) -> None:
    import_catalog(engine, str(CHAINS_JSON), max_bytes=10**8, timeout_s=10)
    assert _version(engine) == 1
    import_catalog(engine, str(CHAINS_JSON), max_bytes=10**8, timeout_s=10)
    assert _version(engine) == 1
