"""A router built from plain domain objects and run by the scripted executor: no database, no
socket, no event loop. For tests of the pipeline's rules, told as stories of what nodes answer."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.cacheable import CachePrices
from chainrouter.domain.capabilities import UNKNOWN, Capabilities
from chainrouter.domain.credentials import SecretKind, generate_secret, hash_secret
from chainrouter.domain.enums import RoutingStrategy
from chainrouter.domain.routing import MethodPrice, NodeInfo, PlanLimits, RouteTable
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.verification import VerifyMode
from chainrouter.router.audits import Auditor, AuditSettings
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.contract import Attempted, Decision, Gather
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.cordon import Cordons
from chainrouter.router.epochs import SLOTS, Epochs
from chainrouter.router.executors.native import load_native_module
from chainrouter.router.fast.decisions import Decider
from chainrouter.router.fast.grants import Grants
from chainrouter.router.fast.memo import FastPath
from chainrouter.router.finality import Finality
from chainrouter.router.health import HealthMonitor
from chainrouter.router.latency import TailPolicies, TailPolicy
from chainrouter.router.ledger import Ledger
from chainrouter.router.memory_cache import MemoryCache
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.pipeline import Reply
from chainrouter.router.proving import Prover
from chainrouter.router.response_cache import ResponseCache
from chainrouter.router.seen_heads import SeenHeads
from chainrouter.router.service import RpcService
from chainrouter.router.stages import RouterLimits, StageDeps
from chainrouter.router.stages.audit import Audit, finalized_from
from chainrouter.router.stages.free_tier import FreeTierLimits
from chainrouter.testing.scripted import FakeClock, Script, ScriptedExecutor

CHAIN = 1
CUSTOMER = 1
METHOD = "eth_blockNumber"


@dataclass
class ScriptedNode:
    url: str
    price_nano: int
    script: Script
    node_id: int = 0
    capabilities: Capabilities = UNKNOWN


@dataclass
class ScriptedWorld:
    service: RpcService
    executor: ScriptedExecutor
    key: str
    nodes: list[ScriptedNode]
    deps: StageDeps = field(repr=False)
    decider: Decider | None = None  # with `decisions`: what the native server would be handed
    cordons: Cordons | None = None
    auditor: Auditor | None = None  # with `audits`

    def audit_all(self) -> None:
        """Run every audit waiting (the auditor's program, off the answers' path)."""
        assert self.auditor is not None, "a world made with audits"
        self.executor.run(self.auditor.drain())

    @property
    def clock(self) -> FakeClock:
        return self.executor.clock

    def call(
        self,
        payload: Any,
        *,
        key: str | None = None,
        waited_s: float = 0.0,
        attempts: list[Attempted] | None = None,
        origin: str | None = None,
    ) -> Reply:
        """Serve `payload` as a keyed request the server spent `waited_s` on before the
        handover, making `attempts` meanwhile (HttpRequest)."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        program = self.service.handle_keyed(
            str(CHAIN),
            key or self.key,
            body,
            origin=origin,
            waited_s=waited_s,
            attempts=attempts,
        )
        return self.executor.run(program)

    def decided(self, reply: Reply) -> list[Decision]:
        """The decisions the native server would be handed with `reply` (`decisions` on)."""
        assert self.decider is not None, "a world made with decisions=True"
        request = reply.decidable
        if request is None or not request.ended:
            return []
        headers = [("content-type", "application/json"), *reply.headers]
        return self.decider.decide(request, request.ended, headers)

    def another_key(
        self,
        key_id: int,
        customer_id: int = CUSTOMER,
        strategy: RoutingStrategy = RoutingStrategy.ECONOMY,
        *,
        verified: bool = False,
    ) -> str:
        """A second API key (of this customer, or another with as much credit), installed."""
        key = generate_secret(SecretKind.API_KEY)
        access = KeyAccess(key_id, customer_id, ("*",), strategy, False, verified=verified)
        snapshot = self.service.snapshot
        keys = {**snapshot.keys_by_hash, hash_secret(key): access}
        self.service.install(dataclasses.replace(snapshot, keys_by_hash=keys))
        balances = dict(snapshot.balances_nano)
        balances.setdefault(customer_id, 10**9)
        self.deps.credits.replace_stored(balances)
        return key

    def together(self, *calls: tuple[str, bytes]) -> list[Reply]:
        """Requests (key, body) served at once, as concurrent clients' would be."""

        async def program() -> list[Reply]:
            replies: list[Reply] = await Gather(
                [self.service.handle_keyed(str(CHAIN), key, body) for key, body in calls]
            )
            return replies

        return self.executor.run(program())

    def public(self, payload: Any, ip: str = "198.51.100.1") -> Reply:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.executor.run(self.service.handle_public(str(CHAIN), ip, body))

    def urls_called(self) -> list[str]:
        return [command.url for command in self.executor.forwarded]

    def cooling(self) -> list[str]:
        cooldowns = self.deps.cooldowns
        return [n.url for n in self.nodes if not cooldowns.available(n.node_id)]

    def metered(self) -> dict[str, tuple[int, int]]:
        """Calls and nano-credits per scenario, as the meter holds them now."""
        usage: dict[str, tuple[int, int]] = {}
        for key, (count, credits) in self.deps.meter.take().rows.items():
            calls, spent = usage.get(key[4], (0, 0))
            usage[key[4]] = (calls + count, spent + credits)
        return usage

    def balance(self) -> int:
        return self.deps.credits.available(CUSTOMER)


def scripted_world(
    nodes: list[tuple[str, int, Script]],
    *,
    balance_nano: int = 10**9,
    strategy: RoutingStrategy = RoutingStrategy.ECONOMY,
    bypass_credit_check: bool = False,
    attempt_timeout_s: float = 10.0,
    deadline_s: float = 30.0,
    node_rate_limit: int = 0,
    plan_credits_per_minute: int | None = None,
    key_rate_limit: int = 0,
    methods: tuple[str, ...] = (METHOD,),
    capabilities: dict[str, Capabilities] | None = None,
    heads: dict[str, int] | None = None,
    tail: TailPolicy | None = None,
    cache_bytes: int = 0,
    coalesce: bool = False,
    cache_prices: dict[str, int] | None = None,
    finality_depth: int = 10,
    decisions: bool = False,
    provider_of: dict[str, str] | None = None,
    verify: VerifyMode = VerifyMode.OFF,
    audits: AuditSettings | None = None,
    draw: Any = None,
    watched: dict[str, float] | None = None,
    max_answer_bytes: int = 16 << 20,
    free_answer_bytes: int = 1 << 20,
    max_price_nano: int = 0,
    method_prices: dict[tuple[str, str], int] | None = None,
) -> ScriptedWorld:
    """One plan per node, in the order given, each pricing `methods` at the node's price; nodes
    declare `capabilities` (by URL) and have passed a health check at `heads` (by URL). With
    `cache_bytes`, a response cache of that size, blocks `finality_depth` behind the head final;
    with `coalesce`, identical calls in flight at once share an attempt; with `decisions`, the
    pipeline hands over its decisions, as to the native server (its real memo holds the
    grants). Each plan is its own provider's, but where `provider_of` names another node's (by
    URL). `verify`: what nodes' answers are checked by (router/proving.py). With `audits`,
    answers are audited at those settings (`draw`: the sampler's random numbers; `watched`:
    each node's `watched_until`, by URL). `max_answer_bytes` bounds a request's answers,
    `free_answer_bytes` the free tier's per IP and minute. `method_prices` (node URL, method) ->
    price: a node's plan prices that method at that price instead (or as well)."""
    declared = capabilities or {}
    scripted = [
        ScriptedNode(url, price, script, capabilities=declared.get(url, UNKNOWN))
        for url, price, script in nodes
    ]
    infos, plans, prices = [], [], []
    index_of = {node.url: index for index, node in enumerate(scripted, start=1)}
    for index, node in enumerate(scripted, start=1):
        node.node_id = index
        provider = index_of[(provider_of or {}).get(node.url, node.url)]
        infos.append(
            NodeInfo(
                index,
                index,
                CHAIN,
                node.url,
                rate_limit=node_rate_limit,
                capabilities=node.capabilities,
                provider_id=provider,
                watched_until=(watched or {}).get(node.url, 0.0),
            )
        )
        plans.append(
            PlanLimits(index, provider, credits_nano=plan_credits_per_minute, credits_interval_s=60)
        )
        own = {m: p for (url, m), p in (method_prices or {}).items() if url == node.url}
        priced = {**dict.fromkeys(methods, node.price_nano), **own}
        prices += [MethodPrice(index, method, price) for method, price in priced.items()]
    key = generate_secret(SecretKind.API_KEY)
    access = KeyAccess(
        1,
        CUSTOMER,
        ("*",),
        strategy,
        bypass_credit_check,
        key_rate_limit,
        rate_limit_interval_s=60,
        max_price_nano=max_price_nano,
    )
    snapshot = RouterSnapshot(
        version=1,
        keys_by_hash={hash_secret(key): access},
        routes=RouteTable.build(infos, plans, prices),
        balances_nano={CUSTOMER: balance_nano},
    )
    executor = ScriptedExecutor({node.url: node.script for node in scripted})
    fast = _fast_path() if decisions else None
    epochs = Epochs(None if fast is None else fast.epochs)
    cooldowns = MemoryCooldowns(clock=executor.clock, epoch_store=epochs)
    credits = CreditView()
    credits.replace_stored(dict(snapshot.balances_nano))
    health = HealthMonitor(
        cooldowns,
        interval_s=15,
        max_per_s=100,
        concurrency=8,
        timeout_s=5,
        max_block_lag=2,
        epoch_store=epochs,
        clock=executor.clock,
    )
    cache = ResponseCache(MemoryCache(cache_bytes), None, epochs) if cache_bytes else None
    finality = (
        Finality(health.chain_head, depth=finality_depth, epoch_store=epochs) if cache else None
    )
    seen_heads = SeenHeads(health)
    meter, metrics = UsageMeter(), RouterMetrics()
    cordons = Cordons(meter, credits, health.cordon, health.uncordon)
    ledger = Ledger(credits, meter, seen_heads, health, cooldowns, metrics, cache, cordons)
    routes_of: list[RpcService] = []
    auditor = audit = None
    if audits is not None:
        auditor = Auditor(
            audits,
            lambda chain_id, method: routes_of[0].snapshot.routes.routes(chain_id, method),
            cordons.cordon,
            cordons.clean,
            cordoned=lambda node_id: cordons.is_cordoned(node_id) or node_id in health.out_of_sync,
            **({} if draw is None else {"draw": draw}),
        )
        audit = Audit(
            auditor,
            finalized_from(None if finality is None else finality.finalized, health.chain_head),
        )
    grants = None if fast is None else Grants(fast.memo, credits)
    for info in infos:
        if heads and info.url in heads:
            health.record_head(info, heads[info.url])
    deps = StageDeps(
        limits=RouterLimits(
            max_body_bytes=1 << 20,
            max_batch_size=100,
            attempt_timeout_s=attempt_timeout_s,
            deadline_s=deadline_s,
            max_logs_block_range=10_000,
            max_answer_bytes=max_answer_bytes,
        ),
        free_tier=FreeTierLimits(True, 100, 60.0, 1000, None, free_answer_bytes),
        health=health,
        capabilities=CapabilityBook(health),
        seen_heads=seen_heads,
        cooldowns=cooldowns,
        credits=credits,
        meter=meter,
        ledger=ledger,
        epochs=epochs,
        clock=executor.clock,
        tail=TailPolicies(tail or TailPolicy(timeout_ceiling_s=attempt_timeout_s)),
        cache=cache,
        finality=finality,
        metrics=metrics,
        coalesce=coalesce,
        cache_prices=CachePrices(cache_prices),
        grants=grants,
        prover=Prover(lambda chain_id: verify),
        cordon=cordons.cordon,
        audit=audit,
    )
    service = RpcService(snapshot, deps)
    routes_of.append(service)
    decider = None
    if grants is not None:
        decider = Decider(
            deps.cache_prices,
            grants,
            coalesce=coalesce,
            node_head=deps.health.node_head,
            audit_every=(lambda n, m, p: 0) if audit is None else audit.every,
            max_answer_bytes=max_answer_bytes,
        )
    return ScriptedWorld(service, executor, key, scripted, deps, decider, cordons, auditor)


def _fast_path() -> FastPath:
    native = load_native_module()
    store = native.Epochs(SLOTS)
    memo = native.Memo(store, 1 << 20, 16384, 100, 64, 1.0, 1.0, Decider.masks(), "t-")
    return FastPath(store, memo)


def rpc(method: str = METHOD, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        call["params"] = params
    return call
