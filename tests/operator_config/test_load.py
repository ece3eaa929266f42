"""Reading the operator file: every mistake is reported with its path in the document."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from chainrouter.operator_config.load import (
    ConfigFileError,
    load_config_file,
    parse_yaml,
    validate_document,
)
from chainrouter.operator_config.model import MAX_CHAINS, json_schema
from tests.conftest import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "operator.yaml"


def _problems(text: str) -> list[str]:
    with pytest.raises(ConfigFileError) as caught:
        validate_document(parse_yaml(text))
    return caught.value.problems


PLAN_WITH_METHODS = """
providers:
  - slug: acme
    name: Acme
    plans:
      - name: basic
        methods:
          - {method: eth_call, cost: "0.1"}
          - {method: eth_getLogs, cost: 0}
          - {method: eth_chainId, cost: 0}
          - {method: eth_blockNumber, cost: -1}
"""


def test_the_example_file_is_valid() -> None:
    config = load_config_file(EXAMPLE)
    assert config.providers[0].slug == "acme-nodes"


def test_a_negative_cost_is_reported_at_its_path() -> None:
    assert _problems(PLAN_WITH_METHODS) == ["providers[0].plans[0].methods[3].cost: must be >= 0"]


def test_fractional_yaml_numbers_are_read_exactly_not_as_floats() -> None:
    document = parse_yaml("cost: 0.0000003\nbig: 12345678901.123456789\n")
    assert document == {"cost": Decimal("0.0000003"), "big": Decimal("12345678901.123456789")}
    config = validate_document(
        parse_yaml(PLAN_WITH_METHODS.replace("cost: -1", "cost: 0.000000123"))
    )
    assert config.providers[0].plans[0].methods[3].cost == 123


def test_a_price_finer_than_a_nano_credit_is_refused() -> None:
    problems = _problems(PLAN_WITH_METHODS.replace("cost: -1", "cost: 0.0000000001"))
    assert problems == ["providers[0].plans[0].methods[3].cost: has more than 9 decimal places"]


def test_every_problem_is_reported_not_only_the_first() -> None:
    problems = _problems(
        """
chains:
  - {chain_id: 0, name: X, short_name: x, native_currency: {name: E, symbol: E}}
providers:
  - slug: Bad Slug
    name: ""
customers:
  - email: not-an-email
    name: C
    colour: blue
    api_keys:
      - {name: k, allowed_domains: [], routing_strategy: cheapest}
"""
    )
    assert problems == [
        "chains[0].chain_id: must be >= 1",
        "providers[0].slug: must be lowercase letters, digits and '-', at most 64 characters",
        "providers[0].name: must have at least 1 character(s)",
        "customers[0].email: must be an e-mail address",
        "customers[0].api_keys[0].allowed_domains: must have at least 1 item(s)",
        "customers[0].api_keys[0].routing_strategy: must be one of: 'economy' or 'performance'",
        "customers[0].colour: is not a known field",
    ]


def test_chain_ids_may_be_decimal_or_hex_strings() -> None:
    config = validate_document(
        parse_yaml(
            """
chains:
  - {chain_id: "0x7a69", name: A, short_name: a, native_currency: {name: E, symbol: E}}
  - {chain_id: "10", name: B, short_name: b, native_currency: {name: E, symbol: E}}
"""
        )
    )
    assert [c.chain_id for c in config.chains] == [31337, 10]
    assert _problems(
        "chains:\n  - {chain_id: 'ten', name: A, short_name: a, "
        "native_currency: {name: E, symbol: E}}\n"
    ) == ["chains[0].chain_id: must be a decimal or 0x-prefixed chain ID"]


def test_entries_that_claim_the_same_identity_twice_are_reported() -> None:
    problems = _problems(
        """
providers:
  - slug: acme
    name: Acme
    plans:
      - name: basic
        methods:
          - {method: eth_call, cost: 1}
          - {method: eth_call, cost: 2}
        nodes:
          - {url: "https://a.example", chain_id: 1}
      - name: pro
        nodes:
          - {url: "https://a.example", chain_id: 1}
  - slug: acme
    name: Again
customers:
  - email: a@example.com
    name: A
    api_keys:
      - {name: k, allowed_domains: ["*"], secret: crk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
      - {name: k, allowed_domains: ["*"], secret: crk_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa}
  - email: A@example.com
    name: Same person
"""
    )
    assert problems == [
        "providers[1].slug: duplicate of providers[0].slug",
        "providers[0].plans[0].methods[1]: duplicate of providers[0].plans[0].methods[0]",
        "providers[0].plans[1].nodes[0].url: duplicate of providers[0].plans[0].nodes[0].url",
        "customers[1].email: duplicate of customers[0].email",
        "customers[0].api_keys[1].name: duplicate of customers[0].api_keys[0].name",
        "customers[0].api_keys[1].secret: duplicate of customers[0].api_keys[0].secret",
    ]
    assert not any("crk_aaaa" in p for p in problems), "a secret was echoed in an error"


def test_a_repeated_yaml_key_is_an_error_not_a_silent_override() -> None:
    with pytest.raises(ConfigFileError, match="duplicate key 'cost'"):
        parse_yaml("methods:\n  - method: eth_call\n    cost: 1\n    cost: 2\n")


def test_yaml_syntax_errors_give_the_line() -> None:
    with pytest.raises(ConfigFileError, match="line 2"):
        parse_yaml("providers:\n  - [unclosed\n")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("- just\n- a list\n", "(document): must be a mapping"),
        ("version: 2\n", "version: must be one of: 1"),
    ],
)
def test_the_document_itself_must_be_a_version_1_mapping(text: str, problem: str) -> None:
    assert problem in _problems(text)[0]


def test_an_empty_file_is_a_valid_file_that_declares_nothing() -> None:
    config = validate_document(parse_yaml(""))
    assert (config.chains, config.providers, config.customers) == ([], [], [])


def test_a_missing_or_binary_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="no such file"):
        load_config_file(tmp_path / "absent.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigFileError, match="not UTF-8"):
        load_config_file(binary)


def test_allowed_domains_are_normalised_and_kept_once() -> None:
    config = validate_document(
        parse_yaml(
            "customers:\n  - email: a@b.co\n    name: A\n    api_keys:\n"
            "      - {name: k, allowed_domains: [App.Example.com, app.example.com, '*.x.org']}\n"
        )
    )
    assert config.customers[0].api_keys[0].allowed_domains == ["app.example.com", "*.x.org"]


def test_only_true_and_false_are_booleans_so_words_like_off_and_no_stay_strings() -> None:
    document = parse_yaml("a: off\nb: NO\nc: yes\nd: true\ne: False\n")
    assert document == {"a": "off", "b": "NO", "c": "yes", "d": True, "e": False}
    problems = _problems(
        "customers:\n  - email: a@b.co\n    name: off\n    api_keys:\n"
        "      - {name: k, allowed_domains: ['*'], active: yes}\n"
    )
    assert problems == ["customers[0].api_keys[0].active: must be true or false"]


def test_yaml_anchors_and_aliases_are_refused_with_their_line() -> None:
    # An alias is a reference: nested lists of them expand exponentially (a "billion laughs").
    for text, line in [("x: 1\nbase: &b {name: x}\nchains: [*b, *b]\n", 2), ("a: *b\n", 1)]:
        with pytest.raises(ConfigFileError) as caught:
            parse_yaml(text)
        (problem,) = caught.value.problems
        assert "anchors (&name) and aliases (*name) are not allowed" in problem
        assert f"line {line}," in problem


def test_every_list_in_the_operator_file_has_a_maximum_length() -> None:
    def arrays(schema: object) -> list[dict[str, Any]]:
        if isinstance(schema, list):
            return [a for item in schema for a in arrays(item)]
        if not isinstance(schema, dict):
            return []
        found = [schema] if schema.get("type") == "array" else []
        return found + [a for value in schema.values() for a in arrays(value)]

    found = arrays(json_schema())
    assert all("maxItems" in a for a in found), [a for a in found if "maxItems" not in a]
    # The benchmark puts 1,940 chains x 3 nodes on two plans: one plan may take all of them.
    nodes = [{"url": f"https://n{n}.example.com", "chain_id": n % 1940 + 1} for n in range(6000)]
    plan = {"name": "a", "nodes": nodes}
    config = validate_document({"providers": [{"slug": "p", "name": "P", "plans": [plan]}]})
    assert len(config.providers[0].plans[0].nodes) == 6000
    with pytest.raises(ConfigFileError) as caught:
        validate_document({"chains": [{}] * (MAX_CHAINS + 1)})
    assert caught.value.problems == [f"chains: must have at most {MAX_CHAINS} items"]


@pytest.mark.parametrize("text", ["? [a, b]\n: 1\n", "x: 1\n? {a: 1}\n: 1\n"])
def test_a_list_or_mapping_as_a_key_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConfigFileError) as caught:
        parse_yaml(text)
    (problem,) = caught.value.problems
    assert "a key must be a single value, not a list or mapping" in problem
    assert f"line {text.count(chr(10)) - 1}," in problem


@pytest.mark.parametrize(
    "text",
    ["chains: " + "[" * 500 + "]" * 500, "chains: " + "{a: " * 3000 + "1" + "}" * 3000],
)
def test_nesting_deeper_than_64_levels_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConfigFileError, match="nested more than 64 levels deep"):
        parse_yaml(text)
    # The root mapping and 63 lists inside it: 64 levels.
    assert parse_yaml("a: " + "[" * 63 + "]" * 63)
    with pytest.raises(ConfigFileError, match="nested more than 64 levels deep"):
        parse_yaml("a: " + "[" * 64 + "]" * 64)


def test_an_integer_too_long_to_convert_is_a_clear_error() -> None:
    text = "chains:\n  - chain_id: " + "9" * 5000 + "\n"
    with pytest.raises(ConfigFileError) as caught:
        parse_yaml(text)
    (problem,) = caught.value.problems
    assert "an integer of more than 100 digits" in problem
    assert "line 2," in problem
    assert _problems("chains:\n  - chain_id: " + "9" * 100 + "\n")[0] == (
        "chains[0].chain_id: must be <= 9223372036854775807"
    )


@pytest.mark.parametrize(
    "text",
    [
        "customers:\n  - credits:\n      - {reference: r, amount: 0100}\n",
        "chains:\n  - chain_id: 0137\n",
        "chains:\n  - chain_id: -0_9\n",
    ],
)
def test_an_integer_with_a_leading_zero_is_refused_not_read_as_octal(text: str) -> None:
    # YAML 1.1 reads 0100 as octal 64, YAML 1.2 as 100: money must not depend on which.
    with pytest.raises(ConfigFileError) as caught:
        parse_yaml(text)
    (problem,) = caught.value.problems
    assert "a number with a leading zero" in problem
    assert f"line {text.count(chr(10))}," in problem
    assert parse_yaml('a: "0100"\n') == {"a": "0100"}


def test_base_60_numbers_are_text_not_minutes_and_seconds() -> None:
    # YAML 1.1 reads 1:30 as 90: money must not change value silently.
    assert parse_yaml("a: 1:30\nb: 190:20:30.15\n") == {"a": "1:30", "b": "190:20:30.15"}
    problems = _problems(
        "customers:\n  - email: a@b.co\n    name: A\n"
        "    credits: [{reference: r, amount: 1:30}]\n"
        "chains:\n  - {chain_id: 1:30, name: A, short_name: a, "
        "native_currency: {name: E, symbol: E}}\n"
    )
    assert problems == [
        "chains[0].chain_id: must be a decimal or 0x-prefixed chain ID",
        "customers[0].credits[0].amount: '1:30' is not a plain decimal number such as 12.5",
    ]


def test_integers_are_decimal_or_written_0x_or_0o_as_in_yaml_1_2() -> None:
    document = parse_yaml("a: 0x1F\nb: 0o17\nc: -12\nd: 1_000\ne: 0\nf: 0b101\ng: +7\n")
    assert document == {"a": 31, "b": 15, "c": -12, "d": 1000, "e": 0, "f": "0b101", "g": 7}


@pytest.mark.parametrize(
    "order", ["allowed_domains: [*], secret: SECRET", "secret: SECRET, allowed_domains: [*]"]
)
def test_a_yaml_error_names_the_problem_line_and_column_and_never_quotes_the_text(
    order: str,
) -> None:
    secret = "crk_Zq8vN3xLp0TgW5rYb7KdMf2HsJc9QaEu"
    line = "      - {name: web, " + order.replace("SECRET", secret) + "}"
    text = "customers:\n  - email: dev@example.com\n    name: Dev\n    api_keys:\n" + line + "\n"
    with pytest.raises(ConfigFileError) as caught:
        parse_yaml(text)
    column = line.index("*]") + 2
    assert caught.value.problems == [
        f"(document): not valid YAML: while scanning an alias at line 5, column {column - 1}: "
        f"expected alphabetic or numeric character, but found ']' at line 5, column {column}"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a:\n  b: 2024-02-30\n", "not a valid timestamp at line 2, column 6"),
        ("a: 2024-01-01T25:00:00Z\n", "not a valid timestamp at line 1, column 4"),
        ("a: 0000-01-01\n", "not a valid timestamp at line 1, column 4"),
        ("a: !!timestamp abc\n", "not a valid timestamp at line 1, column 4"),
        ("a: !!float abc\n", "not a valid float at line 1, column 4"),
        ("a: !!bool maybe\n", "not a valid bool at line 1, column 4"),
        ("a: !!int [1]\n", "expected a single value, not a list or mapping at line 1, column 4"),
        (
            "a: !!float {b: 1}\n",
            "expected a single value, not a list or mapping at line 1, column 4",
        ),
        ("a: !!map x\n", "expected a mapping at line 1, column 4"),
    ],
)
def test_a_value_its_type_cannot_hold_is_a_clear_error(text: str, problem: str) -> None:
    with pytest.raises(ConfigFileError) as caught:
        parse_yaml(text)
    assert caught.value.problems == [f"(document): not valid YAML: {problem}"]


def test_a_secret_has_at_most_256_characters_after_its_prefix() -> None:
    def key(body: str) -> str:
        return (
            "customers:\n  - email: a@b.co\n    name: A\n    api_keys:\n"
            f"      - {{name: k, allowed_domains: ['*'], secret: crk_{body}}}\n"
        )

    assert validate_document(parse_yaml(key("a" * 256))).customers[0].api_keys[0].secret
    assert _problems(key("a" * 257)) == [
        "customers[0].api_keys[0].secret: must have at most 256 characters after the prefix"
    ]
