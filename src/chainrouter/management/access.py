"""Management tokens: authenticating a request, and what each role may reach."""

from __future__ import annotations

from sqlalchemy import Engine

from chainrouter.domain.credentials import SecretKind, hash_secret
from chainrouter.domain.records import Principal
from chainrouter.management.errors import (
    ForbiddenError,
    ProviderNotResolvedError,
    UnauthenticatedError,
)
from chainrouter.stores.sql.accounts import find_principal

HEADER = "X-Api-Key"


def authenticate(engine: Engine, secret: str | None) -> Principal:
    """The principal of a live token, or `UnauthenticatedError` saying what is wrong."""
    if not secret:
        raise UnauthenticatedError(f"a management token is required in the {HEADER} header")
    if secret.startswith(SecretKind.API_KEY.value):
        raise UnauthenticatedError(
            f"this is an RPC API key ({SecretKind.API_KEY.value}...); management routes need a "
            f"management token ({SecretKind.MANAGEMENT_TOKEN.value}...)"
        )
    if not secret.startswith(SecretKind.MANAGEMENT_TOKEN.value) or len(secret) > 200:
        raise UnauthenticatedError("invalid or revoked management token")
    with engine.connect() as connection:
        principal = find_principal(connection, hash_secret(secret))
    if principal is None:
        raise UnauthenticatedError("invalid or revoked management token")
    return principal


def require_administrator(principal: Principal) -> None:
    if not principal.is_administrator:
        raise ForbiddenError("this route needs an administrator token")


def require_provider(principal: Principal) -> int:
    """The provider the principal acts for, or 403 `provider not resolved`."""
    if principal.provider_id is None:
        raise ProviderNotResolvedError()
    return principal.provider_id
