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
    "usage_flushes",
    "usage_hourly_totals",
    "plan_hourly_usage",
    "ws_nodes",
    "ws_node_health",
    # Buying credits (migration 0016).
    "card_payments",
    "deposit_addresses",
    "deposit_assets",
    "deposit_cursors",
    "deposits",
    "payment_settings",
    # What audits and proofs found of each node (migration 0022).
    "node_checks",
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


def test_the_usage_roll_ups_are_filled_from_usage_written_before_them(
    empty_engine: Engine,
) -> None:
    from datetime import datetime

    from sqlalchemy import text

    migrate.upgrade(empty_engine, "0002")
    hours = [datetime(2026, 5, 1, 10), datetime(2026, 5, 1, 11), datetime(2026, 5, 2, 3)]
    with empty_engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO customers (id, name, email, balance_nano, created_at, updated_at) "
                "VALUES (1, 'c', 'c@x.io', 0, :t, :t)"
            ),
            {"t": hours[0]},
        )
        connection.execute(
            text(
                "INSERT INTO api_keys (id, customer_id, name, key_hash, key_hint, allowed_domains,"
                " routing_strategy, active, bypass_credit_check, created_at, updated_at) VALUES"
                " (1, 1, 'k', 'h', 'crk_...x', '[\"*\"]', 'economy', true, false, :t, :t)"
            ),
            {"t": hours[0]},
        )
        for hour in hours:
            connection.execute(
                text(
                    "INSERT INTO usage_aggregates (customer_id, api_key_id, chain_id, method,"
                    " scenario, bucket_start, request_count, credits_nano) VALUES"
                    " (1, 1, 1, 'eth_call', 'first_choice', :h, 2, 600)"
                ),
                {"h": hour},
            )
    migrate.upgrade(empty_engine)
    with empty_engine.connect() as connection:
        daily = connection.execute(
            text("SELECT day, request_count, credits_nano FROM usage_daily ORDER BY day")
        ).all()
        totals = connection.execute(
            text("SELECT count(*), sum(request_count) FROM usage_hourly_totals")
        ).one()
    # PostgreSQL returns timestamps, SQLite the text SQLAlchemy stored.
    assert [(str(day)[:10], n, c) for day, n, c in daily] == [
        ("2026-05-01", 4, 1200),
        ("2026-05-02", 2, 600),
    ]
    assert tuple(totals) == (3, 6)


def _respelled_nodes(
    engine: Engine, count: int, spellings: dict[str, str], back_to: str
) -> set[str]:
    """Nodes `https://n{i}.example/` stored by today's code, their URLs then spelled as
    `spellings` says (as an older version stored them), the schema taken back to `back_to` and
    upgraded again: the URLs stored after."""
    from sqlalchemy import select, update

    from chainrouter.operator_config.apply import apply_config
    from chainrouter.operator_config.load import validate_document
    from chainrouter.stores.sql import schema as t

    migrate.upgrade(engine)
    nodes = [{"url": f"https://n{i}.example/", "chain_id": 1} for i in range(count)]
    chain = {
        "chain_id": 1,
        "name": "One",
        "short_name": "one",
        "native_currency": {"name": "Ether", "symbol": "ETH"},
    }
    plans = [{"name": "a", "nodes": nodes}]
    document = {
        "version": 1,
        "chains": [chain],
        "providers": [{"slug": "p", "name": "P", "plans": plans}],
    }
    apply_config(engine, validate_document(document))
    with engine.begin() as connection:
        for now, before in spellings.items():
            connection.execute(update(t.nodes).where(t.nodes.c.url == now).values(url=before))
    migrate.downgrade(engine, back_to)
    migrate.upgrade(engine)
    with engine.connect() as connection:
        return set(connection.execute(select(t.nodes.c.url)).scalars())


def test_node_urls_stored_before_are_put_in_their_one_spelling(empty_engine: Engine) -> None:
    old = {
        "https://n0.example/": "HTTPS://N0.Example:443",
        "https://n1.example/": "https://n1.example:443/%7eold",
        "https://n2.example/": "https://N0.example",  # n0's spelling: a collision
    }
    urls = _respelled_nodes(empty_engine, 3, old, "0004")
    assert urls == {"https://n0.example/", "https://n1.example/~old", "https://N0.example"}


def test_node_urls_stored_before_are_put_in_the_spelling_the_client_dials(
    empty_engine: Engine,
) -> None:
    old = {
        "https://n0.example/": "https://[::ffff:10.0.0.1]/v1/./",
        "https://n1.example/": "https://n1.example./a/../",
        "https://n2.example/": "https://10.0.0.1/v1/",  # n0's new form: a collision
        "https://n3.example/": "https://a..b/",  # no host name: kept
    }
    urls = _respelled_nodes(empty_engine, 4, old, "0011")
    assert urls == {
        "https://[::ffff:10.0.0.1]/v1/./",  # its form belongs to the row after it
        "https://n1.example/",
        "https://10.0.0.1/v1/",
        "https://a..b/",
    }


def test_node_urls_stored_before_with_a_short_ipv4_host_are_stored_dotted(
    empty_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    old = {
        "https://n0.example/": "http://127.1:8545/",
        "https://n1.example/": "https://user:pw@0x0a.0.0.1/v1?k=1",
        "https://n2.example/": "https://10.1/v1?k=1",  # n1's host, without its user: its own
        "https://n3.example/": "https://167772161/v1",  # 10.0.0.1 as one number
        "https://n4.example/": "https://10.0.0.1/v1",  # n3's new form: n3 is kept
        "https://n5.example/": "https://a b.example/",  # no host name now: kept, with a warning
        "https://n6.example/": "https://[2001:db8::1]:8545/",
    }
    urls = _respelled_nodes(empty_engine, 7, old, "0014")
    assert urls == {
        "http://127.0.0.1:8545/",
        "https://user:pw@10.0.0.1/v1?k=1",
        "https://10.0.0.1/v1?k=1",
        "https://167772161/v1",
        "https://10.0.0.1/v1",
        "https://a b.example/",
        "https://[2001:db8::1]:8545/",
    }
    kept = sorted(r.getMessage() for r in caplog.records if "keeps its URL" in r.getMessage())
    assert kept == [
        "nodes row 4 keeps its URL: another row has its form",
        "nodes row 6 keeps its URL: its host is no host name",
    ]
