"""Secrets: random, prefixed by kind, stored only as a digest, shown as a hint."""

from __future__ import annotations

import pytest

from chainrouter.domain.credentials import (
    SecretKind,
    generate_secret,
    hash_secret,
    secret_format_problem,
    secret_hint,
    secrets_match,
)


@pytest.mark.parametrize("kind", list(SecretKind))
def test_generated_secrets_carry_the_prefix_of_their_kind_and_are_unique(kind: SecretKind) -> None:
    made = {generate_secret(kind) for _ in range(200)}
    assert len(made) == 200
    assert all(s.startswith(kind.value) and secret_format_problem(s, kind) is None for s in made)


def test_api_key_and_management_token_prefixes_differ() -> None:
    assert len({kind.value for kind in SecretKind}) == len(SecretKind) == 2


def test_the_stored_digest_does_not_contain_the_secret_and_matches_only_it() -> None:
    secret = generate_secret(SecretKind.API_KEY)
    digest = hash_secret(secret)
    assert secret not in digest
    assert secret[4:] not in digest
    assert len(digest) == 64
    assert secrets_match(secret, digest)
    assert not secrets_match(secret + "x", digest)
    assert not secrets_match(generate_secret(SecretKind.API_KEY), digest)


def test_the_hint_shows_the_prefix_and_the_last_four_characters_only() -> None:
    secret = generate_secret(SecretKind.MANAGEMENT_TOKEN)
    hint = secret_hint(secret)
    assert hint == f"crm_...{secret[-4:]}"
    assert secret[4:-4] not in hint


@pytest.mark.parametrize(
    ("secret", "problem"),
    [
        ("crm_" + "a" * 40, "must start with 'crk_'"),
        ("crk_short", "at least 32 characters"),
        ("crk_" + "a" * 31 + "!", "may only contain"),
    ],
)
def test_operator_supplied_secrets_must_look_like_generated_ones(secret: str, problem: str) -> None:
    found = secret_format_problem(secret, SecretKind.API_KEY)
    assert found is not None
    assert problem in found
