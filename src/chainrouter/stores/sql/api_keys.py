"""API key rows. Every write here changes what routers cache; callers bump the config version."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Row, func, select

from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.records import ApiKey
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow


def _api_key(row: Row[Any]) -> ApiKey:
    return ApiKey(
        id=row.id,
        customer_id=row.customer_id,
        name=row.name,
        key_hint=row.key_hint,
        allowed_domains=tuple(row.allowed_domains),
        routing_strategy=RoutingStrategy(row.routing_strategy),
        active=row.active,
        bypass_credit_check=row.bypass_credit_check,
        created_at=row.created_at,
        updated_at=row.updated_at,
        rate_limit=row.rate_limit,
        rate_limit_interval_sec=row.rate_limit_interval_sec,
        spend_alert_nano=row.spend_alert_nano,
        verified=row.verified,
        max_price_per_call_nano=row.max_price_per_call_nano,
    )


def insert_api_key(
    connection: Connection,
    *,
    customer_id: int,
    name: str,
    digest: str,
    hint: str,
    allowed_domains: list[str],
    routing_strategy: RoutingStrategy,
    rate_limit: int = 0,
    rate_limit_interval_sec: int = 1,
    spend_alert_nano: int = 0,
    verified: bool = False,
    max_price_per_call_nano: int = 0,
) -> ApiKey:
    now = utcnow()
    key = connection.execute(
        t.api_keys.insert().values(
            customer_id=customer_id,
            name=name,
            key_hash=digest,
            key_hint=hint,
            allowed_domains=allowed_domains,
            routing_strategy=routing_strategy.value,
            active=True,
            bypass_credit_check=False,
            rate_limit=rate_limit,
            rate_limit_interval_sec=rate_limit_interval_sec,
            spend_alert_nano=spend_alert_nano,
            verified=verified,
            max_price_per_call_nano=max_price_per_call_nano,
            created_at=now,
            updated_at=now,
        )
    ).inserted_primary_key
    assert key is not None
    found = get_api_key(connection, int(key[0]))
    assert found is not None
    return found


def get_api_key(connection: Connection, key_id: int) -> ApiKey | None:
    row = connection.execute(select(t.api_keys).where(t.api_keys.c.id == key_id)).first()
    return None if row is None else _api_key(row)


def find_api_key_by_hash(connection: Connection, digest: str) -> ApiKey | None:
    row = connection.execute(select(t.api_keys).where(t.api_keys.c.key_hash == digest)).first()
    return None if row is None else _api_key(row)


def count_api_keys(connection: Connection, customer_id: int) -> int:
    query = (
        select(func.count()).select_from(t.api_keys).where(t.api_keys.c.customer_id == customer_id)
    )
    return int(connection.execute(query).scalar_one())


def list_api_keys(connection: Connection, customer_id: int) -> list[ApiKey]:
    query = select(t.api_keys).where(t.api_keys.c.customer_id == customer_id)
    return [_api_key(row) for row in connection.execute(query.order_by(t.api_keys.c.id))]


def update_api_key(connection: Connection, key_id: int, changes: dict[str, Any]) -> None:
    """Apply column changes (`name`, `active`, `allowed_domains`, `routing_strategy`, ...)."""
    values = {
        column: value.value if isinstance(value, RoutingStrategy) else value
        for column, value in changes.items()
    }
    connection.execute(
        t.api_keys.update().where(t.api_keys.c.id == key_id).values(**values, updated_at=utcnow())
    )
