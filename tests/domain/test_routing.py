"""Routes and strategies (design notes, "Routing and billing"): which routes serve a call, at
what price, and in what order each strategy tries them."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.enums import NodeStatus, RoutingStrategy
from chainrouter.domain.routing import (
    MethodPrice,
    NodeInfo,
    PlanLimits,
    Route,
    RouteTable,
    order_routes,
)

CHAIN, OTHER_CHAIN = 1, 10
CHEAP_PLAN, DEAR_PLAN = 100, 200


def _table(*extra_prices: MethodPrice, statuses: dict[int, NodeStatus] | None = None) -> RouteTable:
    statuses = statuses or {}
    nodes = [
        NodeInfo(1, CHEAP_PLAN, CHAIN, "http://a", status=statuses.get(1, NodeStatus.HEALTHY)),
        NodeInfo(2, DEAR_PLAN, CHAIN, "http://b", status=statuses.get(2, NodeStatus.HEALTHY)),
        NodeInfo(3, DEAR_PLAN, OTHER_CHAIN, "http://c"),
        NodeInfo(4, CHEAP_PLAN, CHAIN, "http://d", node_target_type="archive"),
    ]
    plans = [PlanLimits(CHEAP_PLAN, provider_id=1), PlanLimits(DEAR_PLAN, provider_id=2)]
    prices = [
        MethodPrice(CHEAP_PLAN, "eth_call", 300),
        MethodPrice(DEAR_PLAN, "eth_call", 500),
        MethodPrice(DEAR_PLAN, "eth_getLogs", 900),
        *extra_prices,
    ]
    return RouteTable.build(nodes, plans, prices)


def _ids(routes: Iterable[Route]) -> list[int]:
    return [r.node.node_id for r in routes]


def test_routes_for_a_method_are_the_chain_nodes_whose_plan_prices_it_cheapest_first() -> None:
    routes = _table().routes(CHAIN, "eth_call")
    assert _ids(routes) == [1, 2]
    assert [r.cost_nano for r in routes] == [300, 500]


def test_a_method_priced_by_one_plan_only_routes_to_that_plans_nodes() -> None:
    assert _ids(_table().routes(CHAIN, "eth_getLogs")) == [2]
    assert _table().routes(CHAIN, "eth_unknown") == ()


def test_a_chain_specific_price_wins_over_the_all_chains_price() -> None:
    table = _table(MethodPrice(DEAR_PLAN, "eth_call", 100, chain_id=CHAIN))
    routes = table.routes(CHAIN, "eth_call")
    assert _ids(routes) == [2, 1]
    assert routes[0].cost_nano == 100
    assert [r.cost_nano for r in table.routes(OTHER_CHAIN, "eth_call")] == [500]


def test_a_price_for_another_node_target_type_does_not_apply() -> None:
    assert 4 not in _ids(_table().routes(CHAIN, "eth_call"))
    archive = _table(MethodPrice(CHEAP_PLAN, "eth_call", 1000, node_target_type="archive"))
    assert _ids(archive.routes(CHAIN, "eth_call")) == [1, 2, 4]


def test_disabled_and_deleted_nodes_never_route() -> None:
    table = _table(statuses={1: NodeStatus.DISABLED_BY_PROVIDER, 2: NodeStatus.PROVIDER_DELETED})
    assert table.routes(CHAIN, "eth_call") == ()
    assert table.serves_chain(CHAIN)  # node 4 is still healthy
    assert not _table().serves_chain(999)


def test_economy_keeps_cost_order_and_drops_nodes_out_of_sync() -> None:
    routes = _table().routes(CHAIN, "eth_call")
    assert _ids(order_routes(routes, RoutingStrategy.ECONOMY, set(), {})) == [1, 2]
    assert _ids(order_routes(routes, RoutingStrategy.ECONOMY, {1}, {})) == [2]


def test_performance_puts_the_fastest_measured_node_first() -> None:
    routes = _table().routes(CHAIN, "eth_call")
    ordered = order_routes(routes, RoutingStrategy.PERFORMANCE, set(), {1: 40.0, 2: 5.0})
    assert _ids(ordered) == [2, 1]
    assert _ids(order_routes(routes, RoutingStrategy.PERFORMANCE, {2}, {1: 40.0, 2: 5.0})) == [1]


def test_performance_tries_unmeasured_nodes_after_measured_ones_and_breaks_ties_on_cost() -> None:
    routes = _table().routes(CHAIN, "eth_call")
    ordered = order_routes(routes, RoutingStrategy.PERFORMANCE, set(), {2: 50.0})
    assert _ids(ordered) == [2, 1]
    equal = order_routes(routes, RoutingStrategy.PERFORMANCE, set(), {1: 9.0, 2: 9.0})
    assert _ids(equal) == [1, 2]


def test_resolved_routes_are_cached_per_chain_and_method() -> None:
    table = _table()
    assert table.routes(CHAIN, "eth_call") is table.routes(CHAIN, "eth_call")


def test_a_method_no_plan_prices_has_no_routes_and_is_not_kept() -> None:
    """Callers choose method names: unpriced ones would otherwise grow the table for as long as
    the snapshot lives."""
    table = _table()
    before = len(table._cache)
    for n in range(1000):
        assert table.routes(CHAIN, f"{'x' * 5000}{n}") == ()
    assert len(table._cache) == before


@given(
    st.lists(
        st.tuples(st.integers(1, 20), st.integers(0, 10**6), st.booleans()),
        min_size=1,
        max_size=12,
        unique_by=lambda t: t[0],
    )
)
def test_every_strategy_orders_a_permutation_of_the_in_sync_routes(
    nodes: list[tuple[int, int, bool]],
) -> None:
    table = RouteTable.build(
        [NodeInfo(node_id, node_id, CHAIN, f"http://n{node_id}") for node_id, _, _ in nodes],
        [PlanLimits(node_id, provider_id=node_id) for node_id, _, _ in nodes],
        [MethodPrice(node_id, "m", cost) for node_id, cost, _ in nodes],
    )
    routes = table.routes(CHAIN, "m")
    assert [r.cost_nano for r in routes] == sorted(cost for _, cost, _ in nodes)
    sync = {node_id: in_sync for node_id, _, in_sync in nodes}
    for strategy in RoutingStrategy:
        ordered = order_routes(
            routes,
            strategy,
            {n for n, in_sync in sync.items() if not in_sync},
            {n: float(n % 5) for n in sync},
        )
        assert sorted(_ids(ordered)) == sorted(n for n, s in sync.items() if s)
