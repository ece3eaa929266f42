"""HTTP and WebSocket node rows. Writes change what routers cache; callers bump the version."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import Connection, Engine, Row, Table, func, select

from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.enums import NodeSource, NodeStatus
from chainrouter.domain.records import CordonWrite, Node, NodeHealthRecord
from chainrouter.domain.urls import url_identity
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.config_version import bump_config_version
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
    node_target_type: str = "full",
    capabilities: Capabilities | None = None,
    verified_capabilities: Capabilities | None = None,
) -> int:
    now = utcnow()
    key = connection.execute(
        t.nodes.insert().values(
            capabilities=capabilities_column(capabilities),
            verified_capabilities=capabilities_column(verified_capabilities),
            plan_id=plan_id,
            chain_id=chain_id,
            url=url,
            vm=vm,
            node_target_type=node_target_type,
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


def update_node(connection: Connection, table: Table, node_id: int, values: dict[str, Any]) -> None:
    connection.execute(
        table.update().where(table.c.id == node_id).values(**values, updated_at=utcnow())
    )


def insert_ws_node(connection: Connection, *, plan_id: int, chain_id: int, url: str) -> int:
    now = utcnow()
    key = connection.execute(
        t.ws_nodes.insert().values(
            plan_id=plan_id,
            chain_id=chain_id,
            url=url,
            status=NodeStatus.HEALTHY.value,
            created_at=now,
            updated_at=now,
        )
    ).inserted_primary_key
    assert key is not None
    return int(key[0])


def _node(row: Row[Any], ws: bool) -> Node:
    values = row._mapping
    return Node(
        id=values["id"],
        plan_id=values["plan_id"],
        provider_id=values["provider_id"],
        chain_id=values["chain_id"],
        url=values["url"],
        status=values["status"],
        ws=ws,
        vm="evm" if ws else values["vm"],
        node_target_type="ws" if ws else values["node_target_type"],
        rate_limit=0 if ws else values["rate_limit"],
        rate_limit_interval_sec=1 if ws else values["rate_limit_interval_sec"],
        source="provider" if ws else values["source"],
        created_at=values["created_at"],
        updated_at=values["updated_at"],
        capabilities=UNKNOWN if ws else Capabilities.from_json(values["capabilities"]),
        verified_capabilities=None
        if ws or values["verified_capabilities"] is None
        else Capabilities.from_json(values["verified_capabilities"]),
        cordon_reason=None if ws else values["cordon_reason"],
        cordoned_at=None if ws else values["cordoned_at"],
        disputed_calls=0 if ws else values["disputed_calls"],
        disputed_nano=0 if ws else values["disputed_nano"],
        watched_until=None if ws else values["watched_until"],
    )


def capabilities_column(capabilities: Capabilities | None) -> dict[str, Any] | None:
    """How capabilities are stored: their JSON spelling, or null when nothing is known."""
    if capabilities is None or capabilities == UNKNOWN:
        return None
    return capabilities.as_json()


def _with_provider(table: Table) -> Any:
    return select(table, t.plans.c.provider_id).join(t.plans, t.plans.c.id == table.c.plan_id)


def find_node(
    connection: Connection, table: Table, *, node_id: int | None = None, url: str | None = None
) -> Node | None:
    query = _with_provider(table)
    query = (
        query.where(table.c.id == node_id)
        if node_id is not None
        else query.where(table.c.url == url)
    )
    row = connection.execute(query).first()
    return None if row is None else _node(row, ws=table is t.ws_nodes)


def nodes_reaching(connection: Connection, table: Table, url: str) -> list[Node]:
    """Every node (of any provider, deleted ones too) whose URL reaches the node `url` reaches:
    the same identity, whatever its query or credentials (domain/urls.py, `url_identity`)."""
    identity = url_identity(url)
    host = urlsplit(identity).netloc
    # Narrowed in SQL by the host, then compared exactly.
    query = _with_provider(table).where(table.c.url.contains(host, autoescape=True))
    return [
        _node(row, ws=table is t.ws_nodes)
        for row in connection.execute(query)
        if url_identity(row.url) == identity
    ]


def provider_nodes(
    connection: Connection, table: Table, provider_id: int, *, limit: int, offset: int
) -> list[Node]:
    """A provider's nodes of one kind, by id, leaving out those it deleted."""
    query = (
        _with_provider(table)
        .where(
            t.plans.c.provider_id == provider_id,
            table.c.status != NodeStatus.PROVIDER_DELETED.value,
        )
        .order_by(table.c.id)
        .limit(limit)
        .offset(offset)
    )
    return [_node(row, ws=table is t.ws_nodes) for row in connection.execute(query)]


def node_health(
    connection: Connection, node_id: int, *, ws: bool = False
) -> NodeHealthRecord | None:
    """What routers last reported of the node (`ws`: a WebSocket node's id)."""
    if ws:
        query = select(t.ws_node_health).where(t.ws_node_health.c.ws_node_id == node_id)
    else:
        query = select(t.node_health).where(t.node_health.c.node_id == node_id)
    row = connection.execute(query).first()
    if row is None:
        return None
    known = None if ws or row.capabilities is None else Capabilities.from_json(row.capabilities)
    return NodeHealthRecord(
        in_sync=row.in_sync,
        head_block=row.head_block,
        latency_ms=row.latency_ms,
        consecutive_failures=row.consecutive_failures,
        checked_at=row.checked_at,
        capabilities=known,
    )


def chain_head(
    connection: Connection, chain_id: int, *, excluding: int | None = None
) -> int | None:
    """The highest head an in-sync node of the chain last reported, if any did.

    `excluding` leaves one node's own report out: a node screened again is judged against the
    others, not against what it once said itself."""
    query = (
        select(func.max(t.node_health.c.head_block))
        .join(t.nodes, t.nodes.c.id == t.node_health.c.node_id)
        .where(t.nodes.c.chain_id == chain_id, t.node_health.c.in_sync.is_(True))
    )
    if excluding is not None:
        query = query.where(t.nodes.c.id != excluding)
    head = connection.execute(query).scalar_one_or_none()
    return None if head is None else int(head)


def write_cordons(engine: Engine, writes: Sequence[CordonWrite]) -> None:
    """Routers' cordons (router/cordon.py): each node `cordoned` with its reason, its disputed
    answers added to its totals; the configuration version bumped, so that every router drops it."""
    with engine.begin() as connection:
        for write in writes:
            nodes = t.nodes
            values: dict[str, Any] = {
                "disputed_calls": nodes.c.disputed_calls + write.disputed_calls,
                "disputed_nano": nodes.c.disputed_nano + write.disputed_nano,
                "updated_at": utcnow(),
            }
            if write.reason:  # else another router's cordon: only this router's disputes
                values["status"] = NodeStatus.CORDONED.value
                values["cordon_reason"] = write.reason[:2000]
                values["cordoned_at"] = datetime.fromtimestamp(write.at, UTC)
            connection.execute(nodes.update().where(nodes.c.id == write.node_id).values(values))
        bump_config_version(connection)


def cordoned_nodes(connection: Connection, *, limit: int, offset: int) -> list[Node]:
    """Every cordoned or disputed node, the latest cordon first (the administrator's list)."""
    table = _with_provider(t.nodes)
    rows = connection.execute(
        table.where(
            (t.nodes.c.status == NodeStatus.CORDONED.value) | (t.nodes.c.disputed_calls > 0)
        )
        .order_by(t.nodes.c.cordoned_at.desc(), t.nodes.c.id)
        .limit(limit)
        .offset(offset)
    )
    return [_node(row, False) for row in rows]
