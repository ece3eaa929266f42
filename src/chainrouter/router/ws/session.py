"""One client's WebSocket connection (docs/websocket.md): its calls routed through the keyed
pipeline like any HTTP request (billed alike), its subscriptions served from the chain's feed,
every notification billed at the feed's route price for its kind when it is sent.

Whatever the server carries the messages (uvicorn's ASGI `websocket`, or the native executor's),
the session sees a `ClientLink`. What it sends goes through one bounded queue: a client that
does not read its messages fills it, and is closed alone (`SLOW_CLIENT`), never slowing the feed
or anyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import Scenario
from chainrouter.domain.ws_routes import WsRoute
from chainrouter.jsonrpc.errors import RpcCode, RpcError, batch_too_large
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import RequestContext
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.pipeline import Reply
from chainrouter.router.ws.fanout import Subscription
from chainrouter.router.ws.feed import ChainFeed
from chainrouter.router.ws.holding import Holding
from chainrouter.router.ws.protocol import (
    SubscriptionKind,
    new_subscription_id,
    read_subscribe,
    read_unsubscribe,
)

log = logging.getLogger(__name__)

# Close codes (docs/websocket.md): 1000 normal; 1008 the upgrade's checks refuse it now for
# another reason (its chain gone); 4001 key revoked; 4002 out of credits; 4003 its Origin no
# longer allowed; 4008 too slow to read.
NORMAL = 1000
POLICY = 1008
KEY_REVOKED = 4001
OUT_OF_CREDITS = 4002
ORIGIN_NOT_ALLOWED = 4003
SLOW_CLIENT = 4008
# A refusal of the upgrade's checks, run again on an open connection, by its HTTP status.
_CLOSED_FOR = {
    401: (KEY_REVOKED, "API key revoked"),
    402: (OUT_OF_CREDITS, "insufficient credits"),
    403: (ORIGIN_NOT_ALLOWED, "origin not allowed for this API key"),
}
_SUBSCRIBE_METHODS = frozenset({"eth_subscribe", "eth_unsubscribe"})


class ClientLink(Protocol):
    async def receive(self) -> str | bytes | None:
        """The client's next message; None once it is gone."""
        ...

    async def send(self, message: bytes) -> None: ...

    async def close(self, code: int, reason: str) -> None: ...

    def abort(self, code: int, reason: str) -> None:
        """Drop the connection now, telling the client `code` if it still reads: it does not
        read what it is sent, so nothing may wait for it."""
        ...


@dataclass(frozen=True, slots=True)
class WsLimits:
    max_subscriptions: int = 100  # per connection
    send_queue: int = 1000  # messages waiting for a client: beyond, it is closed (4008)
    max_batch: int = 100  # calls in one message, subscriptions among them (as over HTTP)
    max_filter_entries: int = 1000  # per connection: logs filters' addresses and topics
    # What holding one subscription open costs per hour (router/ws/holding.py); 0: nothing.
    holding_nano_per_hour: int = 0
    # How long an eth_subscribe waits for its feed to be subscribed at a node; then -32009.
    subscribe_wait_s: float = 10.0


Outgoing = tuple[bytes, SubscriptionKind | None, WsRoute | None, int]


class SessionHub(Protocol):
    """What a session needs of the worker's feeds (router/ws/hub.py)."""

    def feed(self, chain_id: int, access: KeyAccess) -> ChainFeed: ...

    def served(self, chain_id: int, kind: SubscriptionKind) -> bool: ...

    def leave(self, feed: ChainFeed) -> None: ...
    def key_live(self, key_id: int) -> bool: ...

    def take_subscription(self, customer_id: int, entries: int) -> RpcError | None:
        """Count one more subscription of the customer holding `entries` filter entries; the
        refusal past its bounds (nothing counted)."""
        ...

    def give_back_subscriptions(self, customer_id: int, count: int, entries: int) -> None: ...


Handle = Callable[[bytes], Awaitable[Reply]]  # a call or batch through the keyed pipeline
# The upgrade's access checks run again, on the configuration and balances of now
# (`RpcService.check_upgrade`): their refusal, or None.
Recheck = Callable[[], RpcError | None]


class WsSession:
    def __init__(
        self,
        link: ClientLink,
        request: RequestContext,
        hub: SessionHub,
        handle: Handle,
        credits: CreditView,
        meter: UsageMeter,
        limits: WsLimits,
        recheck: Recheck | None = None,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        access = request.access
        assert access is not None, "the upgrade checks found the key"
        self._link = link
        self._access = access
        self._chain_id = request.chain_id
        self._hub = hub
        self._handle = handle
        self._credits = credits
        self._meter = meter
        self._limits = limits
        # (message, its kind if a notification, the route it came from, its price in nano)
        self._outbox: asyncio.Queue[Outgoing] = asyncio.Queue(maxsize=limits.send_queue)
        self._feed: ChainFeed | None = None
        self._subscriptions: dict[str, tuple[SubscriptionKind, int]] = {}  # id -> kind, entries
        self._entries = 0  # of all its subscriptions
        self._closing: tuple[int, str] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._recheck = recheck
        self._clock = clock
        price = limits.holding_nano_per_hour
        self._holding = Holding(price, clock()) if price else None
        # Connections with the same of these get the same verdict (router/ws/hub.py, `recheck`).
        self.checked_as = (request.chain_segment, request.api_key, request.page)

    # -- the hub's side: access checked again ------------------------------------------------

    def recheck(self) -> RpcError | None:
        """The upgrade's checks, run again now: their refusal, or None."""
        return None if self._recheck is None else self._recheck()

    def refused(self, refusal: RpcError) -> None:
        """The upgrade's checks now refuse the connection (its key deactivated, revoked or
        deleted, its Origin no longer allowed, its customer out of credits): its subscriptions
        end with the refusal, and it closes with 4001, 4003 or 4002 (1008 for another reason),
        whether or not a notification was due."""
        code, reason = _CLOSED_FOR.get(refusal.http_status, (POLICY, refusal.message[:120]))
        self._close_soon(code, reason, error_response(refusal))

    @property
    def closing(self) -> bool:
        return self._closing is not None

    def charge_held(self) -> None:
        """Charge the time its subscriptions were held since the last charge (the hub's step,
        every `CHAINROUTER_WS_SUBSCRIPTION_HOLDING_STEP_S`)."""
        if self._holding is not None and self._closing is None:
            self._charge_held()

    # -- the feed's side: notifications --------------------------------------------------

    def offer(self, message: bytes, kind: SubscriptionKind) -> bool:
        """A notification for this client (`fanout.Sink`); False when its queue is full."""
        if self._closing is not None:
            return True  # going away: nothing more is sent or billed
        feed = self._feed
        route, price = (None, 0) if feed is None else (feed.route, feed.prices.get(kind, 0))
        try:
            self._outbox.put_nowait((message, kind, route, price))
        except asyncio.QueueFull:
            return False
        return True

    def too_slow(self) -> None:
        """Its queue overflowed: the client is dropped at once (its writer is stuck sending to
        it), the others go on."""
        if self._closing is not None:
            return
        self._closing = (SLOW_CLIENT, "too slow to read its messages")
        self._leave()
        if self._writer is not None:
            self._writer.cancel()
        self._link.abort(*self._closing)

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        self._writer = writer = asyncio.create_task(self._write(), name="ws-session-writer")
        try:
            while self._closing is None:
                message = await self._link.receive()
                if message is None:
                    break
                await self._answer(message)
        finally:
            self._close_soon(NORMAL, "")
            # The writer sends what is left and closes; a cancelled one (a dropped client) is
            # waited for all the same, without its cancellation becoming this task's.
            await asyncio.wait({writer}, timeout=5)
            writer.cancel()

    def _close_soon(self, code: int, reason: str, last: bytes | None = None) -> None:
        """Stop serving: the subscriptions end, what waits to be sent is dropped, `last` is
        sent, then the connection closes with `code`."""
        if self._closing is not None:
            return
        self._closing = (code, reason)
        self._leave()
        while not self._outbox.empty():
            self._outbox.get_nowait()
        if last is not None:
            self._outbox.put_nowait((last, None, None, 0))
        self._outbox.put_nowait((b"", None, None, 0))  # the writer's cue to close

    def _leave(self) -> None:
        feed = self._feed
        if feed is not None:
            feed.fanout.remove_sink(self)
            self._hub.leave(feed)
            self._feed = None
        if self._subscriptions:
            self._hub.give_back_subscriptions(
                self._access.customer_id, len(self._subscriptions), self._entries
            )
            if self._holding is not None:  # the time held up to now, the rest of a step
                now = self._clock()
                for kind, _ in self._subscriptions.values():
                    self._holding.closed(kind, now)
                self._charge_held()
        self._subscriptions.clear()
        self._entries = 0

    async def _write(self) -> None:
        while True:
            message, kind, route, price = await self._outbox.get()
            if not message:
                code, reason = self._closing or (NORMAL, "")
                with contextlib.suppress(Exception):
                    await self._link.close(code, reason)
                return
            if kind is not None and (self._closing is not None or not self._hold(price)):
                continue
            try:
                await self._link.send(message)
            except Exception:  # the client is gone, or its link closing: not sent, not billed
                if kind is not None:
                    self._credits.settle(self._access.customer_id, price, 0)
                self._close_soon(NORMAL, "")
                continue
            if kind is not None:
                self._charge(kind, route, price)

    def _hold(self, price: int) -> bool:
        """Hold one notification's `price` while it is sent (the customer's other connections
        cannot spend it meanwhile); out of credits: the subscriptions end with an error and
        the connection closes (4002); the key revoked: likewise (4001)."""
        access = self._access
        if not self._hub.key_live(access.key_id):
            failure = RpcError(401, RpcCode.SERVER_ERROR, "API key revoked: subscriptions ended")
            self._close_soon(KEY_REVOKED, "API key revoked", error_response(failure))
            return False
        if not self._credits.hold(access.customer_id, price, check=not access.bypass_credit_check):
            failure = RpcError(
                402, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits: subscriptions ended"
            )
            self._close_soon(OUT_OF_CREDITS, "insufficient credits", error_response(failure))
            return False
        return True

    def _charge(self, kind: SubscriptionKind, route: WsRoute | None, price: int) -> None:
        """Charge one notification the client was sent, at the feed's price for its kind (its
        route's, `feed.py`), out of what was held for it."""
        access = self._access
        self._credits.settle(access.customer_id, price, price)
        self._meter.record(
            access.customer_id,
            access.key_id,
            self._chain_id,
            kind,
            Scenario.SUBSCRIPTION,
            price,
            0 if route is None else route.plan_id,
        )

    def _charge_held(self) -> None:
        """Charge what the time its subscriptions were held owes (router/ws/holding.py), as
        usage of its own: the subscriptions' kind as the method, the scenario
        `subscription_held`, no call counted; the balance may go below zero by at most a step's
        worth, and the hub's recheck then closes the connection (4002) as for any charge."""
        assert self._holding is not None
        access = self._access
        for kind, nano in self._holding.due(self._clock()):
            self._credits.charge(access.customer_id, nano, check=False)
            self._meter.record_credits(
                access.customer_id,
                access.key_id,
                self._chain_id,
                kind,
                Scenario.SUBSCRIPTION_HELD,
                nano,
            )

    # -- the client's side: calls and subscriptions ----------------------------------------

    async def _answer(self, message: str | bytes) -> None:
        if self._closing is not None:
            return  # closing (out of credits, too slow): a message still in flight is not served
        body = message.encode() if isinstance(message, str) else message
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            self._reply(error_response(RpcError(400, RpcCode.PARSE_ERROR, "parse error")))
            return
        if isinstance(parsed, dict) and parsed.get("method") in _SUBSCRIBE_METHODS:
            self._reply(await self._subscription_call(parsed))
            return
        if isinstance(parsed, list) and any(
            isinstance(item, dict) and item.get("method") in _SUBSCRIBE_METHODS for item in parsed
        ):
            if len(parsed) > self._limits.max_batch:  # the pipeline's bound, as it would say
                self._reply(error_response(batch_too_large(len(parsed), self._limits.max_batch)))
                return
            answers = [await self._one(item) for item in parsed]
            self._reply(b"[" + b",".join(answers) + b"]")
            return
        self._reply((await self._handle(body)).body)

    async def _one(self, item: Any) -> bytes:
        if isinstance(item, dict) and item.get("method") in _SUBSCRIBE_METHODS:
            return await self._subscription_call(item)
        return (await self._handle(orjson.dumps(item))).body

    async def _subscription_call(self, call: dict[str, Any]) -> bytes:
        id_json = orjson.dumps(call.get("id"))
        try:
            if call.get("jsonrpc") != "2.0":
                raise RpcError(400, RpcCode.INVALID_REQUEST, "invalid request: jsonrpc must be 2.0")
            if call["method"] == "eth_unsubscribe":
                found = read_unsubscribe(call.get("params"))
                return _result(id_json, self._unsubscribe(found.subscription_id))
            return _result(id_json, await self._subscribe(call.get("params")))
        except RpcError as refused:
            return error_response(refused, id_json)

    async def _subscribe(self, params: Any) -> str:
        if self._closing is not None:  # a batch's item after the connection began to close
            raise RpcError(503, RpcCode.SERVER_ERROR, "the connection is closing")
        wanted = read_subscribe(params)
        if not self._hub.served(self._chain_id, wanted.kind):
            raise RpcError(
                422,
                RpcCode.METHOD_NOT_SUPPORTED,
                f"{wanted.kind} subscriptions are not served on chain {self._chain_id}",
            )
        if len(self._subscriptions) >= self._limits.max_subscriptions:
            raise RpcError(
                429,
                RpcCode.SERVER_ERROR,
                f"at most {self._limits.max_subscriptions} subscriptions per connection",
            )
        entries = 0 if wanted.log_filter is None else wanted.log_filter.entries
        if self._entries + entries > self._limits.max_filter_entries:
            raise RpcError(
                429,
                RpcCode.SERVER_ERROR,
                f"at most {self._limits.max_filter_entries} filter addresses and topics per "
                f"connection; this one holds {self._entries}",
                {"max_filter_entries": self._limits.max_filter_entries},
            )
        access = self._access
        if not access.bypass_credit_check and self._credits.available(access.customer_id) <= 0:
            raise RpcError(402, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits")
        refusal = self._hub.take_subscription(access.customer_id, entries)
        if refusal is not None:
            raise refusal
        try:
            feed = await self._feed_up()
        except RpcError:
            self._hub.give_back_subscriptions(access.customer_id, 1, entries)
            raise
        subscription_id = new_subscription_id()
        feed.fanout.add(Subscription(subscription_id, wanted.kind, self, wanted.log_filter))
        feed.wake()
        self._subscriptions[subscription_id] = (wanted.kind, entries)
        self._entries += entries
        if self._holding is not None:
            self._holding.opened(wanted.kind, self._clock())
        return subscription_id

    async def _feed_up(self) -> ChainFeed:
        """The chain's feed once it is subscribed at a node: at once when it is, else within
        `subscribe_wait_s` (its nodes are dialled as the hub's pacer allows: router/ws/dials.py),
        else -32009. Nothing is sent to the client meanwhile, so its answer comes before any
        notification of the subscription."""
        if self._feed is None:
            self._feed = self._hub.feed(self._chain_id, self._access)
        feed = self._feed
        if feed.up.is_set():
            return feed
        wait_s = self._limits.subscribe_wait_s
        feed.waiting += 1
        try:
            async with asyncio.timeout(wait_s):
                await feed.up.wait()
            gave_up = False
        except TimeoutError:
            gave_up = True
        finally:
            feed.waiting -= 1
        if self._feed is not feed:  # closed meanwhile: its leave came while this one waited
            self._hub.leave(feed)
            raise RpcError(503, RpcCode.SERVER_ERROR, "the connection is closing")
        if gave_up:
            if not self._subscriptions:
                self._leave()  # off the feed: the hub stops it once nobody wants it
            raise RpcError(
                503,
                RpcCode.ALL_NODES_FAILED,
                f"no WebSocket node of chain {self._chain_id} could be subscribed to within "
                f"{wait_s:g} s; try again later",
                {"subscribe_wait_s": wait_s},
            )
        return feed

    def _unsubscribe(self, subscription_id: str) -> bool:
        if subscription_id not in self._subscriptions or self._feed is None:
            return False
        kind, entries = self._subscriptions.pop(subscription_id)
        self._entries -= entries
        self._hub.give_back_subscriptions(self._access.customer_id, 1, entries)
        if self._holding is not None:  # held until now: charged at once, the rest of a step
            self._holding.closed(kind, self._clock())
            self._charge_held()
        self._feed.fanout.remove(subscription_id)
        if not self._subscriptions:
            # Off the feed: the hub stops it once nobody is on it, and a later subscription
            # asks the hub for a running one (holding this one, it could be stopped under it).
            self._leave()
        return True

    def _reply(self, answer: bytes) -> None:
        try:
            self._outbox.put_nowait((answer, None, None, 0))
        except asyncio.QueueFull:
            self.too_slow()


def _result(id_json: bytes, result: object) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"result":' + orjson.dumps(result) + b"}"
