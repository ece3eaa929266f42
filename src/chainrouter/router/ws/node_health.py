"""WebSocket nodes' health, checked as HTTP nodes' is (router/health.py) and told by the feeds.

Every `interval_s` each WebSocket node is dialled and asked, over one connection: `eth_chainId`
(a node re-pointed at another chain gets no subscriber), `eth_subscribe` to `newHeads` (what a
feed needs of it; the subscription is dropped straight after) and `eth_blockNumber`, whose round
trip is the node's latency sample. A node fails its check when any of that fails or times out;
it is out of sync when its head is more than `max_block_lag` behind the chain's (the HTTP
checks' head, or the highest WebSocket node's when the chain has no HTTP node).

The feeds report too: a feed that had to leave its node (closed, silent, behind) marks it
failing at once, so that the chain's other feeds do not pick it until a check passes; a head
the feed received moves the node's head forward.

`order` is what the hub gives its feeds: usable nodes in the strategy's order (economy: the
routes' cost order; performance: lowest latency first, unmeasured after), then the others, as
a last resort when every usable node is down. The checker runs on the hub's event loop; the
router's storage sync writes `take_reports` to `ws_node_health`, which the provider's node
status reads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import HealthReport
from chainrouter.domain.ws_routes import WsRoute, order_ws_routes
from chainrouter.router.ws.feed import Connect
from chainrouter.router.ws.upstream import NodeError, UpstreamClosedError

log = logging.getLogger(__name__)

_SMOOTHING = 0.2  # weight of a new latency sample, as for HTTP nodes
_LOG_EVERY = 20  # a node failing check after check is logged once in this many


@dataclass(frozen=True, slots=True)
class WsHealthPolicy:
    interval_s: float = 30.0
    timeout_s: float = 5.0  # for dialling, and for each call of a check
    max_block_lag: int = 10
    concurrency: int = 8  # checks in flight at once


@dataclass(slots=True)
class WsNodeState:
    chain_id: int
    head: int | None = None
    failures: int = 0  # consecutive failed checks (a feed leaving the node counts as one)
    checked_at: float | None = None  # monotonic
    last_error: str | None = None
    in_sync: bool = True  # not behind the chain's head (unknown counts as in sync)


class WsCheckError(Exception):
    """Why a WebSocket node failed its check."""


class WsNodeHealth:
    def __init__(
        self,
        connect: Connect,
        chain_head: Callable[[int], int | None] = lambda chain_id: None,
        policy: WsHealthPolicy | None = None,
    ) -> None:
        self._connect = connect
        self._chain_head = chain_head
        self._policy = policy or WsHealthPolicy()
        self._states: dict[int, WsNodeState] = {}
        self._out: set[int] = set()  # failing, on another chain, or out of sync
        self._latency_ms: dict[int, float] = {}
        self._unreported: set[int] = set()

    # -- read by the hub ---------------------------------------------------------------------

    def usable(self, node_id: int) -> bool:
        return node_id not in self._out

    @property
    def latency_ms(self) -> Mapping[int, float]:
        return self._latency_ms

    def state(self, node_id: int) -> WsNodeState | None:
        return self._states.get(node_id)

    def order(self, routes: Sequence[WsRoute], strategy: RoutingStrategy) -> list[WsRoute]:
        """`routes` (in cost order) in the order a feed of `strategy` should try them."""
        return order_ws_routes(routes, strategy, self._out, self._latency_ms)

    # -- told by the feeds -------------------------------------------------------------------

    def feed_left(self, route: WsRoute, why: str) -> None:
        """A feed had to leave the node: out until a check passes."""
        state = self._state_of(route)
        state.failures += 1
        state.last_error = why
        self._out.add(route.node_id)
        self._unreported.add(route.node_id)

    def feed_heard(self, route: WsRoute, head: int) -> None:
        """A feed got the head `head` from the node."""
        state = self._state_of(route)
        if state.head is None or head > state.head:
            state.head = head

    # -- checking ----------------------------------------------------------------------------

    async def check(self, route: WsRoute) -> None:
        state = self._state_of(route)
        try:
            head, latency_ms = await self._probe(route)
        except (WsCheckError, NodeError, UpstreamClosedError, OSError, TimeoutError) as exc:
            why = str(exc) or type(exc).__name__
            state.failures += 1
            state.last_error = why
            state.checked_at = time.monotonic()
            self._out.add(route.node_id)
            self._unreported.add(route.node_id)
            if state.failures % _LOG_EVERY == 1:
                log.info("WebSocket node %d failed its health check: %s", route.node_id, why)
            return
        if state.failures:
            log.info("WebSocket node %d passes its health check again", route.node_id)
        state.failures = 0
        state.last_error = None
        state.head = head if state.head is None else max(head, state.head)
        state.checked_at = time.monotonic()
        previous = self._latency_ms.get(route.node_id)
        self._latency_ms[route.node_id] = (
            latency_ms if previous is None else previous + _SMOOTHING * (latency_ms - previous)
        )
        self._judge(route.node_id, state)
        self._unreported.add(route.node_id)

    async def _probe(self, route: WsRoute) -> tuple[int, float]:
        timeout_s = self._policy.timeout_s
        async with asyncio.timeout(timeout_s):
            upstream = await self._connect(route.url)
        try:
            chain = _quantity(await upstream.call("eth_chainId", [], timeout_s), "a chain ID")
            if chain != route.chain_id:
                raise WsCheckError(
                    f"answers chain ID {chain}, but is registered for chain {route.chain_id}"
                )
            subscription = await upstream.call("eth_subscribe", ["newHeads"], timeout_s)
            if not isinstance(subscription, str):
                raise WsCheckError("eth_subscribe to newHeads gave no subscription id")
            started = time.monotonic()
            head = _quantity(await upstream.call("eth_blockNumber", [], timeout_s), "a block")
            latency_ms = (time.monotonic() - started) * 1000
            await upstream.call("eth_unsubscribe", [subscription], timeout_s)
            return head, latency_ms
        finally:
            await upstream.close()

    def _judge(self, node_id: int, state: WsNodeState) -> None:
        """In sync unless the node is more than `max_block_lag` behind its chain's head."""
        chain = state.chain_id
        heads = [s.head for s in self._states.values() if s.chain_id == chain and s.head]
        known = self._chain_head(chain)
        best = max([*heads, *([known] if known is not None else [])], default=None)
        behind = None if best is None or state.head is None else best - state.head
        state.in_sync = behind is None or behind <= self._policy.max_block_lag
        if state.in_sync:
            self._out.discard(node_id)
        else:
            state.last_error = f"{behind} blocks behind the chain's head"
            self._out.add(node_id)

    def _state_of(self, route: WsRoute) -> WsNodeState:
        state = self._states.get(route.node_id)
        if state is None or state.chain_id != route.chain_id:  # new, or moved to another chain
            state = WsNodeState(route.chain_id)
            self._states[route.node_id] = state
            self._out.discard(route.node_id)
            self._latency_ms.pop(route.node_id, None)
        return state

    def forget_except(self, node_ids: set[int]) -> None:
        for gone in [n for n in self._states if n not in node_ids]:
            del self._states[gone]
            self._out.discard(gone)
            self._latency_ms.pop(gone, None)
            self._unreported.discard(gone)

    async def run(self, routes: Callable[[], Sequence[WsRoute]]) -> None:
        """Check every WebSocket node, round after round, until cancelled."""
        gate = asyncio.Semaphore(self._policy.concurrency)

        async def one(route: WsRoute) -> None:
            async with gate:
                try:
                    await self.check(route)
                except Exception:  # a surprise from one node must not end every node's checks
                    log.exception("WebSocket node %d: the health check failed", route.node_id)

        while True:
            current = routes()
            self.forget_except({route.node_id for route in current})
            started = time.monotonic()
            if current:
                await asyncio.gather(*(one(route) for route in current))
            spent = time.monotonic() - started
            await asyncio.sleep(max(self._policy.interval_s - spent, 0.0))

    def take_reports(self) -> list[HealthReport]:
        """The nodes checked (or left by a feed) since the last call, as they stand now."""
        wall_offset = time.time() - time.monotonic()
        taken, self._unreported = self._unreported, set()
        reports = []
        for node_id in sorted(taken):
            state = self._states.get(node_id)
            if state is None:
                continue
            seen = state.checked_at if state.checked_at is not None else time.monotonic()
            reports.append(
                HealthReport(
                    node_id=node_id,
                    in_sync=state.in_sync,
                    head_block=state.head,
                    latency_ms=self._latency_ms.get(node_id),
                    consecutive_failures=state.failures,
                    checked_at=datetime.fromtimestamp(seen + wall_offset, UTC),
                )
            )
        return reports


def _quantity(value: object, what: str) -> int:
    if isinstance(value, str) and value.startswith("0x") and 2 < len(value) <= 18:
        try:
            return int(value, 16)
        except ValueError:
            pass
    raise WsCheckError(f"not {what}: {str(value)[:40]!r}")
