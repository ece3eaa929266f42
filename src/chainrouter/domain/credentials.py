"""Secrets handed to customers: RPC API keys and management tokens.

Both are 256-bit random strings with a fixed prefix, so that a leaked string is recognisable and
the two kinds cannot be confused. Only a SHA-256 digest is stored. A slow password hash is not
needed (nor affordable on the request path): the secrets are random, not chosen by people, so a
stolen digest cannot be reversed by guessing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from enum import StrEnum

_RANDOM_BYTES = 32
_HINT_TAIL = 4


class SecretKind(StrEnum):
    API_KEY = "crk_"
    MANAGEMENT_TOKEN = "crm_"  # noqa: S105 - a public prefix, not a secret


# token_urlsafe(32) yields 43 characters of the URL-safe base64 alphabet.
_MIN_BODY_LENGTH = 32
# A bound on the secrets an operator may choose (docs/operator-config.md), far above the 43
# characters generated.
MAX_BODY_LENGTH = 256
_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def generate_secret(kind: SecretKind) -> str:
    return kind.value + secrets.token_urlsafe(_RANDOM_BYTES)


def hash_secret(secret: str) -> str:
    """Hex SHA-256 of the whole secret; this is what storage keeps and looks up by."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secrets_match(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)


def secret_hint(secret: str) -> str:
    """What a list shows instead of the secret: the prefix and the last characters."""
    prefix = next((k.value for k in SecretKind if secret.startswith(k.value)), "")
    return f"{prefix}...{secret[-_HINT_TAIL:]}"


def secret_format_problem(secret: str, kind: SecretKind) -> str | None:
    """Why an operator-supplied `secret` is unacceptable as a `kind` secret; None if it is fine."""
    if not secret.startswith(kind.value):
        return f"must start with {kind.value!r}"
    body = secret[len(kind.value) :]
    if len(body) < _MIN_BODY_LENGTH:
        return f"must have at least {_MIN_BODY_LENGTH} characters after the prefix"
    if len(body) > MAX_BODY_LENGTH:
        return f"must have at most {MAX_BODY_LENGTH} characters after the prefix"
    if not set(body) <= _ALPHABET:
        return "may only contain letters, digits, '-' and '_' after the prefix"
    return None
