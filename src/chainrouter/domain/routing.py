"""Routes: which node may serve a method on a chain, under which plan, at what price.

A route is a node, the plan it belongs to, and the plan's price row for the method (a row for the
chain wins over the all-chains row). The `RouteTable` is built once from storage and answers
"which routes serve (chain, method)" with a cached tuple in economy order: what one more call
costs the operator first (nothing within a plan's quota, its overage price beyond it), then the
price the customer pays; routes of plans that used up their overage limit are left out until
their cycle ends (`domain/plan_cycle.py`). Strategies then order that tuple for one request using
live node health.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime

from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.enums import NodeStatus, RoutingStrategy
from chainrouter.domain.plan_cycle import CALENDAR_MONTHS, BillingCycle, PlanQuota, Standing


@dataclass(frozen=True, slots=True)
class PlanLimits:
    """A plan's own limits across all its nodes (None: unlimited)."""

    plan_id: int
    provider_id: int
    requests: int | None = None
    requests_interval_s: int | None = None
    credits_nano: int | None = None
    credits_interval_s: int | None = None
    quota: PlanQuota | None = None  # None: a flat plan
    cycle: BillingCycle = CALENDAR_MONTHS


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: int
    plan_id: int
    chain_id: int
    url: str
    node_target_type: str = "full"
    status: NodeStatus = NodeStatus.HEALTHY
    rate_limit: int = 0  # requests per interval; 0: unlimited
    rate_limit_interval_s: int = 1
    capabilities: Capabilities = UNKNOWN  # as declared by its provider or the operator
    # Its plan's provider: a chain's head is the highest that nodes of two providers reached.
    provider_id: int = 0
    # Until when (Unix seconds) its answers are audited at the higher rate: a day after it was
    # added, or after it came back from a cordon (router/audits.py).
    watched_until: float = 0.0


@dataclass(frozen=True, slots=True)
class MethodPrice:
    plan_id: int
    method: str
    cost_nano: int
    node_target_type: str = "full"
    chain_id: int | None = None  # None: every chain
    rate_limit: int | None = None
    rate_limit_interval_s: int | None = None


@dataclass(frozen=True, slots=True)
class Route:
    node: NodeInfo
    plan: PlanLimits
    price: MethodPrice

    @property
    def cost_nano(self) -> int:
        return self.price.cost_nano


@dataclass(slots=True)
class RouteTable:
    """Routes per (chain, method), resolved on first use and kept for the table's lifetime.

    Only nodes whose status is `healthy` take part; disabled and deleted nodes never route.
    """

    nodes_by_chain: Mapping[int, tuple[NodeInfo, ...]]
    plans: Mapping[int, PlanLimits]
    # (plan_id, node_target_type, method, chain_id or None) -> price
    prices: Mapping[tuple[int, str, str, int | None], MethodPrice]
    methods_by_plan: Mapping[int, frozenset[str]]
    # Each metered plan's standing in its current cycle; a plan not here is unmetered.
    standings: Mapping[int, Standing] = field(default_factory=dict)
    _cache: dict[tuple[int, str], tuple[Route, ...]] = field(default_factory=dict)
    _priced: frozenset[str] = frozenset()  # every method some plan prices

    def __post_init__(self) -> None:
        self._priced = frozenset().union(*self.methods_by_plan.values())

    @classmethod
    def build(
        cls, nodes: Iterable[NodeInfo], plans: Iterable[PlanLimits], prices: Iterable[MethodPrice]
    ) -> RouteTable:
        by_chain: dict[int, list[NodeInfo]] = {}
        for node in nodes:
            if node.status is NodeStatus.HEALTHY:
                by_chain.setdefault(node.chain_id, []).append(node)
        price_map = {(p.plan_id, p.node_target_type, p.method, p.chain_id): p for p in prices}
        methods: dict[int, set[str]] = {}
        for plan_id, _, method, _ in price_map:
            methods.setdefault(plan_id, set()).add(method)
        return cls(
            nodes_by_chain={chain: tuple(found) for chain, found in by_chain.items()},
            plans={plan.plan_id: plan for plan in plans},
            prices=price_map,
            methods_by_plan={plan: frozenset(found) for plan, found in methods.items()},
        )

    def with_standings(self, standings: Mapping[int, Standing]) -> RouteTable:
        """The same routes, ordered and filtered by these plan standings."""
        return RouteTable(
            self.nodes_by_chain, self.plans, self.prices, self.methods_by_plan, dict(standings)
        )

    def looking_ahead(self) -> PricesAhead:
        """A copy whose prices can be moved on to scheduled ones (the public price list's view
        of what routers will charge later); this table stays as it is."""
        return PricesAhead(
            self.nodes_by_chain,
            self.plans,
            dict(self.prices),
            self.methods_by_plan,
            self.standings,
        )

    def serves_chain(self, chain_id: int) -> bool:
        return chain_id in self.nodes_by_chain

    def offered(self) -> Iterator[tuple[int, str, tuple[Route, ...]]]:
        """Every (chain, method) with at least one route, by chain then method."""
        for chain_id in sorted(self.nodes_by_chain):
            methods: set[str] = set()
            for node in self.nodes_by_chain[chain_id]:
                methods |= self.methods_by_plan.get(node.plan_id, frozenset())
            for method in sorted(methods):
                found = self.routes(chain_id, method)
                if found:
                    yield chain_id, method, found

    def routes(self, chain_id: int, method: str) -> tuple[Route, ...]:
        """Routes able to serve `method` on `chain_id`, in economy order (ties: lowest node
        id), without those of exhausted plans."""
        key = (chain_id, method)
        found = self._cache.get(key)
        if found is None:
            if method not in self._priced:
                return ()  # not kept: callers choose these names, and the table would grow
            found = self._resolve(chain_id, method)
            self._cache[key] = found
        return found

    def only_exhausted(self, chain_id: int, method: str) -> bool:
        """Whether `method` on `chain_id` has routes, all of plans that used up their overage
        limit (not cached: only a refusal asks)."""
        return not self.routes(chain_id, method) and bool(
            self._resolve(chain_id, method, exhausted=True)
        )

    def _resolve(self, chain_id: int, method: str, exhausted: bool = False) -> tuple[Route, ...]:
        resolved = []
        standings = {} if exhausted else self.standings
        for node in self.nodes_by_chain.get(chain_id, ()):
            plan = self.plans.get(node.plan_id)
            if plan is None or method not in self.methods_by_plan.get(node.plan_id, ()):
                continue
            if standings.get(plan.plan_id) is Standing.EXHAUSTED:
                continue
            price = self.price(node, method, chain_id)
            if price is not None:
                resolved.append(Route(node, plan, price))
        resolved.sort(key=lambda r: (self.operator_cost(r), r.price.cost_nano, r.node.node_id))
        return tuple(resolved)

    def price(self, node: NodeInfo, method: str, chain_id: int) -> MethodPrice | None:
        """What `node`'s plan charges for `method` on `chain_id`: its row for the chain, else
        its all-chains row; None when the plan does not price the method."""
        target = node.node_target_type
        return self.prices.get((node.plan_id, target, method, chain_id)) or self.prices.get(
            (node.plan_id, target, method, None)
        )

    def operator_cost(self, route: Route) -> int:
        """What one more call on `route` costs the operator (plan_cycle.PlanQuota.overage_cost
        units): nothing unless its plan is in overage."""
        quota = route.plan.quota
        if quota is None or self.standings.get(route.plan.plan_id) is not Standing.OVERAGE:
            return 0
        return quota.overage_cost(route.price.cost_nano)


class PricesAhead(RouteTable):
    """A route table of one's own whose prices are moved on in place, time after time, each
    step costing what it changes (a table routers read never changes under them)."""

    def reprice(self, prices: Iterable[MethodPrice]) -> None:
        """These price rows in place of those of the same identity (rows that exist: a price
        set with notice is a change of one), the routes they change resolved again."""
        changed = {(p.plan_id, p.node_target_type, p.method, p.chain_id): p for p in prices}
        assert isinstance(self.prices, dict)
        self.prices.update(changed)
        methods = {method for _, _, method, _ in changed}
        for key in [key for key in self._cache if key[1] in methods]:
            del self._cache[key]


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """What the health checker last saw of a node."""

    in_sync: bool = True
    latency_ms: float | None = None  # smoothed; None: not measured yet


@dataclass(frozen=True, slots=True)
class HealthReport:
    """One node's health as stored for other processes (the API's node status and prices)."""

    node_id: int
    in_sync: bool
    head_block: int | None
    latency_ms: float | None
    consecutive_failures: int
    checked_at: datetime
    capabilities: dict[str, object] | None = None  # Capabilities.as_json() as the router knows


def order_routes(
    routes: tuple[Route, ...],
    strategy: RoutingStrategy,
    out_of_sync: Set[int],
    latency_ms: Mapping[int, float],
) -> Sequence[Route]:
    """The order in which to try `routes` for one request.

    Nodes in `out_of_sync` are dropped. `economy` keeps the cost order; `performance` puts the
    lowest latency in `latency_ms` first, unmeasured nodes after measured ones, and breaks ties
    on cost, so that equal speed goes to the cheaper route.
    """
    in_sync = [r for r in routes if r.node.node_id not in out_of_sync] if out_of_sync else routes
    if strategy is RoutingStrategy.ECONOMY:
        return in_sync

    def speed(route: Route) -> tuple[bool, float, int, int]:
        latency = latency_ms.get(route.node.node_id)
        return (latency is None, latency or 0.0, route.price.cost_nano, route.node.node_id)

    return sorted(in_sync, key=speed)
