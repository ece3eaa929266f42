"""The ethereum-lists parser: usable entries become chains, every other entry is a reported skip."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.catalog.parse import CatalogFormatError, parse_catalog, parse_entries
from tests.conftest import CHAINS_JSON


def _entry(**overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "Example Chain",
        "chain": "EXC",
        "chainId": 777,
        "shortName": "exc",
        "nativeCurrency": {"name": "Ex", "symbol": "EX", "decimals": 18},
        "infoURL": "https://example.org",
        "rpc": ["https://rpc.example.org"],
        "explorers": [{"name": "scan", "url": "https://scan.example.org", "standard": "EIP3091"}],
        "faucets": [],
        "networkId": 777,
    }
    entry.update(overrides)
    return entry


def test_every_entry_of_the_shared_registry_parses() -> None:
    parsed = parse_catalog(CHAINS_JSON.read_bytes())
    assert len(parsed.chains) == 1940
    assert parsed.problems == []
    ethereum = next(c for c in parsed.chains if c.chain_id == 1)
    assert ethereum.short_name == "eth"
    assert ethereum.native_currency_symbol == "ETH"
    assert ethereum.native_currency_decimals == 18
    assert ethereum.info_url == "https://ethereum.org"
    assert any(e.url == "https://etherscan.io" for e in ethereum.explorers)


def test_the_fields_the_service_uses_are_taken_and_unknown_fields_ignored() -> None:
    chain = parse_entries([_entry(somethingNew={"x": 1})]).chains[0]
    assert (chain.chain_id, chain.name, chain.short_name, chain.network) == (
        777,
        "Example Chain",
        "exc",
        "EXC",
    )
    assert chain.explorers[0].url == "https://scan.example.org"
    assert chain.public_rpc_urls == ("https://rpc.example.org",)


@pytest.mark.parametrize(
    ("broken", "reason"),
    [
        ({"chainId": -5}, "chainId: must be >= 1"),
        ({"chainId": "5"}, "chainId: must be an integer"),
        ({"chainId": 2**64}, "chainId: must be <="),
        ({"name": ""}, "name: must have at least 1 character"),
        (
            {"nativeCurrency": {"name": "x", "symbol": "X", "decimals": -1}},
            "decimals: must be >= 0",
        ),
        ({"nativeCurrency": "ETH"}, "nativeCurrency: must be a mapping"),
        ({"explorers": [{"name": "x"}]}, "explorers[0].url: is required"),
        ({"status": "zombie"}, "status: must be one of"),
    ],
)
def test_a_malformed_entry_is_skipped_with_its_index_and_reason(
    broken: dict[str, Any], reason: str
) -> None:
    parsed = parse_entries([_entry(chainId=1), _entry(**broken), _entry(chainId=3)])
    assert [c.chain_id for c in parsed.chains] == [1, 3]
    assert len(parsed.problems) == 1
    assert parsed.problems[0].index == 1
    assert reason in str(parsed.problems[0])


def test_a_repeated_chain_id_keeps_the_first_entry_and_reports_the_second() -> None:
    parsed = parse_entries([_entry(name="First"), _entry(name="Second")])
    assert [c.name for c in parsed.chains] == ["First"]
    assert "duplicate chainId, already given by entry 0" in str(parsed.problems[0])


@pytest.mark.parametrize("document", [b"{not json", b'{"chainId": 1}', b"\xff\xfe"])
def test_a_document_that_is_not_a_json_array_is_refused_whole(document: bytes) -> None:
    with pytest.raises(CatalogFormatError):
        parse_catalog(document)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
field_names = st.sampled_from(
    ["name", "chainId", "shortName", "nativeCurrency", "explorers", "infoURL", "rpc", "status"]
)


@settings(max_examples=300)
@given(st.lists(json_values | st.dictionaries(field_names, json_values), max_size=8))
def test_any_json_array_is_split_into_chains_and_reported_skips_without_raising(
    entries: list[Any],
) -> None:
    parsed = parse_entries(entries)
    assert len(parsed.chains) + len(parsed.problems) == len(entries)
    assert all(str(p) for p in parsed.problems)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_either_parse_or_raise_the_format_error(document: bytes) -> None:
    try:
        parsed = parse_catalog(document)
    except CatalogFormatError:
        return
    assert isinstance(json.loads(document), list)
    assert parsed is not None


@pytest.mark.parametrize("document", [b"[" * 100_000, b"[" * 5000 + b"]" * 5000])
def test_a_document_nested_too_deeply_is_refused_whole(document: bytes) -> None:
    with pytest.raises(CatalogFormatError, match="nested too deeply"):
        parse_catalog(document)


def test_an_integer_too_long_to_convert_skips_only_its_entry() -> None:
    # Python converts at most 4,300 digits: beyond, json.loads failed the whole document.
    entries = [_entry(chainId=1), _entry(chainId=2), _entry(chainId=3)]
    document = json.dumps(entries).replace('"chainId": 2,', f'"chainId": {"9" * 5000},')
    parsed = parse_catalog(document)
    assert [c.chain_id for c in parsed.chains] == [1, 3]
    (problem,) = parsed.problems
    assert str(problem) == (
        "entry 1 (chainId <an integer of 5000 digits>): chainId: must be <= 9223372036854775807"
    )
