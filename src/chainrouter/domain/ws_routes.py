"""WebSocket routes: a provider's WebSocket node on a chain, with what its plan charges per
notification of each subscription kind (a plan method row with `node_target_type` "ws" whose
`method` names the kind, e.g. newHeads; a row for the chain wins over the all-chains one, as for
HTTP routes). A node none of whose kinds is priced on its chain is no route: nobody could be
billed for what it sends."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field

from chainrouter.domain.enums import RoutingStrategy

WS_TARGET_TYPE = "ws"


@dataclass(frozen=True, slots=True)
class WsRoute:
    node_id: int
    plan_id: int
    chain_id: int
    url: str
    prices: Mapping[str, int]  # subscription kind -> nano-credits per notification

    def price(self, kind: str) -> int | None:
        return self.prices.get(kind)


@dataclass(frozen=True, slots=True)
class WsRouteTable:
    """The WebSocket routes of every chain, in economy order: the cheapest `newHeads` first
    (every feed follows heads), then the cheapest `logs`, then the lower node id."""

    by_chain: Mapping[int, tuple[WsRoute, ...]] = field(default_factory=dict)

    @classmethod
    def build(cls, routes: Iterable[WsRoute]) -> WsRouteTable:
        found: dict[int, list[WsRoute]] = {}
        for route in routes:
            if route.prices:
                found.setdefault(route.chain_id, []).append(route)
        big = 1 << 63

        def cost(route: WsRoute) -> tuple[int, int, int]:
            heads, logs = route.price("newHeads"), route.price("logs")
            return (big if heads is None else heads, big if logs is None else logs, route.node_id)

        return cls({chain: tuple(sorted(rs, key=cost)) for chain, rs in found.items()})

    def routes(self, chain_id: int) -> tuple[WsRoute, ...]:
        return self.by_chain.get(chain_id, ())

    def serves(self, chain_id: int, kind: str) -> bool:
        return any(route.price(kind) is not None for route in self.routes(chain_id))


def priced_kinds(
    rows: Iterable[tuple[int, str, int | None, int]], plan_id: int, chain_id: int
) -> dict[str, int]:
    """A plan's price per subscription kind on a chain, from its rows (plan, kind, chain or None,
    nano-credits): the chain's own row wins over the all-chains one."""
    general: dict[str, int] = {}
    own: dict[str, int] = {}
    for row_plan, kind, row_chain, cost in rows:
        if row_plan != plan_id:
            continue
        if row_chain == chain_id:
            own[kind] = cost
        elif row_chain is None:
            general[kind] = cost
    return general | own


def order_ws_routes(
    routes: Sequence[WsRoute],
    strategy: RoutingStrategy,
    out: Set[int],
    latency_ms: Mapping[int, float],
) -> list[WsRoute]:
    """The order a feed of `strategy` tries `routes` (given in cost order) in: economy keeps the
    cost order, performance puts the lowest latency first (unmeasured after, ties by cost);
    nodes in `out` (failing or out of sync) come last, tried only when no other is left."""
    ranked = list(routes)
    if strategy is RoutingStrategy.PERFORMANCE:
        position = {route.node_id: index for index, route in enumerate(routes)}

        def speed(route: WsRoute) -> tuple[bool, float, int]:
            measured = latency_ms.get(route.node_id)
            return (measured is None, measured or 0.0, position[route.node_id])

        ranked.sort(key=speed)
    if not out:
        return ranked
    return [r for r in ranked if r.node_id not in out] + [r for r in ranked if r.node_id in out]


def notification_price(ordered: Sequence[WsRoute], kind: str) -> int | None:
    """What a notification of `kind` costs on a feed that tries `ordered`: the price of the first
    route that offers the kind."""
    return next((price for r in ordered if (price := r.price(kind)) is not None), None)
