"""Customers' RPC API keys: create (the secret is shown once), list, update, find by secret.

Every write bumps the configuration version in the same transaction, so routers pick the change
up at their next poll (about a second, `sync_interval_s`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine

from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret, secret_hint
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.records import ApiKey
from chainrouter.management.errors import ConflictError, NotFoundError
from chainrouter.stores.sql import api_keys as store
from chainrouter.stores.sql.accounts import lock_customer
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.usage_report import floor_day, spent_by_key_since

MAX_KEYS_PER_CUSTOMER = 1000


@dataclass(frozen=True, slots=True)
class CreatedApiKey:
    record: ApiKey
    secret: str  # shown once, never stored


@dataclass(frozen=True, slots=True)
class ApiKeyChanges:
    """A partial update: None leaves the field as stored."""

    name: str | None = None
    active: bool | None = None
    allowed_domains: list[str] | None = None
    routing_strategy: RoutingStrategy | None = None
    rate_limit: int | None = None
    rate_limit_interval_sec: int | None = None
    spend_alert_nano: int | None = None
    verified: bool | None = None
    max_price_per_call_nano: int | None = None

    def columns(self) -> dict[str, Any]:
        given = {
            "name": self.name,
            "active": self.active,
            "allowed_domains": self.allowed_domains,
            "routing_strategy": self.routing_strategy,
            "rate_limit": self.rate_limit,
            "rate_limit_interval_sec": self.rate_limit_interval_sec,
            "spend_alert_nano": self.spend_alert_nano,
            "verified": self.verified,
            "max_price_per_call_nano": self.max_price_per_call_nano,
        }
        return {column: value for column, value in given.items() if value is not None}


def create_api_key(
    engine: Engine,
    customer_id: int,
    *,
    name: str,
    allowed_domains: list[str],
    routing_strategy: RoutingStrategy,
    rate_limit: int = 0,
    rate_limit_interval_sec: int = 1,
    spend_alert_nano: int = 0,
    verified: bool = False,
    max_price_per_call_nano: int = 0,
) -> CreatedApiKey:
    secret = generate_secret(SecretKind.API_KEY)
    with engine.begin() as connection:
        lock_customer(connection, customer_id)
        if store.count_api_keys(connection, customer_id) >= MAX_KEYS_PER_CUSTOMER:
            raise ConflictError(
                f"a customer may hold at most {MAX_KEYS_PER_CUSTOMER} API keys; "
                "deactivate and reuse one, or ask support"
            )
        record = store.insert_api_key(
            connection,
            customer_id=customer_id,
            name=name,
            digest=hash_secret(secret),
            hint=secret_hint(secret),
            allowed_domains=allowed_domains,
            routing_strategy=routing_strategy,
            rate_limit=rate_limit,
            rate_limit_interval_sec=rate_limit_interval_sec,
            spend_alert_nano=spend_alert_nano,
            verified=verified,
            max_price_per_call_nano=max_price_per_call_nano,
        )
        bump_config_version(connection)
    return CreatedApiKey(record, secret)


def list_api_keys(engine: Engine, customer_id: int) -> list[ApiKey]:
    with engine.connect() as connection:
        return store.list_api_keys(connection, customer_id)


def spent_today(engine: Engine, customer_id: int, now: datetime | None = None) -> dict[int, int]:
    """Credits (nano) each of the customer's keys spent since 00:00 UTC, as flushed so far."""
    midnight = floor_day(now or datetime.now(UTC))
    with engine.connect() as connection:
        return spent_by_key_since(connection, customer_id, midnight)


# What routers read of a key (stores/sql/snapshot.py, `KeyAccess`): a change to anything else
# (its name, its spend alert) makes no router reload its configuration, so that a loop of
# renames costs the routers nothing (issue 52).
ROUTED_COLUMNS = frozenset(
    {
        "allowed_domains",
        "routing_strategy",
        "active",
        "bypass_credit_check",
        "rate_limit",
        "rate_limit_interval_sec",
        "max_price_per_call_nano",
        "verified",
    }
)


def update_api_key(engine: Engine, customer_id: int, key_id: int, changes: ApiKeyChanges) -> ApiKey:
    """Change the given fields of one of the customer's keys; another customer's key is 404."""
    with engine.begin() as connection:
        current = store.get_api_key(connection, key_id)
        if current is None or current.customer_id != customer_id:
            raise NotFoundError(f"no API key {key_id}")
        columns = changes.columns()
        if columns:
            store.update_api_key(connection, key_id, columns)
            if ROUTED_COLUMNS.intersection(columns):
                bump_config_version(connection)
        updated = store.get_api_key(connection, key_id)
    assert updated is not None
    return updated


def find_api_key_by_secret(engine: Engine, customer_id: int, secret: str) -> ApiKey:
    """The caller's key whose secret this is (how a tool holding only the secret finds its id).

    Matching is by the full secret's digest, never by a hint; another customer's key is 404.
    """
    with engine.connect() as connection:
        record = store.find_api_key_by_hash(connection, hash_secret(secret))
    if record is None or record.customer_id != customer_id:
        raise NotFoundError("no API key of yours has this secret")
    return record
