"""The RPC router's request pipeline, independent of any web server.

Keyed route `/rpc/{chainId}/{apiKey}`: key, allowed domain, payload, chain, then per call: method,
request rules, credit check, routing strategy, failover with rate limits and cooldowns, billing.
Free tier `/rpc/evm/{chainId}`: per-IP and global limits instead of key and credits; not billed.

Everything the pipeline reads is in memory (the snapshot, health, balances, limits); storage is
only touched by the background sync (chainrouter.router.sync).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.chains import MAX_CHAIN_ID
from chainrouter.domain.credentials import SecretKind, hash_secret
from chainrouter.domain.domains import domain_allowed
from chainrouter.domain.enums import RoutingStrategy, Scenario
from chainrouter.domain.routing import Route, order_routes
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.jsonrpc.encode import encode_call
from chainrouter.jsonrpc.envelope import InvalidCall, RpcCall, encode_json, parse_payload
from chainrouter.jsonrpc.errors import RpcCode, RpcError, body_too_large
from chainrouter.jsonrpc.responses import batch_response, error_response
from chainrouter.net.correlation import BatchIds
from chainrouter.ratelimit.gcra import Bucket, Limiter
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.forward import CallersFault, Forwarder, Served
from chainrouter.router.health import HealthMonitor
from chainrouter.router.logs_range import LOGS_METHOD, logs_range_problem
from chainrouter.router.metering import UNSUPPORTED_METHOD_NAME, CreditView, UsageMeter
from chainrouter.router.native_io import ASYNCIO, Concurrency
from chainrouter.router.upstream import UpstreamClient

_OK = 200
_ADMITTED_CACHE_SIZE = 4096
_ADMITTED_MAX_CHARS = 512  # key and page header together; longer ones are checked every time


@dataclass(frozen=True, slots=True)
class RouterLimits:
    max_body_bytes: int
    max_batch_size: int
    attempt_timeout_s: float
    deadline_s: float
    max_logs_block_range: int


@dataclass(frozen=True, slots=True)
class FreeTierLimits:
    enabled: bool
    ip_requests: int
    ip_interval_s: float
    capacity_per_s: int
    signup_url: str | None


# Built per request: under mypyc a generated __init__ would run interpreted, this one is compiled.
@dataclass(slots=True, init=False)
class Reply:
    status: int
    body: bytes
    batch_id: str

    def __init__(self, status: int, body: bytes, batch_id: str) -> None:
        self.status = status
        self.body = body
        self.batch_id = batch_id


# Built per request: under mypyc a generated __init__ would run interpreted, this one is compiled.
@dataclass(slots=True, init=False)
class _Caller:
    """Who a call is for: a key's customer (billed) or the anonymous free tier (not billed)."""

    chain_id: int
    strategy: RoutingStrategy
    access: KeyAccess | None

    def __init__(self, chain_id: int, strategy: RoutingStrategy, access: KeyAccess | None) -> None:
        self.chain_id = chain_id
        self.strategy = strategy
        self.access = access


def page_header(origin: str | None, referer: str | None) -> str | None:
    """The header whose host the design notes match against `allowed_domains`: Origin, else
    Referer; "null" is an opaque origin (sandbox, file://) and names no host."""
    for header in (origin, referer):
        if header and header != "null":
            return header
    return None


def header_host(header: str | None) -> str | None:
    if header is None:
        return None
    try:
        return urlsplit(header).hostname or None
    except ValueError:
        return None


def parse_chain_id(segment: str) -> int | None:
    if not segment.isdigit() or not segment.isascii() or len(segment) > 20:
        return None
    value = int(segment)
    return value if 0 < value <= MAX_CHAIN_ID else None


def combined_status(statuses: Sequence[int]) -> int:
    """HTTP status of a batch: 200, unless every item failed in the same way (then that status).

    Clients such as viem and ethers fail a whole batch on a non-2xx status, so a batch with any
    answered item stays 200 and each item carries its own error.
    """
    first = statuses[0]
    if first != _OK and all(status == first for status in statuses):
        return first
    return _OK


class RpcService:
    def __init__(
        self,
        snapshot: RouterSnapshot,
        *,
        client: UpstreamClient,
        limiter: Limiter,
        cooldowns: MemoryCooldowns,
        health: HealthMonitor,
        meter: UsageMeter,
        credits: CreditView,
        limits: RouterLimits,
        free_tier: FreeTierLimits,
        concurrency: Concurrency = ASYNCIO,
    ) -> None:
        self.snapshot = snapshot
        self._concurrency = concurrency
        # A limiter that talks to Redis needs the event loop; the native server runs the
        # pipeline without one, and sends those awaits to the loop's thread.
        self._limits_on_loop = limiter.needs_event_loop
        # Limits per route, by the route object's identity; routes live as long as their
        # snapshot, and the cache is dropped with it.
        self._buckets: dict[int, list[Bucket]] = {}
        self._forwarder = Forwarder(
            client,
            attempt_timeout_s=limits.attempt_timeout_s,
            deadline_s=limits.deadline_s,
            cooldowns=cooldowns,
            admit=self._admit,
            on_latency=health.observe_latency,
        )
        self._limiter = limiter
        self._health = health
        self._out_of_sync = health.out_of_sync
        self._latency_ms = health.latency_ms
        self._meter = meter
        self._credits = credits
        self._limits = limits
        self._free = free_tier
        self._ids = BatchIds()
        self._admitted: dict[tuple[str, str, str | None], _Caller] = {}
        signup = f" at {free_tier.signup_url}" if free_tier.signup_url else ""
        self._signup_hint = f"sign up for an API key{signup} for higher limits"

    @property
    def credits(self) -> CreditView:
        """What each customer may still spend, as this router sees it."""
        return self._credits

    @property
    def max_body_bytes(self) -> int:
        return self._limits.max_body_bytes

    def install(self, snapshot: RouterSnapshot) -> None:
        """Serve from `snapshot` from now on; calls in flight finish on the one they started."""
        self.snapshot = snapshot
        self._buckets = {}
        self._admitted = {}

    @property
    def admissions_remembered(self) -> int:
        """How many (chain, key, page header) combinations are admitted without a new check."""
        return len(self._admitted)

    def new_batch_id(self) -> str:
        return self._ids.next()

    def refuse(self, failure: RpcError, batch_id: str | None = None) -> Reply:
        return Reply(failure.http_status, error_response(failure), batch_id or self._ids.next())

    # -- entry points ------------------------------------------------------------------------

    async def handle_keyed(
        self,
        chain_segment: str,
        api_key: str,
        body: bytes,
        *,
        origin: str | None = None,
        referer: str | None = None,
    ) -> Reply:
        batch_id = self._ids.next()
        # A client sends the same key, chain and origin over and over: admit each combination
        # once per snapshot (a new snapshot, say with the key revoked, starts afresh). Refusals
        # are not remembered; the path and headers are the client's to choose, so the cache is
        # bounded in entries and skipped for long values.
        page = page_header(origin, referer)
        admission = (chain_segment, api_key, page)
        caller = self._admitted.get(admission)
        if caller is None:
            checked = self._admit_key(chain_segment, api_key, page)
            if isinstance(checked, RpcError):
                return self.refuse(checked, batch_id)
            caller = checked
            if len(api_key) + len(page or "") <= _ADMITTED_MAX_CHARS:
                if len(self._admitted) >= _ADMITTED_CACHE_SIZE:
                    self._admitted.clear()
                self._admitted[admission] = caller
        return await self._serve(body, caller, batch_id)

    async def handle_public(self, chain_segment: str, client_ip: str, body: bytes) -> Reply:
        batch_id = self._ids.next()
        if not self._free.enabled:
            return self.refuse(
                RpcError(
                    503,
                    RpcCode.PUBLIC_CAPACITY_EXHAUSTED,
                    f"the public free tier is not available here; {self._signup_hint}",
                ),
                batch_id,
            )
        chain_id = self._supported_chain(chain_segment, self.snapshot)
        if isinstance(chain_id, RpcError):
            return self.refuse(chain_id, batch_id)
        return await self._serve(
            body, _Caller(chain_id, RoutingStrategy.ECONOMY, None), batch_id, client_ip=client_ip
        )

    # -- the pipeline --------------------------------------------------------------------------

    def _admit_key(self, chain_segment: str, api_key: str, page: str | None) -> _Caller | RpcError:
        """Key, allowed domain and chain: who the calls of a keyed request are for."""
        snapshot = self.snapshot
        access = None
        if api_key.startswith(SecretKind.API_KEY.value):
            access = snapshot.keys_by_hash.get(hash_secret(api_key))
        if access is None:
            return RpcError(401, RpcCode.SERVER_ERROR, "invalid API key")
        if not domain_allowed(access.allowed_domains, header_host(page)):
            return RpcError(
                403, RpcCode.SERVER_ERROR, "this API key is not allowed from this domain"
            )
        chain_id = self._supported_chain(chain_segment, snapshot)
        if isinstance(chain_id, RpcError):
            return chain_id
        return _Caller(chain_id, access.strategy, access)

    def _supported_chain(self, segment: str, snapshot: RouterSnapshot) -> int | RpcError:
        chain_id = parse_chain_id(segment)
        if chain_id is None:
            return RpcError(
                422,
                RpcCode.CHAIN_NOT_SUPPORTED,
                f"chain {segment[:40]!r} is not supported: the path needs a decimal chain ID",
            )
        if not snapshot.routes.serves_chain(chain_id):
            return RpcError(422, RpcCode.CHAIN_NOT_SUPPORTED, f"chain {chain_id} is not supported")
        return chain_id

    async def _serve(
        self, body: bytes, caller: _Caller, batch_id: str, *, client_ip: str | None = None
    ) -> Reply:
        if len(body) > self._limits.max_body_bytes:
            return self.refuse(body_too_large(self._limits.max_body_bytes), batch_id)
        try:
            payload = parse_payload(body, max_batch=self._limits.max_batch_size)
        except RpcError as failure:
            return self.refuse(failure, batch_id)
        if client_ip is not None:
            valid = sum(isinstance(call, RpcCall) for call in payload.calls)
            refused = await self._free_tier_refusal(client_ip, valid)
            if refused is not None:
                return self.refuse(refused, batch_id)
        if not payload.is_batch:
            call = payload.calls[0]
            status, answer = (
                _invalid(call)
                if isinstance(call, InvalidCall)
                else await self._call(caller, call, body)
            )
            return Reply(status, answer, batch_id)
        results = await self._concurrency.gather(
            [self._batch_item(caller, c) for c in payload.calls]
        )
        return Reply(
            combined_status([status for status, _ in results]),
            batch_response([answer for _, answer in results]),
            batch_id,
        )

    async def _free_tier_refusal(self, client_ip: str, calls: int) -> RpcError | None:
        if calls == 0:
            return None
        per_ip = Bucket(
            f"free:ip:{client_ip}", self._free.ip_requests, self._free.ip_interval_s, calls
        )
        if not await self._acquire([per_ip]):
            return RpcError(
                429,
                RpcCode.PUBLIC_RATE_LIMITED,
                f"public free tier: at most {self._free.ip_requests} calls per "
                f"{self._free.ip_interval_s:g} s per IP; {self._signup_hint}",
            )
        if not await self._acquire(
            [Bucket("free:capacity", self._free.capacity_per_s, 1.0, calls)]
        ):
            return RpcError(
                429,
                RpcCode.PUBLIC_CAPACITY_EXHAUSTED,
                f"the public free tier is at capacity; {self._signup_hint}",
            )
        return None

    async def _batch_item(self, caller: _Caller, call: RpcCall | InvalidCall) -> tuple[int, bytes]:
        if isinstance(call, InvalidCall):
            return _invalid(call)
        return await self._call(caller, call, encode_call(call))

    async def _call(self, caller: _Caller, call: RpcCall, body: bytes) -> tuple[int, bytes]:
        """Route, forward and bill one call; returns its HTTP status and encoded response."""
        access = caller.access
        routes = self.snapshot.routes.routes(caller.chain_id, call.method)
        if not routes:
            self._meter_call(caller, UNSUPPORTED_METHOD_NAME, Scenario.UNSUPPORTED_METHOD)
            return self._fail(
                call,
                RpcError(
                    422,
                    RpcCode.METHOD_NOT_SUPPORTED,
                    f"method {call.method[:100]!r} is not supported on chain {caller.chain_id}",
                ),
            )
        if call.method == LOGS_METHOD:
            problem = logs_range_problem(
                call, self._limits.max_logs_block_range, self._health.chain_head(caller.chain_id)
            )
            if problem is not None:
                self._meter_call(caller, call.method, Scenario.REFUSED)
                # An answer in a well-formed exchange, like a node's own -32005: HTTP 200, so
                # that clients see the code and the range hint rather than a transport error.
                return _OK, error_response(problem, call.id_json)
        ordered = order_routes(routes, caller.strategy, self._out_of_sync, self._latency_ms)
        if not ordered:
            self._meter_call(caller, call.method, Scenario.NO_ROUTE)
            return self._fail(
                call,
                RpcError(
                    424,
                    RpcCode.NO_PROVIDERS_AVAILABLE,
                    f"no provider is in sync for chain {caller.chain_id}",
                ),
            )
        price = ordered[0].price.cost_nano
        customer = access.customer_id if access is not None else None
        # The first choice's price is held while the call is in flight; when it ends the hold
        # is released and the served route's price charged.
        if access is not None and not self._credits.hold(
            access.customer_id, price, check=not access.bypass_credit_check
        ):
            self._meter_call(caller, call.method, Scenario.INSUFFICIENT_CREDITS)
            return self._fail(
                call, RpcError(402, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits")
            )
        cost = 0
        try:
            outcome = await self._forwarder.forward(ordered, body, call.id)
            if customer is not None and isinstance(outcome, Served):
                cost = outcome.route.price.cost_nano
        finally:
            if customer is not None:
                self._credits.settle(customer, price, cost)
        if isinstance(outcome, CallersFault):
            self._meter_call(caller, call.method, Scenario.REJECTED)
            return _OK, _callers_fault_response(outcome.error, call.id_json)
        if isinstance(outcome, Served):
            first = outcome.route is ordered[0]
            scenario = Scenario.FIRST_CHOICE if first else Scenario.FAILOVER
            self._meter_call(caller, call.method, scenario, cost)
            return _OK, outcome.body
        failure = outcome.error
        scenario = Scenario.RATE_LIMITED if failure.http_status == 429 else Scenario.ALL_FAILED
        self._meter_call(caller, call.method, scenario)
        return self._fail(call, failure)

    def _admit(self, route: Route) -> Awaitable[bool] | None:
        """Whether the route's limits have room (awaitable), or None when it has no limits."""
        buckets = self._buckets.get(id(route))
        if buckets is None:
            buckets = self._buckets[id(route)] = _route_buckets(route)
        return self._acquire(buckets) if buckets else None

    def _acquire(self, buckets: list[Bucket]) -> Awaitable[bool]:
        acquiring = self._limiter.acquire(buckets)
        return self._concurrency.on_loop(acquiring) if self._limits_on_loop else acquiring

    def _meter_call(
        self, caller: _Caller, method: str, scenario: Scenario, credits_nano: int = 0
    ) -> None:
        access = caller.access
        if access is not None:
            self._meter.record(
                access.customer_id, access.key_id, caller.chain_id, method, scenario, credits_nano
            )

    @staticmethod
    def _fail(call: RpcCall, failure: RpcError) -> tuple[int, bytes]:
        return failure.http_status, error_response(failure, call.id_json)


def _callers_fault_response(error: dict[str, Any], id_json: bytes) -> bytes:
    """A node's verdict that the request is invalid, under the caller's id (the node may have
    answered with id null); HTTP 200, as the node's own answer would be."""
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"error":' + encode_json(error) + b"}"


def _invalid(call: InvalidCall) -> tuple[int, bytes]:
    """The answer to a request that breaks the rules, with its id when it had a usable one."""
    return call.failure.http_status, error_response(call.failure, call.id_json)


def _route_buckets(route: Route) -> list[Bucket]:
    """The limits one call on `route` counts against: node, plan requests, plan credits, method."""
    buckets = []
    node, plan, price = route.node, route.plan, route.price
    if node.rate_limit > 0:
        buckets.append(Bucket(f"node:{node.node_id}", node.rate_limit, node.rate_limit_interval_s))
    if plan.requests and plan.requests_interval_s:
        buckets.append(Bucket(f"plan:{plan.plan_id}", plan.requests, plan.requests_interval_s))
    if plan.credits_nano and plan.credits_interval_s and price.cost_nano:
        buckets.append(
            Bucket(
                f"plan-credits:{plan.plan_id}",
                plan.credits_nano,
                plan.credits_interval_s,
                price.cost_nano,
            )
        )
    if price.rate_limit and price.rate_limit_interval_s:
        chain = "*" if price.chain_id is None else price.chain_id
        buckets.append(
            Bucket(
                f"method:{price.plan_id}:{price.node_target_type}:{chain}:{price.method}",
                price.rate_limit,
                price.rate_limit_interval_s,
            )
        )
    return buckets
