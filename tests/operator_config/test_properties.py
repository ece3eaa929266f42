"""Properties of the operator file: any input is either accepted or refused with path-named
problems (never a crash), and any valid file applied twice changes nothing the second time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import ConfigFileError, parse_yaml, validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from tests.operator_config.test_apply import _snapshot

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.decimals(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
known_keys = st.sampled_from(
    [
        "chains",
        "providers",
        "customers",
        "version",
        "slug",
        "name",
        "plans",
        "methods",
        "method",
        "cost",
        "nodes",
        "url",
        "chain_id",
        "email",
        "api_keys",
        "allowed_domains",
        "secret",
        "credits",
        "amount",
        "reference",
        "native_currency",
        "short_name",
        "status",
        "role",
    ]
)
documents = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(known_keys | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


def _problems(check: Callable[[Any], object], value: Any) -> list[str] | None:
    """The problems `check` reports for `value`, or None when it accepts it."""
    try:
        check(value)
    except ConfigFileError as exc:
        return exc.problems
    return None


@settings(max_examples=400)
@given(documents)
def test_any_document_is_accepted_or_refused_with_named_problems(document: Any) -> None:
    problems = _problems(validate_document, document)
    if problems is not None:
        assert problems
        assert all(": " in problem for problem in problems)


@settings(max_examples=300)
@given(st.text(max_size=200))
def test_any_text_parses_as_yaml_or_is_refused_as_such(text: str) -> None:
    problems = _problems(parse_yaml, text)
    if problems is not None:
        assert problems[0].startswith("(document): not valid YAML")


prices = st.decimals(min_value=0, max_value=100, places=9, allow_nan=False, allow_infinity=False)
names = st.text(alphabet="abcdefghij", min_size=1, max_size=6)


@st.composite
def valid_files(draw: st.DrawFn) -> dict[str, Any]:
    chain_ids = draw(st.lists(st.integers(1, 10**6), min_size=1, max_size=3, unique=True))
    providers = []
    for p, slug in enumerate(draw(st.lists(names, min_size=1, max_size=2, unique=True))):
        plans = []
        for q, plan_name in enumerate(draw(st.lists(names, max_size=2, unique=True))):
            methods = [
                {
                    "method": m,
                    "cost": f"{draw(prices):f}",
                    "chain_id": draw(st.sampled_from([None, *chain_ids])),
                }
                for m in draw(st.lists(names, max_size=3, unique=True))
            ]
            nodes = [
                {
                    "url": f"https://n{p}-{q}-{i}.example",
                    "chain_id": draw(st.sampled_from(chain_ids)),
                }
                for i in range(draw(st.integers(0, 3)))
            ]
            plans.append({"name": plan_name, "methods": methods, "nodes": nodes})
        providers.append({"slug": slug, "name": slug.upper(), "plans": plans})
    customers = [
        {
            "email": f"{local}@example.com",
            "name": local,
            "credits": [
                {"reference": r, "amount": f"{draw(prices) + 1:f}"}
                for r in draw(st.lists(names, max_size=2, unique=True))
            ],
            "api_keys": [
                {"name": k, "allowed_domains": ["*"]}
                for k in draw(st.lists(names, max_size=2, unique=True))
            ],
            "management_tokens": [
                {"label": k} for k in draw(st.lists(names, max_size=1, unique=True))
            ],
        }
        for local in draw(st.lists(names, max_size=2, unique=True))
    ]
    chains = [
        {
            "chain_id": c,
            "name": f"Chain {c}",
            "short_name": f"c{c}",
            "native_currency": {"name": "E", "symbol": "E"},
        }
        for c in chain_ids
    ]
    return {"chains": chains, "providers": providers, "customers": customers}


@pytest.fixture(scope="module")
def shared_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("apply-properties")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(valid_files())
def test_any_valid_file_applied_twice_changes_nothing_the_second_time(
    shared_sqlite: Path, document: dict[str, Any]
) -> None:
    database = shared_sqlite / f"db{abs(hash(repr(document)))}.sqlite"
    engine: Engine = create_database_engine(f"sqlite:///{database}")
    try:
        migrate.upgrade(engine)
        config = validate_document(document)
        apply_config(engine, config)
        before = _snapshot(engine)
        second = apply_config(engine, config)
        assert not second.changed
        assert second.generated == []
        assert _snapshot(engine) == before
    finally:
        engine.dispose()
        database.unlink(missing_ok=True)
