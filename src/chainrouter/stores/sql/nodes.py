"""HTTP node rows. Writes change what routers cache; callers bump the config version."""

from __future__ import annotations

from sqlalchemy import Connection, func, select

from chainrouter.domain.enums import NodeSource, NodeStatus
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow


def node_url_exists(connection: Connection, url: str) -> bool:
    query = select(func.count()).select_from(t.nodes).where(t.nodes.c.url == url)
    return bool(connection.execute(query).scalar_one())


def insert_node(
    connection: Connection,
    *,
    plan_id: int,
    chain_id: int,
    url: str,
    vm: str = "evm",
    source: NodeSource = NodeSource.PROVIDER,
    rate_limit: int = 0,
    rate_limit_interval_sec: int = 1,
) -> int:
    now = utcnow()
    key = connection.execute(
        t.nodes.insert().values(
            plan_id=plan_id,
            chain_id=chain_id,
            url=url,
            vm=vm,
            source=source.value,
            status=NodeStatus.HEALTHY.value,
            rate_limit=rate_limit,
            rate_limit_interval_sec=rate_limit_interval_sec,
            created_at=now,
            updated_at=now,
        )
    ).inserted_primary_key
    assert key is not None
    return int(key[0])
