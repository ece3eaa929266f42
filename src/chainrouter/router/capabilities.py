"""What each node can answer right now, and which nodes can answer a call (design notes, "Node
capabilities"; docs/router.md).

A node's capabilities come from three sources, the later ones winning: what its provider (or
the operator) declared on the node record; what the last probe found (`router/probes.py`, at
screening and then in the background); and what the node's own errors taught since that probe
(`learn`), which only ever narrows them. The next probe replaces what was learned, so one
transient error keeps a node away from a kind of call for one probe interval at most.

Nothing a caller sends is learned from unless it is the node's own account of itself: a block
it does not keep (at or behind its own head), a namespace or method it does not serve, a block
range it states. A result-size limit, which depends on the query, teaches nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.requirements import Needs, logs_span
from chainrouter.domain.routing import NodeInfo, Route
from chainrouter.domain.upstream_errors import Fault, NodeFault
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router import epochs
from chainrouter.router.health import HealthMonitor

REFUSAL_STATUS = 422  # HTTP status of a capability refusal (docs/router.md)


# Blocks behind a node's head within which its "not found" says nothing of the history it
# keeps (a backend a little behind the one its health check reached).
_NEAR_HEAD = 10


class Shortfall(Enum):
    """A requirement a node does not meet."""

    NAMESPACE = "namespace"
    STATE = "state"
    HISTORY = "history"
    LOGS_RANGE = "logs_range"
    METHOD = "method"


@dataclass(frozen=True, slots=True)
class _Known:
    declared: Capabilities  # the object it was computed from: recomputed when it changes
    effective: Capabilities


class CapabilityBook:
    def __init__(self, health: HealthMonitor) -> None:
        self._health = health
        self._probed: dict[int, Capabilities] = {}
        self._learned: dict[int, Capabilities] = {}
        self._known: dict[int, _Known] = {}
        # Whether any node was found to lack a method: until then, calls that need nothing
        # particular skip the eligibility check.
        self.any_missing_methods = False
        self.taught: set[int] = set()  # nodes that taught something since their last probe

    def of(self, node: NodeInfo) -> Capabilities:
        """The node's capabilities as the router knows them now."""
        known = self._known.get(node.node_id)
        if known is not None and known.declared is node.capabilities:
            return known.effective
        effective = node.capabilities
        probed = self._probed.get(node.node_id)
        if probed is not None:
            effective = effective.overridden_by(probed)
        learned = self._learned.get(node.node_id)
        if learned is not None:
            effective = effective.narrowed(learned)
        self._known[node.node_id] = _Known(node.capabilities, effective)
        return effective

    def probed(self, node_id: int, found: Capabilities) -> None:
        """A probe's findings: they replace what was probed and learned before."""
        self._probed[node_id] = found
        self._learned.pop(node_id, None)
        self.taught.discard(node_id)
        self._known.pop(node_id, None)
        self._health.epochs.bump(epochs.node(node_id))

    def learned_of(self, node_id: int) -> Capabilities | None:
        return self._learned.get(node_id)

    def probed_of(self, node_id: int) -> Capabilities | None:
        return self._probed.get(node_id)

    def learn(self, node: NodeInfo, fault: NodeFault, needs: Needs, method: str) -> bool:
        """Narrow what `node` is known to serve after it failed a call with `fault`; True if
        something was learned."""
        lesson = self._lesson(node, fault, needs, method)
        if lesson is None:
            return False
        previous = self._learned.get(node.node_id, UNKNOWN)
        self._learned[node.node_id] = previous.narrowed(lesson)
        self.taught.add(node.node_id)
        if lesson.missing_methods:
            self.any_missing_methods = True
        self._known.pop(node.node_id, None)
        self._health.epochs.bump(epochs.node(node.node_id))
        return True

    def _lesson(
        self, node: NodeInfo, fault: NodeFault, needs: Needs, method: str
    ) -> Capabilities | None:
        head = self._health.node_head(node.node_id)  # its own: the chain's may be ahead of it
        kind = fault.fault
        if kind is Fault.METHOD_MISSING:
            # That method only: a node often lacks one method of a namespace it serves
            # (`debug_getBadBlocks`, `trace_rawTransaction`); the probes judge the namespace.
            return UNKNOWN.with_missing(method)
        if kind is Fault.RANGE_LIMIT:
            if method != "eth_getLogs":
                return None  # a limit of trace_filter's (often narrower) is not the logs' one
            span = logs_span(needs)
            if span is None or span <= 1:
                return None
            stated = fault.limit
            return Capabilities(logs_max_range=stated if stated and stated < span else span - 1)
        if head is None:
            return None  # a block it lacks says nothing unless it is behind the node's head
        # Only a block well behind the node's head says what history it keeps: near the head, a
        # provider's backend a block or two behind the one its health check reached says "not
        # found" too, and one call there would take all its history away.
        settled = head - _NEAR_HEAD
        if kind is Fault.STATE_MISSING and needs.state_at is not None:
            if needs.state_at < settled:
                return Capabilities(state_depth=head - needs.state_at - 1)
            return None
        if kind is Fault.BLOCK_MISSING:
            single = needs.history_from if needs.history_from == needs.history_to else None
            block = single if single is not None else needs.state_at
            if block is not None and block < settled:
                return Capabilities(blocks_from=block + 1)
        return None

    def forget_except(self, node_ids: set[int]) -> None:
        for table in (self._probed, self._learned, self._known):
            for gone in [n for n in table if n not in node_ids]:
                del table[gone]

    # -- eligibility -------------------------------------------------------------------------

    def shortfalls(self, node: NodeInfo, needs: Needs, method: str) -> frozenset[Shortfall]:
        """The requirements of a call that `node` is known not to meet (empty: eligible)."""
        caps = self.of(node)
        missing: set[Shortfall] = set()
        if method in caps.missing_methods:
            missing.add(Shortfall.METHOD)
        namespace = needs.namespace
        if (namespace == "trace" and caps.trace is False) or (
            namespace == "debug" and caps.debug is False
        ):
            missing.add(Shortfall.NAMESPACE)
        blocks_from = caps.blocks_from
        if blocks_from is not None:
            oldest_read = needs.oldest_block
            if oldest_read is not None and oldest_read < blocks_from:
                missing.add(Shortfall.HISTORY)
        if needs.state_at is not None:
            oldest = caps.oldest_state(self._node_head(node))
            if oldest is not None and needs.state_at < oldest:
                missing.add(Shortfall.STATE)
        if caps.logs_max_range is not None and method == "eth_getLogs":
            span = logs_span(needs)
            if span is not None and span > caps.logs_max_range:
                missing.add(Shortfall.LOGS_RANGE)
        return frozenset(missing)

    def eligible(
        self, routes: Sequence[Route], needs: Needs, method: str
    ) -> tuple[list[Route], list[frozenset[Shortfall]]]:
        """The routes whose node meets the call's needs, in order; and, for the others, what
        each lacks."""
        able: list[Route] = []
        lacking: list[frozenset[Shortfall]] = []
        for route in routes:
            missing = self.shortfalls(route.node, needs, method)
            if missing:
                lacking.append(missing)
            else:
                able.append(route)
        return able, lacking

    def _node_head(self, node: NodeInfo) -> int | None:
        return self._health.node_head(node.node_id) or self._health.chain_head(node.chain_id)

    # -- explaining ----------------------------------------------------------------------------

    def refusal(
        self,
        routes: Iterable[Route],
        needs: Needs,
        method: str,
        chain_id: int,
        lacking: Sequence[frozenset[Shortfall]],
    ) -> RpcError:
        """Why no node can answer a call that every route in `routes` fell short of; `lacking`
        holds what each lacks (design notes: -32011, -32012, -32007, -32005, -32013)."""
        nodes = [route.node for route in routes]
        common = frozenset.intersection(*lacking) if lacking else frozenset()
        if not common:
            names = sorted(_describe(s, needs) for s in frozenset().union(*lacking))
            return RpcError(
                REFUSAL_STATUS,
                RpcCode.NO_SINGLE_PROVIDER,
                f"no single node of chain {chain_id} meets all of: {', '.join(names)}; "
                "each is met by some node",
                data={"requirements": sorted(s.value for s in frozenset().union(*lacking))},
            )
        tracing = needs.namespace in ("trace", "debug")
        if Shortfall.NAMESPACE in common or (tracing and Shortfall.METHOD in common):
            namespace = needs.namespace or "trace"
            served = f"{namespace}_*" if Shortfall.NAMESPACE in common else method[:100]
            return RpcError(
                REFUSAL_STATUS,
                RpcCode.NO_OPCODE_CAPABLE_NODES,
                f"no node of chain {chain_id} serves {served} (tracing): {method[:100]} "
                "cannot be answered",
                data={"requirement": namespace},
            )
        if Shortfall.STATE in common:
            oldest = self._best(nodes, lambda n: self.of(n).oldest_state(self._node_head(n)))
            block = needs.state_at
            return RpcError(
                REFUSAL_STATUS,
                RpcCode.INSUFFICIENT_HISTORY,
                f"insufficient historical state depth: block {block:,} is older than the oldest "
                f"state kept by any node ({_block(oldest)})",
                data={"requirement": "state", "block": block, "oldest_available": oldest},
            )
        if Shortfall.HISTORY in common:
            oldest = self._best(nodes, lambda n: self.of(n).blocks_from)
            block = needs.oldest_block
            return RpcError(
                REFUSAL_STATUS,
                RpcCode.NO_BLOCK_PARAM_CAPABLE_NODES,
                f"no node serves block {block:,}: it is older than the oldest block kept by any "
                f"node ({_block(oldest)})",
                data={"requirement": "history", "block": block, "oldest_available": oldest},
            )
        if Shortfall.LOGS_RANGE in common:
            widest = max((self.of(n).logs_max_range or 0) for n in nodes)
            return logs_range_refusal(logs_span(needs) or 0, widest)
        return RpcError(
            422,
            RpcCode.METHOD_NOT_SUPPORTED,
            f"no node of chain {chain_id} serves {method[:100]!r}",
            data={"requirement": "method"},
        )

    @staticmethod
    def _best(nodes: Iterable[NodeInfo], value: Callable[[NodeInfo], int | None]) -> int | None:
        """The lowest known `value` among `nodes` (the best any of them offers)."""
        found = [v for v in map(value, nodes) if v is not None]
        return min(found) if found else None


def logs_range_refusal(span: int, widest: int) -> RpcError:
    """-32005 with the hint clients split ranges by (HTTP 200, like a node's own answer)."""
    return RpcError(
        200,
        RpcCode.LOG_RANGE_TOO_LARGE,
        f"eth_getLogs over {span} blocks exceeds the limit; "
        f"try a block range of at most {widest} blocks",
        data=widest,
    )


def _describe(shortfall: Shortfall, needs: Needs) -> str:
    if shortfall is Shortfall.NAMESPACE:
        return f"{needs.namespace} namespace"
    if shortfall is Shortfall.STATE:
        return f"state at block {needs.state_at:,}"
    if shortfall is Shortfall.HISTORY:
        return f"history from block {needs.oldest_block:,}"
    if shortfall is Shortfall.LOGS_RANGE:
        return f"an eth_getLogs range of {logs_span(needs) or 0:,} blocks"
    return "the method"


def _block(number: int | None) -> str:
    return "unknown" if number is None else f"block {number:,}"
