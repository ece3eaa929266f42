"""One chain's feed: follows its head from one WebSocket node's `newHeads` (the routes' first
not resting after failed dials, dialled as the hub's pacer allows: `dials.py`), and gives its
subscribers what they asked for (`fanout.py`). When the node closes, fails, stops answering
pings or falls behind the chain's head, the feed moves to the next node and fills the gap from
the new one's history as soon as it is subscribed
(`heads.py`): every head once, in order; after a reorg the orphaned blocks' logs again,
removed. Blocks and logs are read over the same connection, so what the feed sends is one
node's view at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from chainrouter.domain.ws_routes import WsRoute, notification_price
from chainrouter.router.ws.dials import DialPacer
from chainrouter.router.ws.fanout import Fanout, Sink
from chainrouter.router.ws.heads import Advance, FetchByHash, FetchByNumber, Head, HeadChain
from chainrouter.router.ws.protocol import SubscriptionKind
from chainrouter.router.ws.upstream import NodeError, UpstreamClosedError, UpstreamSocket

log = logging.getLogger(__name__)

# What a block object has that a header has not: dropped from blocks fetched to fill a gap, so
# that every newHeads notification has the header's shape.
_NOT_HEADER = ("transactions", "uncles", "size", "totalDifficulty", "withdrawals")


@dataclass(frozen=True, slots=True)
class FeedPolicy:
    call_timeout_s: float = 10.0  # one call over the node's connection
    max_lag_blocks: int = 10  # behind the chain's head (HTTP health checks) by more: fail over
    lag_check_s: float = 5.0
    retry_pause_s: float = 1.0  # the longest pause when no node can be dialled yet
    # Blocks below its first head a feed reads (unannounced) when it starts, so that a reorg
    # reaching below that head is announced from the real fork, as a node announces it.
    seed_blocks: int = 16


DEFAULT_POLICY = FeedPolicy()
Connect = Callable[[str], Awaitable[UpstreamSocket]]


class FeedWatch(Protocol):
    """Who hears how the feed's nodes do (router/ws/node_health.py)."""

    def feed_left(self, route: WsRoute, why: str) -> None: ...

    def feed_heard(self, route: WsRoute, head: int) -> None: ...


class ChainFeed:
    def __init__(
        self,
        chain_id: int,
        routes: Callable[[], Sequence[WsRoute]],
        connect: Connect,
        *,
        chain_head: Callable[[], int | None] = lambda: None,
        on_refused: Callable[[list[Sink]], None] = lambda sinks: None,
        policy: FeedPolicy = DEFAULT_POLICY,
        watch: FeedWatch | None = None,
        dials: DialPacer | None = None,
    ) -> None:
        self.chain_id = chain_id
        self.fanout = Fanout()
        self.chain = HeadChain()
        self.route: WsRoute | None = None  # the node followed now
        # What a notification of each kind costs while `route` is followed: its plan's price,
        # or for a kind its plan does not price, the next route's in the order that does.
        self.prices: dict[str, int] = {}
        self._routes = routes
        self._connect = connect
        self._chain_head = chain_head
        self._on_refused = on_refused
        self._policy = policy
        self._watch = watch
        # When each node may be dialled: shared by the hub's feeds (router/ws/dials.py).
        self._dials = dials if dials is not None else DialPacer()
        # Set while the feed is subscribed to newHeads at a node: what a new subscriber waits
        # for (router/ws/session.py). `waiting` counts those waiting: the hub does not stop a
        # feed they wait on.
        self.up = asyncio.Event()
        self.waiting = 0
        self._up_since: float | None = None
        self._logs: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()  # by block hash
        self._wanted = asyncio.Event()  # a subscription was added (`wake`)
        self.last_head_at: float | None = None

    async def run(self) -> None:
        """Until cancelled: follow a node; when it fails, the next. A node is dialled only
        when the hub's pacer allows (router/ws/dials.py)."""
        while True:
            route, wait_s = self._pick()
            if route is None or wait_s > 0:
                await asyncio.sleep(min(wait_s, self._policy.retry_pause_s))
                continue
            self.route = route
            self._dials.dialling(route.node_id)
            try:
                upstream = await self._connect(route.url)
            except (OSError, TimeoutError, ConnectionError) as exc:
                self._failed(route, f"cannot connect: {exc}")
                continue
            try:
                await self._follow(upstream)
            except (UpstreamClosedError, NodeError, TimeoutError, _FellBehindError) as exc:
                self._failed(route, str(exc))
            except Exception as exc:  # a node's surprise must not end the chain's feed
                log.exception("WebSocket node %d (chain %d) failed", route.node_id, self.chain_id)
                self._failed(route, f"unexpected {type(exc).__name__}")
            except asyncio.CancelledError:  # stopped: nobody wants it, no failure of the node
                self._dials.ended(route.node_id, self._up_for(), failed=False)
                raise
            finally:
                self.up.clear()
                self._up_since = None
                await upstream.close()

    def _pick(self) -> tuple[WsRoute | None, float]:
        """The node to follow next, and how long before it may be dialled: the first in the
        order not resting after failures (a node merely dialled within the interval is waited
        for, not passed over); none: how long until one may be."""
        routes = list(self._routes())
        for index, route in enumerate(routes):
            if self._dials.resting(route.node_id):
                continue
            # The followed route's prices, then the next ones', then (a kind only a route this
            # feed passes over prices) those before it: a kind is never free.
            rest = routes[index:] + routes[:index]
            kinds = {kind for r in routes for kind in r.prices}
            self.prices = {
                kind: price
                for kind in kinds
                if (price := notification_price(rest, kind)) is not None
            }
            return route, self._dials.wait_s(route.node_id)
        waits = [self._dials.wait_s(route.node_id) for route in routes]
        return None, max(min(waits, default=self._policy.retry_pause_s), 0.01)

    def _up_for(self) -> float | None:
        return None if self._up_since is None else time.monotonic() - self._up_since

    def _failed(self, route: WsRoute, why: str) -> None:
        log.info(
            "WebSocket node %d (chain %d): %s; failing over", route.node_id, self.chain_id, why
        )
        self._dials.ended(route.node_id, self._up_for(), failed=True)
        if self._watch is not None:
            self._watch.feed_left(route, why)

    def wake(self) -> None:
        """A subscription was added: the feed may need another upstream subscription (pending
        transactions are subscribed to only while someone wants them)."""
        self._wanted.set()

    async def _follow(self, upstream: UpstreamSocket) -> None:
        timeout_s = self._policy.call_timeout_s
        headers = await upstream.subscribe(["newHeads"], timeout_s)
        self._up_since = time.monotonic()
        self.up.set()
        if self.chain.tip is not None:
            # Followed another node before: catch up with this one's head now, not at its next
            # block (on a slow chain, minutes), filling the gap or walking a reorg back.
            latest = await upstream.call("eth_getBlockByNumber", ["latest", False], timeout_s)
            await self._offer(upstream, _head_of_block(latest))
        watch = asyncio.create_task(self._watch_lag(upstream))
        closed = asyncio.create_task(upstream.closed.wait())
        getting: asyncio.Task[bytes] | None = None
        pending: asyncio.Task[None] | None = None
        wanted: asyncio.Task[bool] | None = None
        try:
            while True:
                if pending is None and self.fanout.wants(SubscriptionKind.NEW_PENDING_TRANSACTIONS):
                    queue = await upstream.subscribe(["newPendingTransactions"], timeout_s)
                    pending = asyncio.create_task(self._pass_pending(queue))
                if getting is None:
                    getting = asyncio.create_task(headers.get())
                wanted = asyncio.create_task(self._wanted.wait())
                done, _ = await asyncio.wait(
                    {getting, watch, closed, wanted}, return_when=asyncio.FIRST_COMPLETED
                )
                wanted.cancel()
                self._wanted.clear()
                if getting in done:
                    header, getting = getting.result(), None
                    await self._offer(upstream, _head(header))
                elif watch in done:
                    watch.result()  # raises why the node was left
                elif closed in done:
                    raise UpstreamClosedError("the node closed the connection")
        finally:
            helpers = [t for t in (watch, closed, getting, pending, wanted) if t is not None]
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)  # none is left pending

    async def _pass_pending(self, queue: asyncio.Queue[bytes]) -> None:
        """Pending transactions as the node announces them (no gap filling: not history)."""
        while True:
            refused = self.fanout.pending(await queue.get())
            if refused:
                self._on_refused(refused)

    async def _watch_lag(self, upstream: UpstreamSocket) -> None:
        while True:
            await asyncio.sleep(self._policy.lag_check_s)
            head, tip = self._chain_head(), self.chain.tip
            behind = None if head is None or tip is None else head - tip.number
            if behind is not None and behind > self._policy.max_lag_blocks:
                raise _FellBehindError(f"{behind} blocks behind the chain's head")

    async def _offer(self, upstream: UpstreamSocket, head: Head) -> None:
        """Offer a header, answering what the chain asks for first (`heads.py`)."""
        timeout_s = self._policy.call_timeout_s
        step = self.chain.offer(head)
        while step is not None:
            if isinstance(step, Advance):
                await self._advance(upstream, step)
                return
            if isinstance(step, FetchByNumber):
                for number in range(step.first, step.last + 1):
                    block = await upstream.call(
                        "eth_getBlockByNumber", [hex(number), False], timeout_s
                    )
                    await self._offer(upstream, _head_of_block(block))
            else:
                assert isinstance(step, FetchByHash)
                block = await upstream.call("eth_getBlockByHash", [step.hash, False], timeout_s)
                await self._offer(upstream, _head_of_block(block))
            step = self.chain.offer(head)

    async def _advance(self, upstream: UpstreamSocket, advance: Advance) -> None:
        refused: list[Sink] = []
        fanout = self.fanout
        if advance.restarted:
            self._logs.clear()
        for orphan in advance.removed:  # newest first
            refused += fanout.logs(self._logs.pop(orphan.hash, []), removed=True)
        for head in advance.added:
            self.last_head_at = time.monotonic()
            block_logs = None
            if fanout.wants(SubscriptionKind.LOGS):
                # The logs before the head is announced: if the node fails here, the head and
                # those after it leave the chain and the next node announces them with their logs
                # (announced first, the head would not be again, and its logs would be a gap).
                try:
                    logs = await upstream.call(
                        "eth_getLogs", [{"blockHash": head.hash}], self._policy.call_timeout_s
                    )
                except BaseException:
                    self.chain.forget_from(head)
                    if refused:
                        self._on_refused(list(dict.fromkeys(refused)))
                    raise
                block_logs = (
                    [log for log in logs if isinstance(log, dict)] if isinstance(logs, list) else []
                )
            refused += fanout.heads((head,))
            if block_logs is not None:
                self._logs[head.hash] = block_logs
                while len(self._logs) > self.chain.depth:
                    self._logs.popitem(last=False)
                refused += fanout.logs(block_logs)
        if advance.restarted:
            await self._seed(upstream, advance.added[0])
        if advance.added and self._watch is not None and self.route is not None:
            self._watch.feed_heard(self.route, advance.added[-1].number)
        if refused:
            self._on_refused(list(dict.fromkeys(refused)))

    async def _seed(self, upstream: UpstreamSocket, first: Head) -> None:
        """Read the blocks below the chain's first head into its memory (`HeadChain.seed`); a
        node that cannot give them costs the feed nothing but that memory."""
        wanted = range(first.number - 1, max(first.number - 1 - self._policy.seed_blocks, -1), -1)
        timeout_s = self._policy.call_timeout_s
        try:
            blocks = await asyncio.gather(
                *(upstream.call("eth_getBlockByNumber", [hex(n), False], timeout_s) for n in wanted)
            )
            self.chain.seed([_head_of_block(block) for block in blocks])
        except (NodeError, TimeoutError) as exc:
            log.debug("chain %d: no history below block %d: %s", self.chain_id, first.number, exc)


class _FellBehindError(Exception):
    pass


def _head(header_json: bytes) -> Head:
    header = orjson.loads(header_json)
    if not isinstance(header, dict):
        raise NodeError("a newHeads notification is not a header")
    return _head_from(header, header_json)


def _head_of_block(block: Any) -> Head:
    if not isinstance(block, dict):
        raise NodeError("the node has no such block")
    header = {name: value for name, value in block.items() if name not in _NOT_HEADER}
    return _head_from(header, orjson.dumps(header))


def _head_from(header: dict[str, Any], encoded: bytes) -> Head:
    try:
        return Head(
            int(header["number"], 16),
            str(header["hash"]).lower(),
            str(header["parentHash"]).lower(),
            encoded,
        )
    except (KeyError, TypeError, ValueError):
        raise NodeError("a header without number, hash or parentHash") from None
