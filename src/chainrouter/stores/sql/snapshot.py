"""Loading a `RouterSnapshot`: a handful of whole-table reads, no per-request queries after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.enums import NodeStatus, RoutingStrategy
from chainrouter.domain.routing import MethodPrice, NodeInfo, PlanLimits, RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.ws_routes import WS_TARGET_TYPE, WsRoute, WsRouteTable, priced_kinds
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.chains import cache_generations
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.plan_usage import plan_standings, terms_of
from chainrouter.stores.sql.plans import effective_cost_nano
from chainrouter.stores.sql.schema import utcnow


def load_router_snapshot(connection: Connection) -> RouterSnapshot:
    """Read a consistent snapshot; call inside one transaction so the parts agree."""
    version = read_config_version(connection)
    keys = {
        row.key_hash: KeyAccess(
            key_id=row.id,
            customer_id=row.customer_id,
            allowed_domains=tuple(row.allowed_domains),
            strategy=RoutingStrategy(row.routing_strategy),
            bypass_credit_check=row.bypass_credit_check,
            rate_limit=row.rate_limit,
            rate_limit_interval_s=row.rate_limit_interval_sec,
            verified=row.verified,
            max_price_nano=row.max_price_per_call_nano,
        )
        for row in connection.execute(select(t.api_keys).where(t.api_keys.c.active.is_(True)))
    }
    balances = dict(connection.execute(select(t.customers.c.id, t.customers.c.balance_nano)).all())
    return RouterSnapshot(
        version=version,
        keys_by_hash=keys,
        routes=load_route_table(connection),
        balances_nano=balances,
        ws_routes=load_ws_routes(connection),
        cache_generations=cache_generations(connection),
        cordoned=frozenset(
            connection.execute(
                select(t.nodes.c.id).where(t.nodes.c.status == NodeStatus.CORDONED.value)
            ).scalars()
        ),
        next_price_at=next_price_at(connection),
    )


def next_price_at(connection: Connection) -> datetime | None:
    """When the next price set with notice applies (the routers load their prices again then)."""
    due = t.plan_methods.c.next_cost_from
    found = connection.execute(select(func.min(due)).where(due > utcnow())).scalar()
    if found is None:
        return None
    assert isinstance(found, datetime)
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def load_ws_routes(connection: Connection, now: datetime | None = None) -> WsRouteTable:
    """Enabled WebSocket nodes with their plans' notification prices on their chains, each as
    it charges at `now` (default: now)."""
    now = now or utcnow()
    rows = [
        (row.plan_id, row.method, row.chain_id, effective_cost_nano(row, now))
        for row in connection.execute(
            select(
                t.plan_methods.c.plan_id,
                t.plan_methods.c.method,
                t.plan_methods.c.chain_id,
                t.plan_methods.c.cost_nano,
                t.plan_methods.c.next_cost_nano,
                t.plan_methods.c.next_cost_from,
            ).where(t.plan_methods.c.node_target_type == WS_TARGET_TYPE)
        )
    ]
    nodes = connection.execute(
        select(t.ws_nodes).where(t.ws_nodes.c.status == NodeStatus.HEALTHY.value)
    )
    return WsRouteTable.build(
        WsRoute(
            node_id=row.id,
            plan_id=row.plan_id,
            chain_id=row.chain_id,
            url=row.url,
            prices=priced_kinds(rows, row.plan_id, row.chain_id),
        )
        for row in nodes
    )


def load_route_table(connection: Connection, now: datetime | None = None) -> RouteTable:
    """Healthy nodes, plans and prices, indexed for routing (and for the public price list);
    each price row as it charges at `now` (default: now)."""
    plans_table = select(t.plans.c.id, t.plans.c.provider_id)
    provider_of = {row.id: row.provider_id for row in connection.execute(plans_table)}
    nodes = [
        NodeInfo(
            node_id=row.id,
            plan_id=row.plan_id,
            chain_id=row.chain_id,
            url=row.url,
            node_target_type=row.node_target_type,
            status=NodeStatus(row.status),
            rate_limit=row.rate_limit,
            rate_limit_interval_s=row.rate_limit_interval_sec,
            capabilities=_capabilities(row.capabilities, row.verified_capabilities),
            provider_id=provider_of[row.plan_id],
            watched_until=_watched_until(row.created_at, row.watched_until),
        )
        for row in connection.execute(
            select(t.nodes).where(t.nodes.c.status == NodeStatus.HEALTHY.value)
        )
    ]
    plans = []
    terms = {}
    for row in connection.execute(select(t.plans)):
        terms[row.id] = plan_terms = terms_of(row)
        plans.append(
            PlanLimits(
                plan_id=row.id,
                provider_id=row.provider_id,
                requests=row.rate_limit_req,
                requests_interval_s=row.rate_limit_req_interval_sec,
                credits_nano=row.rate_limit_cr_nano,
                credits_interval_s=row.rate_limit_cr_interval_sec,
                quota=plan_terms.quota,
                cycle=plan_terms.cycle,
            )
        )
    now = now or utcnow()
    prices = [
        _method_price(row, effective_cost_nano(row, now))
        for row in connection.execute(select(t.plan_methods))
    ]
    return RouteTable.build(nodes, plans, prices).with_standings(plan_standings(connection, terms))


def scheduled_prices(
    connection: Connection, now: datetime | None = None
) -> list[tuple[datetime, tuple[MethodPrice, ...]]]:
    """The prices set with notice that apply after `now`, grouped by when they apply, earliest
    first: each the row as it will charge from then (`PricesAhead.reprice` takes them)."""
    now = now or utcnow()
    due = t.plan_methods.c.next_cost_from
    query = (
        select(t.plan_methods)
        .where(due > now, t.plan_methods.c.next_cost_nano.is_not(None))
        .order_by(due)
    )
    grouped: dict[datetime, list[MethodPrice]] = {}
    for row in connection.execute(query):
        when = row.next_cost_from
        when = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
        grouped.setdefault(when, []).append(_method_price(row, int(row.next_cost_nano)))
    return [(when, tuple(found)) for when, found in sorted(grouped.items())]


def scheduled_ws_times(connection: Connection, now: datetime | None = None) -> list[datetime]:
    """When notification prices set with notice apply after `now`, earliest first."""
    now = now or utcnow()
    due = t.plan_methods.c.next_cost_from
    query = select(due).where(due > now, t.plan_methods.c.node_target_type == WS_TARGET_TYPE)
    found = connection.scalars(query.distinct())
    return sorted({when if when.tzinfo else when.replace(tzinfo=UTC) for when in found})


def _method_price(row: Any, cost_nano: int) -> MethodPrice:
    return MethodPrice(
        plan_id=row.plan_id,
        method=row.method,
        cost_nano=cost_nano,
        node_target_type=row.node_target_type,
        chain_id=row.chain_id,
        rate_limit=row.rate_limit,
        rate_limit_interval_s=row.rate_limit_interval_sec,
    )


def _capabilities(declared: dict[str, Any] | None, verified: dict[str, Any] | None) -> Capabilities:
    """What the router starts from: the declaration, with screening's findings over it."""
    if declared is None and verified is None:
        return UNKNOWN
    return Capabilities.from_json(declared).overridden_by(Capabilities.from_json(verified))


_WATCHED_YOUNG = timedelta(days=1)


def _watched_until(created_at: datetime, watched_until: datetime | None) -> float:
    """Until when a node's answers are audited at the higher rate (Unix seconds): a day from
    its registration, or the end of its watch once back from a cordon, whichever is later."""
    young = created_at + _WATCHED_YOUNG
    until = young if watched_until is None else max(young, watched_until)
    return until.timestamp()
