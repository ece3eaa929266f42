"""Providers' nodes: registration after mandatory screening, status changes, status reads.

A node URL has exactly one owner, by what it reaches (scheme, host, port, path: its query and
credentials do not make it another node; domain/urls.py). Registering a URL that reaches a node
another provider owns is 404 (its existence is not revealed); one already on another plan of
the same provider is 409. Every write bumps the configuration version, so routers start or stop
using the node at their next poll (about 1 s).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from sqlalchemy import Connection, Engine, Table

from chainrouter.domain.capabilities import Capabilities
from chainrouter.domain.enums import NodeSource, NodeStatus
from chainrouter.domain.records import NO_CHECKS, Node, NodeChecksRecord, NodeHealthRecord
from chainrouter.management.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ScreeningFailedError,
)
from chainrouter.screening.evm import Screening, screen_http_node
from chainrouter.screening.guard import OutboundGuard
from chainrouter.screening.ws import screen_ws_node
from chainrouter.stores.sql import nodes as store
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.node_checks import node_checks
from chainrouter.stores.sql.node_checks import provider_disputed as disputed_of
from chainrouter.stores.sql.nodes import capabilities_column
from chainrouter.stores.sql.plans import get_plan, known_chain_ids
from chainrouter.stores.sql.schema import utcnow

HTTP_SCHEMES = frozenset({"http", "https"})
NodeKind = Literal["http", "ws"]

# What `GET /provider/nodes/{id}/status` may say (docs/provider-api.md explains each).
STATUS_PENDING_CHECK = "pending check"
STATUS_FAILING = "failing"
STATUS_OUT_OF_SYNC = "out of sync"
# A node back from a cordon is audited at the higher rate this long (router/audits.py).
WATCHED_AFTER_CORDON = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class HttpNodeSpec:
    plan_id: int
    url: str
    vm: str
    rate_limit: int
    rate_limit_interval_sec: int
    source: NodeSource
    node_target_type: str
    capabilities: Capabilities | None = None  # as declared; None: none declared


@dataclass(frozen=True, slots=True)
class Registered:
    node: Node
    created: bool
    screening: Screening


def _table(kind: NodeKind) -> Table:
    return t.ws_nodes if kind == "ws" else t.nodes


def _check_ownership(
    engine: Engine, provider_id: int, plan_id: int, url: str, kind: NodeKind
) -> Node | None:
    """The node this URL already is (to update), after the plan and URL ownership rules."""
    with engine.connect() as connection:
        plan = get_plan(connection, plan_id)
        if plan is None or plan.provider_id != provider_id:
            raise NotFoundError(f"no plan {plan_id}")
        existing = store.find_node(connection, _table(kind), url=url)
        reaching = store.nodes_reaching(connection, _table(kind), url)
    # Owned by what the URL reaches, not by its spelling: another provider's node with a query
    # added (`?mine`) is still theirs.
    if any(node.provider_id != provider_id for node in reaching):
        raise NotFoundError("no node with this URL")  # another provider's: not revealed
    if existing is None:
        return None
    if existing.plan_id != plan_id:
        raise ConflictError(
            f"this URL is already registered as node {existing.id} on your plan "
            f"{existing.plan_id}; change its plan there or use another URL"
        )
    return existing


def _failed(screening: Screening) -> ScreeningFailedError:
    return ScreeningFailedError(
        f"the node failed screening: {screening.failure}",
        details=[{"field": "url", "url": screening.url, "message": screening.failure or ""}],
    )


async def register_http_node(
    engine: Engine, guard: OutboundGuard, provider_id: int, spec: HttpNodeSpec, *, max_lag: int
) -> Registered:
    existing = await asyncio.to_thread(
        _check_ownership, engine, provider_id, spec.plan_id, spec.url, "http"
    )
    chain_id = None if existing is None else existing.chain_id
    existing_id = None if existing is None else existing.id
    head = None
    if chain_id is not None:
        head = await asyncio.to_thread(_chain_head, engine, chain_id, existing_id)
    screening = await screen_http_node(
        guard,
        spec.url,
        schemes=HTTP_SCHEMES,
        expected_chain_id=chain_id,
        chain_head=head,
        max_lag=max_lag,
        declared=spec.capabilities,
    )
    if not screening.passed:
        raise _failed(screening)
    assert screening.chain_id is not None
    if existing is None:
        known = await asyncio.to_thread(_known, engine, screening.chain_id)
        if not known:
            raise ScreeningFailedError(
                f"the node serves chain {screening.chain_id}, which this service does not list; "
                "submit a chain request first (POST /chains/requests)",
                details=[
                    {
                        "field": "url",
                        "url": spec.url,
                        "message": f"unknown chain {screening.chain_id}",
                    }
                ],
            )
        head = await asyncio.to_thread(_chain_head, engine, screening.chain_id, None)
        number = screening.block_number
        if head is not None and number is not None and number < head - max_lag:
            raise ScreeningFailedError(
                f"the node failed screening: eth_blockNumber: block {number} is "
                f"{head - number} blocks behind the chain head {head}",
                details=[{"field": "url", "url": spec.url, "message": "behind the chain head"}],
            )
    return await asyncio.to_thread(_write_http, engine, provider_id, spec, screening)


def _known(engine: Engine, chain_id: int) -> bool:
    with engine.connect() as connection:
        return bool(known_chain_ids(connection, {chain_id}))


def _chain_head(engine: Engine, chain_id: int, excluding: int | None) -> int | None:
    with engine.connect() as connection:
        return store.chain_head(connection, chain_id, excluding=excluding)


def _write_http(
    engine: Engine, provider_id: int, spec: HttpNodeSpec, screening: Screening
) -> Registered:
    assert screening.chain_id is not None
    with engine.begin() as connection:
        # Checked again here: the URL may have been registered while the node was screened.
        existing = store.find_node(connection, t.nodes, url=spec.url)
        if existing is not None and (
            existing.provider_id != provider_id or existing.plan_id != spec.plan_id
        ):
            raise ConflictError("this URL was registered elsewhere while it was being screened")
        values = {
            "vm": spec.vm,
            "rate_limit": spec.rate_limit,
            "rate_limit_interval_sec": spec.rate_limit_interval_sec,
            "source": spec.source.value,
            "node_target_type": spec.node_target_type,
            "status": NodeStatus.HEALTHY.value,
            "capabilities": capabilities_column(spec.capabilities),
            "verified_capabilities": capabilities_column(screening.capabilities),
        }
        if existing is None:
            node_id = store.insert_node(
                connection,
                plan_id=spec.plan_id,
                chain_id=screening.chain_id,
                url=spec.url,
                vm=spec.vm,
                source=spec.source,
                rate_limit=spec.rate_limit,
                rate_limit_interval_sec=spec.rate_limit_interval_sec,
                node_target_type=spec.node_target_type,
                capabilities=spec.capabilities,
                verified_capabilities=screening.capabilities,
            )
        else:
            node_id = existing.id
            store.update_node(connection, t.nodes, node_id, values)
        bump_config_version(connection)
        node = store.find_node(connection, t.nodes, node_id=node_id)
    assert node is not None
    return Registered(node, existing is None, screening)


async def register_ws_node(
    engine: Engine, guard: OutboundGuard, provider_id: int, *, plan_id: int, chain_id: int, url: str
) -> Registered:
    existing = await asyncio.to_thread(_check_ownership, engine, provider_id, plan_id, url, "ws")
    if not await asyncio.to_thread(_known, engine, chain_id):
        raise InvalidInputError(
            f"chain {chain_id} is not listed by this service; submit a chain request first",
            details=[{"field": "chain_id", "message": f"unknown chain {chain_id}"}],
        )
    screening = await screen_ws_node(guard, url, expected_chain_id=chain_id)
    if not screening.passed:
        raise _failed(screening)

    def write() -> Registered:
        with engine.begin() as connection:
            found = store.find_node(connection, t.ws_nodes, url=url)
            if found is not None and (found.provider_id != provider_id or found.plan_id != plan_id):
                raise ConflictError("this URL was registered elsewhere while it was being screened")
            if found is None:
                node_id = store.insert_ws_node(
                    connection, plan_id=plan_id, chain_id=chain_id, url=url
                )
            else:
                node_id = found.id
                store.update_node(
                    connection,
                    t.ws_nodes,
                    node_id,
                    {"chain_id": chain_id, "status": NodeStatus.HEALTHY.value},
                )
            bump_config_version(connection)
            node = store.find_node(connection, t.ws_nodes, node_id=node_id)
        assert node is not None
        return Registered(node, existing is None, screening)

    return await asyncio.to_thread(write)


def _own_node(
    engine: Engine, provider_id: int, node_id: int, kind: NodeKind, *, deleted: bool = False
) -> Node:
    """The provider's node; one it deleted only with `deleted` (else it is hidden: 404)."""
    with engine.connect() as connection:
        node = store.find_node(connection, _table(kind), node_id=node_id)
    if (
        node is None
        or node.provider_id != provider_id
        or (node.status == NodeStatus.PROVIDER_DELETED.value and not deleted)
    ):
        raise NotFoundError(f"no node {node_id}")
    return node


def set_node_status(
    engine: Engine, provider_id: int, node_id: int, status: NodeStatus, kind: NodeKind
) -> Node:
    """`healthy` enables, `disabled by provider` disables, `provider-deleted` hides (the node is
    then 404 everywhere but here). Spec section 3 allows each from any state: a deleted node
    set `healthy` again (or disabled) comes back with its id, plan and capabilities."""
    owned = _own_node(engine, provider_id, node_id, kind, deleted=True)
    with engine.begin() as connection:
        values: dict[str, object] = {"status": status.value}
        if owned.status == NodeStatus.CORDONED.value:
            values.update(_lifted())
        store.update_node(connection, _table(kind), node_id, values)
        bump_config_version(connection)
        node = store.find_node(connection, _table(kind), node_id=node_id)
    assert node is not None
    return node


def _lifted() -> dict[str, object]:
    """What a cordon's end writes: the reason gone (its time and the disputed totals kept),
    watched for a day."""
    return {"cordon_reason": None, "watched_until": utcnow() + WATCHED_AFTER_CORDON}


def lift_cordon(engine: Engine, node_id: int) -> Node:
    """An administrator's action: the cordoned node serves again, watched for a day. 404 for no
    such node, 409 for a node not cordoned."""
    with engine.begin() as connection:
        node = store.find_node(connection, t.nodes, node_id=node_id)
        if node is None:
            raise NotFoundError(f"no node {node_id}")
        if node.status != NodeStatus.CORDONED.value:
            raise ConflictError(f"node {node_id} is not cordoned (it is {node.status!r})")
        values = {"status": NodeStatus.HEALTHY.value, **_lifted()}
        store.update_node(connection, t.nodes, node_id, values)
        bump_config_version(connection)
        lifted = store.find_node(connection, t.nodes, node_id=node_id)
    assert lifted is not None
    return lifted


def cordoned_nodes(
    engine: Engine, *, limit: int, offset: int
) -> list[tuple[Node, NodeChecksRecord]]:
    """Nodes cordoned now, or ever disputed: the administrator's list, latest cordon first,
    each with what audits and proofs found of it."""
    with engine.connect() as connection:
        found = store.cordoned_nodes(connection, limit=limit, offset=offset)
        checks = node_checks(connection, [node.id for node in found])
    return [(node, checks.get(node.id, NO_CHECKS)) for node in found]


def checks_of(engine: Engine, node_id: int) -> NodeChecksRecord:
    """What audits and proofs found of an HTTP node, in all (zeros: never checked)."""
    with engine.connect() as connection:
        return node_checks(connection, [node_id]).get(node_id, NO_CHECKS)


def any_node_status(engine: Engine, node_id: int) -> NodeStatusReport:
    """An administrator's view of any HTTP node's status (a provider's own: `node_status`);
    404 for no such node."""
    with engine.connect() as connection:
        node = store.find_node(connection, t.nodes, node_id=node_id)
        if node is None:
            raise NotFoundError(f"no node {node_id}")
        return _report(connection, node)


def provider_disputed(engine: Engine, provider_id: int) -> tuple[int, int]:
    """(answers, nano-credits) disputed of the provider's nodes, in all."""
    with engine.connect() as connection:
        return disputed_of(connection, provider_id)


@dataclass(frozen=True, slots=True)
class NodeStatusReport:
    node_id: int
    in_sync: bool
    status: str
    # What routers know the node can answer now, else what screening found over the declaration.
    capabilities: Capabilities | None = None
    health: NodeHealthRecord | None = None  # what routers last reported of it, if any did
    # The highest head an in-sync node of its chain last reported (the rule screening uses).
    chain_head: int | None = None
    # Why it is cordoned (status `cordoned`); its answers disputed, in all (router/cordon.py).
    cordon_reason: str | None = None
    disputed_calls: int = 0
    disputed_nano: int = 0
    # What audits and proofs found of it, in all routers' flushes (WebSocket nodes: none).
    checks: NodeChecksRecord = NO_CHECKS

    @property
    def head_lag(self) -> int | None:
        """Blocks behind `chain_head` at the node's last report; None when either is unknown."""
        if self.health is None or self.health.head_block is None or self.chain_head is None:
            return None
        return max(self.chain_head - self.health.head_block, 0)


def list_nodes(
    engine: Engine, provider_id: int, kind: NodeKind, *, limit: int, offset: int
) -> list[tuple[Node, NodeStatusReport]]:
    """The provider's nodes of one kind (not those it deleted), each with its status now."""
    with engine.connect() as connection:
        found = store.provider_nodes(
            connection, _table(kind), provider_id, limit=limit, offset=offset
        )
        return [(node, _report(connection, node)) for node in found]


def node_status(engine: Engine, provider_id: int, node_id: int, kind: NodeKind) -> NodeStatusReport:
    """The provider's setting, or for an enabled node what routers' health checks last saw."""
    node = _own_node(engine, provider_id, node_id, kind)
    with engine.connect() as connection:
        return _report(connection, node)


def _report(connection: Connection, node: Node) -> NodeStatusReport:
    health = store.node_health(connection, node.id, ws=node.ws)
    known = health.capabilities if health is not None else None
    if known is None and not node.ws:
        known = node.capabilities.overridden_by(node.verified_capabilities or Capabilities())
    if node.status != NodeStatus.HEALTHY.value:
        in_sync, status = (health.in_sync if health else False), node.status
    elif health is None:
        in_sync, status = True, STATUS_PENDING_CHECK
    elif health.consecutive_failures:
        in_sync, status = health.in_sync, STATUS_FAILING
    elif not health.in_sync:
        in_sync, status = False, STATUS_OUT_OF_SYNC
    else:
        in_sync, status = True, NodeStatus.HEALTHY.value
    head = store.chain_head(connection, node.chain_id)
    checks = NO_CHECKS if node.ws else node_checks(connection, [node.id]).get(node.id)
    return NodeStatusReport(
        node.id,
        in_sync,
        status,
        known,
        health,
        head,
        node.cordon_reason,
        node.disputed_calls,
        node.disputed_nano,
        checks or NO_CHECKS,
    )
