"""`chainrouter apply`: creates and updates what the file declares, all or nothing, idempotently,
and keeps only hashes of secrets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select

from chainrouter.domain.credentials import SecretKind, hash_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import (
    ConfigFileError,
    load_config_file,
    parse_yaml,
    validate_document,
)
from chainrouter.operator_config.model import OperatorConfig
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.plans import upsert_methods
from chainrouter.stores.sql.schema import utcnow
from chainrouter.stores.sql.snapshot import load_route_table
from tests.operator_config.test_load import EXAMPLE

DAY = 24 * 3600.0


def _config(text: str) -> OperatorConfig:
    return validate_document(parse_yaml(text))


def _snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, in a stable order: what 'nothing changed' is checked against."""
    with engine.connect() as connection:
        return {
            name: sorted((tuple(row) for row in connection.execute(select(table))), key=repr)
            for name, table in t.metadata.tables.items()
        }


def _all_text(engine: Engine) -> str:
    return repr(_snapshot(engine))


@pytest.fixture
def example() -> OperatorConfig:
    return load_config_file(EXAMPLE)


def test_the_example_creates_every_declared_resource(
    engine: Engine, example: OperatorConfig
) -> None:
    report = apply_config(engine, example)
    assert report.count("chains", "created") == 2
    assert report.count("providers", "created") == 2
    assert report.count("plans", "created") == 2
    assert report.count("plan methods", "created") == 6
    assert report.count("nodes", "created") == 3
    assert report.count("websocket nodes", "created") == 1
    assert report.count("customers", "created") == 3
    assert report.count("api keys", "created") == 2
    assert report.count("management tokens", "created") == 3
    assert report.count("credit entries", "created") == 1
    assert report.count("provider links", "created") == 1
    with engine.connect() as connection:
        cheaper = connection.execute(
            select(t.plan_methods.c.cost_nano).where(
                t.plan_methods.c.method == "eth_call", t.plan_methods.c.chain_id == 31338
            )
        ).scalar_one()
        assert cheaper == 400  # 0.0000004 credits, exactly
        balance = connection.execute(
            select(t.customers.c.balance_nano).where(t.customers.c.email == "dev@example.com")
        ).scalar_one()
        assert balance == 25 * 10**9
        admin_role = connection.execute(
            select(t.management_tokens.c.role).where(t.management_tokens.c.label == "ops-admin")
        ).scalar_one()
        assert admin_role == "administrator"
        strategies = dict(
            connection.execute(select(t.api_keys.c.name, t.api_keys.c.routing_strategy)).all()
        )
        assert strategies == {"demo": "economy", "dashboard": "performance"}


def test_generated_secrets_are_returned_once_and_only_their_hashes_stored(
    engine: Engine, example: OperatorConfig
) -> None:
    report = apply_config(engine, example)
    assert len(report.generated) == 5
    stored = _all_text(engine)
    for item in report.generated:
        assert item.secret not in stored
        assert hash_secret(item.secret) in stored
    keys = [g for g in report.generated if g.kind is SecretKind.API_KEY]
    assert {g.name for g in keys} == {"demo", "dashboard"}
    assert all(g.secret.startswith("crk_") for g in keys)
    # Applying again keeps the secrets already issued: nothing new is generated.
    assert apply_config(engine, example).generated == []


def test_applying_the_same_file_again_changes_nothing(
    engine: Engine, example: OperatorConfig
) -> None:
    apply_config(engine, example)
    before = _snapshot(engine)
    report = apply_config(engine, example)
    assert not report.changed
    assert _snapshot(engine) == before


def test_a_changed_file_updates_in_place(engine: Engine) -> None:
    base = """
chains:
  - {chain_id: 5, name: Five, short_name: five, native_currency: {name: E, symbol: E}}
providers:
  - slug: acme
    name: Acme
    plans:
      - name: basic
        methods: [{method: eth_call, cost: "0.000001"}]
        nodes: [{url: "https://node.example/rpc", chain_id: 5}]
customers:
  - email: c@example.com
    name: C
    api_keys: [{name: k, allowed_domains: ["*"]}]
"""
    apply_config(engine, _config(base))
    changed = base.replace('cost: "0.000001"', 'cost: "0.000002"').replace(
        'allowed_domains: ["*"]', "allowed_domains: [app.example.com], active: false"
    )
    report = apply_config(engine, _config(changed))
    assert report.count("plan methods", "updated") == 1
    assert report.count("api keys", "updated") == 1
    assert report.count("nodes", "unchanged") == 1
    with engine.connect() as connection:
        assert connection.execute(select(t.plan_methods.c.cost_nano)).scalar_one() == 2000
        key = connection.execute(select(t.api_keys)).one()
        assert (key.allowed_domains, key.active) == (["app.example.com"], False)
        assert connection.execute(select(t.plan_methods)).all().__len__() == 1


def test_an_invalid_reference_applies_nothing_and_names_every_path(
    engine: Engine, example: OperatorConfig
) -> None:
    apply_config(engine, example)
    before = _snapshot(engine)
    bad = _config(
        """
providers:
  - slug: acme-nodes
    name: Renamed Acme
    plans:
      - name: standard
        methods: [{method: eth_call, cost: 1, chain_id: 999999999}]
        nodes: [{url: "https://new.example", chain_id: 31337}]
customers:
  - email: new@example.com
    name: New
    provider: nobody
  - email: dev@example.com
    name: Demo Developer
    credits: [{reference: welcome-2026, kind: grant, amount: 50}]
"""
    )
    with pytest.raises(ConfigFileError) as caught:
        apply_config(engine, bad)
    assert caught.value.problems == [
        "providers[0].plans[0].methods[0].chain_id: chain 999999999 is not in the catalog; "
        "declare it under `chains` or run `chainrouter chains import`",
        "customers[0].provider: no provider with slug 'nobody'",
        "customers[1].credits[0]: reference 'welcome-2026' was already applied as a grant of 25 "
        "credits; ledger entries never change, use a new reference for a new entry",
    ]
    assert _snapshot(engine) == before


def test_credits_that_would_overflow_the_balance_are_refused_and_nothing_is_written(
    engine: Engine,
) -> None:
    apply_config(
        engine,
        _config(
            "customers: [{email: a@example.com, name: A, "
            "credits: [{reference: r1, kind: grant, amount: 5000000000}]}]"
        ),
    )
    before = _snapshot(engine)
    with pytest.raises(ConfigFileError) as caught:
        apply_config(
            engine,
            _config(
                "customers: [{email: a@example.com, name: B, credits: ["
                "{reference: r1, kind: grant, amount: 5000000000}, "
                "{reference: r2, kind: grant, amount: 5000000000}]}]"
            ),
        )
    [problem] = caught.value.problems
    assert problem.startswith("customers[0].credits[1].amount: would take the balance beyond")
    assert _snapshot(engine) == before


def test_control_characters_are_refused_at_their_path_but_free_text_keeps_its_layout(
    engine: Engine,
) -> None:
    """PostgreSQL text cannot hold NUL, which SQLite stores: a name "a\0b" made `apply` fail with
    a DataError there. Every string refuses control characters when the file is validated; a
    description may still hold tabs and line breaks."""
    text = r"""
chains:
  - {chain_id: 5, name: "Fi\0ve", short_name: five, native_currency: {name: E, symbol: "E\x7f"}}
providers:
  - slug: "acme\n"
    name: "Ac\x00me"
    plans:
      - name: basic
        description: "line one\nline two,\ttabbed\r\n"
        nodes: [{url: "https://node.example/r\0pc", chain_id: 5}]
customers:
  - email: "c\0@example.com"
    name: C
    credits: [{reference: "r\x07", amount: 1, note: "a\0"}]
    api_keys: [{name: "k\n", allowed_domains: ["*"]}]
    management_tokens: [{label: "t\x1b"}]
"""
    with pytest.raises(ConfigFileError) as caught:
        _config(text)
    assert caught.value.problems == [
        "chains[0].name: must not contain control characters",
        "chains[0].native_currency.symbol: must not contain control characters",
        "providers[0].slug: must be lowercase letters, digits and '-', at most 64 characters",
        "providers[0].name: must not contain control characters",
        "providers[0].plans[0].nodes[0].url: must not contain control characters",
        "customers[0].email: must not contain control characters",
        "customers[0].credits[0].reference: must not contain control characters",
        "customers[0].credits[0].note: must not contain control characters other than tab and "
        "line breaks",
        "customers[0].api_keys[0].name: must not contain control characters",
        "customers[0].management_tokens[0].label: must not contain control characters",
    ]

    layout = "line one\nline two,\ttabbed\r\n"
    apply_config(
        engine,
        _config(
            'providers: [{slug: acme, name: Acme, plans: [{name: basic, description: "'
            + layout.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
            + '"}]}]'
        ),
    )
    with engine.connect() as connection:
        assert connection.execute(select(t.plans.c.description)).scalar_one() == layout


def test_node_urls_must_fit_their_column_once_normalised(engine: Engine) -> None:
    """The normal form percent-encodes the path: 1,522 characters as written became 9,022, past
    the 2,048 the column holds (PostgreSQL refused the row, SQLite stored it). The length is
    checked on the normal form; one that fits is stored as it is."""

    def plan(url: str, ws_url: str) -> str:
        return f"""
chains: [{{chain_id: 7, name: C, short_name: c, native_currency: {{name: E, symbol: E}}}}]
providers:
  - slug: p
    name: P
    plans:
      - name: basic
        nodes: [{{url: "{url}", chain_id: 7}}]
        ws_nodes: [{{url: "{ws_url}", chain_id: 7}}]
"""

    with pytest.raises(ConfigFileError) as caught:
        _config(plan("https://n.example.com/" + "ü" * 1500, "wss://n.example.com/" + "ü" * 1500))
    assert caught.value.problems == [
        f"providers[0].plans[0].{kind}[0].url: must be a URL of at most 2048 characters"
        for kind in ("nodes", "ws_nodes")
    ]

    longest = "https://n.example.com/" + "%C3%BC" * 337 + "abcd"
    assert len(longest) == 2048
    apply_config(engine, _config(plan(longest.replace("%C3%BC", "ü"), "wss://n.example.com/")))
    with engine.connect() as connection:
        assert connection.execute(select(t.nodes.c.url)).scalar_one() == longest


def test_a_secret_already_used_elsewhere_is_refused_without_echoing_it(engine: Engine) -> None:
    secret = "crk_" + "Q" * 40
    first = f"""
customers:
  - email: a@example.com
    name: A
    api_keys: [{{name: k, allowed_domains: ["*"], secret: {secret}}}]
"""
    apply_config(engine, _config(first))
    second = first.replace("a@example.com", "b@example.com")
    with pytest.raises(ConfigFileError) as caught:
        apply_config(engine, _config(second))
    assert caught.value.problems == [
        "customers[0].api_keys[0].secret: already in use by another API key"
    ]
    assert secret not in str(caught.value)


def test_a_given_secret_replaces_the_stored_one(engine: Engine) -> None:
    old, new = "crk_" + "a" * 40, "crk_" + "b" * 40
    text = """
customers:
  - email: a@example.com
    name: A
    api_keys: [{name: k, allowed_domains: ["*"], secret: SECRET}]
"""
    apply_config(engine, _config(text.replace("SECRET", old)))
    report = apply_config(engine, _config(text.replace("SECRET", new)))
    assert report.count("api keys", "updated") == 1
    with engine.connect() as connection:
        key = connection.execute(select(t.api_keys.c.key_hash, t.api_keys.c.key_hint)).one()
    assert key.key_hash == hash_secret(new)
    assert key.key_hint == "crk_...bbbb"


def test_a_dry_run_reports_the_changes_and_writes_nothing(
    engine: Engine, example: OperatorConfig
) -> None:
    before = _snapshot(engine)
    report = apply_config(engine, example, dry_run=True)
    assert report.count("customers", "created") == 3
    assert report.generated == []
    assert _snapshot(engine) == before


def test_a_revoked_token_stays_revoked(engine: Engine) -> None:
    text = """
customers:
  - email: a@example.com
    name: A
    management_tokens: [{label: ops, revoked: REVOKED}]
"""
    apply_config(engine, _config(text.replace("REVOKED", "false")))
    apply_config(engine, _config(text.replace("REVOKED", "true")))
    report = apply_config(engine, _config(text.replace("REVOKED", "false")))
    assert report.warnings == [
        "customers[0].management_tokens[0]: token 'ops' of a@example.com is revoked and stays "
        "revoked; give a new label to issue a new token"
    ]
    with engine.connect() as connection:
        revoked_at = connection.execute(select(t.management_tokens.c.revoked_at)).scalar_one()
    assert revoked_at is not None


def test_chains_already_in_the_catalog_may_be_referenced_without_being_declared(
    engine: Engine,
) -> None:
    apply_config(
        engine,
        _config(
            "chains: [{chain_id: 1, name: Ethereum, short_name: eth, "
            "native_currency: {name: Ether, symbol: ETH}}]"
        ),
    )
    report = apply_config(
        engine,
        _config(
            """
providers:
  - slug: p
    name: P
    plans: [{name: x, nodes: [{url: "https://eth.example", chain_id: 1}]}]
"""
        ),
    )
    assert report.count("nodes", "created") == 1


def test_credits_with_a_new_reference_add_to_the_balance(engine: Engine) -> None:
    text = """
customers:
  - email: a@example.com
    name: A
    credits:
      - {reference: r1, kind: purchase, amount: "10.5"}
"""
    apply_config(engine, _config(text))
    apply_config(engine, _config(text + '      - {reference: r2, amount: "0.000000001"}\n'))
    with engine.connect() as connection:
        balance = connection.execute(select(t.customers.c.balance_nano)).scalar_one()
        kinds = (
            connection.execute(select(t.credit_ledger.c.kind).order_by(t.credit_ledger.c.id))
            .scalars()
            .all()
        )
    assert balance == 10_500_000_001
    assert kinds == ["purchase", "grant"]


_PRICED = """
chains:
  - {chain_id: 5, name: Five, short_name: five, native_currency: {name: E, symbol: E}}
providers:
  - slug: acme
    name: Acme
    plans:
      - name: basic
        methods: [{method: eth_call, cost: "COST"}]
"""


def _provider_raises(engine: Engine, method: str, cost_nano: int, *, days_ago: float = 0) -> None:
    """The provider's own price, through the provider routes' rule: dearer takes a day's notice
    (`days_ago`: as if set that long ago)."""
    with engine.begin() as connection:
        plan_id = connection.execute(select(t.plans.c.id)).scalar_one()
        row = {
            "plan_id": plan_id,
            "method": method,
            "vm": "evm",
            "node_target_type": "full",
            "cost_nano": cost_nano,
            "rate_limit": None,
            "rate_limit_interval_sec": None,
            "chain_id": None,
        }
        upsert_methods(connection, [row], notice_s=DAY, now=utcnow() - timedelta(days=days_ago))


def _prices(engine: Engine) -> dict[str, tuple[int, int | None]]:
    """Per method: (the stored price, the provider's next price)."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                t.plan_methods.c.method, t.plan_methods.c.cost_nano, t.plan_methods.c.next_cost_nano
            )
        ).all()
    return {method: (cost, after) for method, cost, after in rows}


def test_the_file_again_keeps_a_providers_pending_price_and_a_new_price_replaces_it_aloud(
    engine: Engine,
) -> None:
    """The file is the operator's word for the rows it names: a row priced as before keeps the
    price its provider set with notice (the same file changes nothing); a row priced otherwise
    charges the file's price from now, the provider's dropped with a warning; a row the file
    does not name keeps its provider's price."""
    apply_config(engine, _config(_PRICED.replace("COST", "0.000001")))
    _provider_raises(engine, "eth_call", 5_000)
    _provider_raises(engine, "eth_getBalance", 100)  # a row of the provider's own
    _provider_raises(engine, "eth_getBalance", 700)
    again = apply_config(engine, _config(_PRICED.replace("COST", "0.000001")))
    assert not again.changed
    assert again.warnings == []
    assert _prices(engine) == {"eth_call": (1_000, 5_000), "eth_getBalance": (100, 700)}

    repriced = apply_config(engine, _config(_PRICED.replace("COST", "0.000002")))
    assert repriced.count("plan methods", "updated") == 1
    [warning] = repriced.warnings
    assert warning.startswith(
        "provider 'acme', plan 'basic': eth_call (full, chain any): the price its provider set, "
        "0.000005 from "
    )
    assert warning.endswith("is dropped; the file's 0.000002 applies now")
    assert _prices(engine) == {"eth_call": (2_000, None), "eth_getBalance": (100, 700)}


def test_a_new_file_price_replaces_a_providers_price_whose_notice_has_run(engine: Engine) -> None:
    apply_config(engine, _config(_PRICED.replace("COST", "0.000001")))
    _provider_raises(engine, "eth_call", 5_000, days_ago=2)  # charged since yesterday
    with engine.connect() as connection:
        [price] = load_route_table(connection).prices.values()
    assert price.cost_nano == 5_000
    assert not apply_config(engine, _config(_PRICED.replace("COST", "0.000001"))).changed
    report = apply_config(engine, _config(_PRICED.replace("COST", "0.000003")))
    assert "0.000005 since " in report.warnings[0]
    with engine.connect() as connection:
        [price] = load_route_table(connection).prices.values()
    assert price.cost_nano == 3_000
