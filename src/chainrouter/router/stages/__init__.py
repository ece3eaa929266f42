"""The stages of the request pipeline, and their order: the one place that says what a request
goes through (docs/architecture.md).

A stage is a small class with one job and a `run` method that reads and writes the context:
- a request stage (`RequestStage`) refuses the request by setting `request.refusal`;
- a call stage (`CallStage`) ends the call by calling `call.end(...)`;
- an answered stage runs after each call a call stage ended, and may withhold its answer (the
  bounds of docs/security.md: `answered`, `free_answered`);
- a closing stage runs after every call, whatever ended it: a keyed call is booked there, in
  the one ledger (`closing`: credits settled, usage metered, heads noted; router/ledger.py); the
  free tier's own list, `free_closing`, counts its calls for the metrics.
`run` does no I/O. A stage that needs the network or time is an `async def` that awaits the
commands of `router/contract.py` and nothing else (or returns such a coroutine: `Attempt`
picks one of two programs for a call); the executor carries the commands out.

To add a stage: write its module here, build it in `keyed`, `public` or `calls` below.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from chainrouter.domain.cacheable import CachePrices
from chainrouter.domain.routing import NodeInfo
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.epochs import Epochs
from chainrouter.router.fast.grants import Grants
from chainrouter.router.finality import Finality
from chainrouter.router.health import HealthMonitor
from chainrouter.router.latency import TailPolicies, TailPolicy
from chainrouter.router.ledger import Ledger
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.node_checks import NodeChecks
from chainrouter.router.proving import Prover
from chainrouter.router.response_cache import ResponseCache
from chainrouter.router.seen_heads import SeenHeads
from chainrouter.router.stages.attempt import Attempt, AttemptLimits
from chainrouter.router.stages.audit import Audit
from chainrouter.router.stages.body import BodyWithinLimit
from chainrouter.router.stages.book import Book
from chainrouter.router.stages.bounds import AnswerWithinBound
from chainrouter.router.stages.cache import Coalesce, FromCache, Land
from chainrouter.router.stages.capable import CapableRoutes
from chainrouter.router.stages.chain import SupportedChain
from chainrouter.router.stages.consistent_head import NotBehindSeen
from chainrouter.router.stages.content_type import JsonContentType
from chainrouter.router.stages.count import CountFreeCall
from chainrouter.router.stages.credit import CreditHold, CreditLeft
from chainrouter.router.stages.domain import AllowedDomain
from chainrouter.router.stages.free_tier import (
    FreeTierAnswerBytes,
    FreeTierLimits,
    FreeTierOpen,
    FreeTierRoom,
)
from chainrouter.router.stages.heads import HasTheBlock
from chainrouter.router.stages.key import ApiKey
from chainrouter.router.stages.key_limit import KeyRateLimit
from chainrouter.router.stages.logs_range import LogsRange
from chainrouter.router.stages.method import MethodPriced
from chainrouter.router.stages.needs import CallNeeds
from chainrouter.router.stages.payload import ParsePayload
from chainrouter.router.stages.price_cap import WithinPriceCap
from chainrouter.router.stages.routes import PlanRoutes
from chainrouter.router.stages.verify import Verify
from chainrouter.router.stages.write import SignedTransactions


class RequestStage(Protocol):
    def run(self, request: RequestContext) -> Awaitable[None] | None: ...


class CallStage(Protocol):
    def run(self, call: CallContext) -> Awaitable[object] | None: ...


@dataclass(frozen=True, slots=True)
class RouterLimits:
    max_body_bytes: int
    max_batch_size: int
    attempt_timeout_s: float
    deadline_s: float
    max_logs_block_range: int
    logs_split_max_parts: int = 16
    logs_split_concurrency: int = 4
    max_answer_bytes: int = 16 * 1024 * 1024  # one request's answers (0: no bound)


@dataclass(frozen=True, slots=True)
class StageDeps:
    """The router's state the stages read and change (all in memory)."""

    limits: RouterLimits
    free_tier: FreeTierLimits
    health: HealthMonitor
    capabilities: CapabilityBook
    seen_heads: SeenHeads
    cooldowns: MemoryCooldowns
    credits: CreditView
    meter: UsageMeter
    ledger: Ledger
    epochs: Epochs
    clock: Callable[[], float] = time.monotonic  # for deadlines; tests pass a fake one
    tail: TailPolicies | None = None  # hedges and time-outs; None: the defaults
    metrics: RouterMetrics = field(default_factory=RouterMetrics)
    cache: ResponseCache | None = None  # None: no response cache
    finality: Finality | None = None  # each chain's finalized block, for the cache
    coalesce: bool = False  # identical calls in flight share one attempt
    cache_prices: CachePrices = field(default_factory=CachePrices)
    # What calls under decisions spend from, on an executor that applies decisions.
    grants: Grants | None = None
    # What nodes' answers are checked by before they are served; None: nothing is.
    prover: Prover | None = None
    # Where a node whose answer a proof showed false is reported (router/cordon.py); None: it
    # is only cooled down.
    cordon: Callable[[NodeInfo, str], object] | None = None
    # Samples the answers nodes gave for audits (router/audits.py); None: no audits.
    audit: Audit | None = None
    # What proofs found of each node, for storage (router/node_checks.py); None: not counted.
    node_checks: NodeChecks | None = None

    @property
    def caching(self) -> bool:
        """Whether calls go through the cache's or coalescing's stages at all."""
        return self.cache is not None or self.coalesce


def keyed(deps: StageDeps) -> list[RequestStage]:
    """`/rpc/{chainId}/{apiKey}`. An unauthenticated request costs a digest and a look-up, never
    a JSON parse; a key is never revealed to be valid to a domain it is not allowed from."""
    return [
        JsonContentType(),
        BodyWithinLimit(deps.limits.max_body_bytes),
        ApiKey(),
        AllowedDomain(),
        SupportedChain(),
        ParsePayload(deps.limits.max_batch_size),
        KeyRateLimit(),
    ]


def websocket(deps: StageDeps) -> list[RequestStage]:
    """A WebSocket upgrade of `/rpc/{chainId}/{apiKey}`, before the connection is accepted: the
    keyed route's access checks, and some credit left (docs/websocket.md)."""
    return [ApiKey(), AllowedDomain(), SupportedChain(), CreditLeft(deps.credits)]


def public(deps: StageDeps) -> list[RequestStage]:
    """`/rpc/evm/{chainId}`: no key; limited per IP and in total; routed as `economy`."""
    return [
        FreeTierOpen(deps.free_tier),
        JsonContentType(),
        SupportedChain(),
        BodyWithinLimit(deps.limits.max_body_bytes),
        ParsePayload(deps.limits.max_batch_size),
        FreeTierRoom(deps.free_tier),
    ]


def calls(deps: StageDeps) -> list[CallStage]:
    """Each call on its own (the items of a batch concurrently), until one stage ends it."""
    limits = deps.limits
    cached: list[CallStage] = []
    if deps.caching:
        cached.append(
            FromCache(deps.cache, deps.finality, deps.cache_prices, deps.credits, deps.epochs)
        )
    verified: list[CallStage] = [] if deps.prover is None else [Verify(deps.prover, deps.health)]
    coalesced: list[CallStage] = []
    if deps.coalesce:
        coalesced.append(Coalesce(deps.cache_prices, deps.credits, deps.ledger))
    return [
        SignedTransactions(),
        MethodPriced(),
        CallNeeds(deps.health),
        *cached,
        LogsRange(limits.max_logs_block_range),
        PlanRoutes(deps.health, deps.epochs),
        WithinPriceCap(),
        CapableRoutes(deps.capabilities, limits.logs_split_max_parts),
        HasTheBlock(deps.health, deps.epochs),
        NotBehindSeen(deps.seen_heads, deps.health, deps.epochs),
        *verified,
        # Before the hold: a call that joins holds nothing for a route it will not take, only
        # the cache price when its answer comes (a leader refused credits lands at once, with
        # no one joined: nothing awaits between the two).
        *coalesced,
        CreditHold(deps.credits, deps.capabilities, deps.grants),
        Attempt(
            deps.cooldowns,
            deps.health,
            deps.capabilities,
            AttemptLimits(
                limits.attempt_timeout_s, limits.deadline_s, limits.logs_split_concurrency
            ),
            deps.clock,
            deps.tail or TailPolicies(TailPolicy(timeout_ceiling_s=limits.attempt_timeout_s)),
            deps.credits,
            deps.ledger,
            deps.metrics,
            deps.prover,
            deps.cordon,
            deps.node_checks,
        ),
    ]


def answered(deps: StageDeps) -> list[CallStage]:
    """After each keyed call a call stage ended, before the closing ones: the request's bound."""
    return [AnswerWithinBound(deps.limits.max_answer_bytes)]


def free_answered(deps: StageDeps) -> list[CallStage]:
    """After each free-tier call a call stage ended: the IP's budget of answer bytes, then the
    request's bound on what it hands on (the budget's refusals included). The budget is the
    smaller by far (1 MiB a minute to 16 MiB a request, by default): it rules first."""
    return [FreeTierAnswerBytes(deps.free_tier), AnswerWithinBound(deps.limits.max_answer_bytes)]


def closing(deps: StageDeps) -> list[CallStage]:
    """After every keyed call, whatever ended it."""
    return [*_landing(deps), Book(deps.ledger), *_audited(deps)]


def free_closing(deps: StageDeps) -> list[CallStage]:
    """After every call of the free tier: no credits, no usage, no key's head; counted."""
    return [*_landing(deps), CountFreeCall(deps.metrics), *_audited(deps)]


def _audited(deps: StageDeps) -> list[CallStage]:
    return [] if deps.audit is None else [deps.audit]


def _landing(deps: StageDeps) -> list[CallStage]:
    if not deps.caching:
        return []
    return [Land(deps.cache, deps.finality, deps.health.node_head)]
