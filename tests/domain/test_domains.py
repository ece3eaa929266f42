"""The allowed_domains rule: host names, leading-wildcard subdomains, or `*` for any origin."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.domains import (
    domain_allowed,
    normalise_allowed_domain,
    normalise_allowed_domains,
)


@pytest.mark.parametrize(
    ("entry", "canonical"),
    [
        ("App.Example.COM", "app.example.com"),
        ("*.example.com", "*.example.com"),
        ("*", "*"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("example.com.", "example.com"),
    ],
)
def test_valid_entries_are_normalised(entry: str, canonical: str) -> None:
    assert normalise_allowed_domain(entry) == canonical


@pytest.mark.parametrize(
    "entry",
    [
        "https://example.com",
        "example.com/path",
        "example.com:8080",
        "a.*.com",
        "*example.com",
        "-bad.com",
        "",
        "exa mple.com",
        "x" * 64 + ".com",
    ],
)
def test_malformed_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match=r"\S"):
        normalise_allowed_domain(entry)


def test_a_wildcard_matches_subdomains_but_not_the_bare_domain() -> None:
    allowed = ["*.example.com"]
    assert domain_allowed(allowed, "app.example.com")
    assert domain_allowed(allowed, "a.b.example.com")
    assert not domain_allowed(allowed, "example.com")
    assert not domain_allowed(allowed, "badexample.com")


def test_exact_entries_match_only_themselves_case_insensitively() -> None:
    assert domain_allowed(["app.example.com"], "APP.example.com")
    assert not domain_allowed(["app.example.com"], "evil.app.example.com.attacker.io")


def test_a_request_without_origin_passes_only_with_the_any_origin_entry() -> None:
    assert domain_allowed(["*"], None)
    assert not domain_allowed(["example.com"], None)


@given(st.from_regex(r"[a-z0-9]{1,10}(\.[a-z0-9]{1,10}){0,3}", fullmatch=True))
def test_any_host_passes_the_any_origin_entry_and_matches_itself(host: str) -> None:
    assert domain_allowed(["*"], host)
    assert domain_allowed([normalise_allowed_domain(host)], host)


def test_entries_that_mean_the_same_host_are_kept_once_in_order() -> None:
    assert normalise_allowed_domains(["B.com", "a.com", "b.com.", "*"]) == ["b.com", "a.com", "*"]
