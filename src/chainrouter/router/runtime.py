"""Assembling a router process from settings: storage, snapshot, state, pipelines, background."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from chainrouter.domain.cacheable import CachePrices
from chainrouter.domain.routing import HealthReport, NodeInfo
from chainrouter.net.client_ip import IpNetwork, parse_networks
from chainrouter.net.outbound import dial_rule, ssl_context
from chainrouter.ratelimit import create_limiter
from chainrouter.ratelimit.window import Limiter
from chainrouter.router.audits import Auditor, AuditSettings
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.cordon import Cordons
from chainrouter.router.epochs import Epochs
from chainrouter.router.executors import Executor
from chainrouter.router.fast.decisions import Decider
from chainrouter.router.fast.grants import Grants
from chainrouter.router.fast.memo import FastPath
from chainrouter.router.fast.settle import Settle
from chainrouter.router.finality import Finality
from chainrouter.router.health import HealthMonitor
from chainrouter.router.http_face import MetricsAccess, RouterFace
from chainrouter.router.journal import (
    ReplayedFlush,
    UsageJournal,
    database_fingerprint,
    replay_journals,
)
from chainrouter.router.latency import TailPolicies, TailPolicy
from chainrouter.router.ledger import Ledger
from chainrouter.router.memory_cache import MemoryCache
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.metrics import MetricsShare, RouterMetrics, with_metered
from chainrouter.router.node_checks import NodeChecks
from chainrouter.router.probing import CapabilityProber
from chainrouter.router.prometheus import RouterExposition, RouterState
from chainrouter.router.proving import Prover
from chainrouter.router.readiness import Readiness, readiness
from chainrouter.router.request_log import RequestLog
from chainrouter.router.response_cache import (
    ResponseCache,
    cache_counts,
    redis_tier,
)
from chainrouter.router.seen_heads import SeenHeads
from chainrouter.router.service import RpcService
from chainrouter.router.shared_epochs import SharedEpochs
from chainrouter.router.shared_heads import SharedHeads
from chainrouter.router.stages import RouterLimits, StageDeps
from chainrouter.router.stages.audit import Audit, finalized_from
from chainrouter.router.stages.free_tier import FreeTierLimits
from chainrouter.router.sync import StorageSync, load_snapshot
from chainrouter.router.ws.dials import DialPolicy
from chainrouter.router.ws.feed import Connect
from chainrouter.router.ws.hub import Hub, WsBounds
from chainrouter.router.ws.node_health import WsHealthPolicy, WsNodeHealth
from chainrouter.router.ws.session import WsLimits
from chainrouter.router.ws.upstream import UpstreamSocket, open_upstream
from chainrouter.settings import Settings, TailOverrides
from chainrouter.stores.sql.usage import FLUSH_MARK_RETENTION, write_usage

log = logging.getLogger(__name__)

_METRICS_SHARE_INTERVAL_S = 5.0  # how stale another worker's counts may be in a scrape


@dataclass
class RouterRuntime:
    service: RpcService
    sync: StorageSync
    health: HealthMonitor
    capabilities: CapabilityBook
    prober: CapabilityProber | None  # None: probes are off
    limiter: Limiter
    cooldowns: MemoryCooldowns
    engine: Engine
    ledger: Ledger
    stale_after_s: float = 60.0  # storage silent this long: not ready
    metrics: RouterMetrics = field(default_factory=RouterMetrics)
    metrics_networks: tuple[IpNetwork, ...] = ()  # who may scrape; empty: no /metrics
    metrics_share: MetricsShare | None = None  # set when several workers share the counts
    request_log: RequestLog | None = None  # one line per request, at its configured level
    hub: Hub | None = None  # the WebSocket clients' chain feeds
    ws_limits: WsLimits = field(default_factory=WsLimits)
    # The native server's decisions (router/fast/): what makes them, and what settles the calls
    # it serves under them; None: the executor applies none.
    decider: Decider | None = None
    settle: Settle | None = None
    # The chains' finality epochs shared through the cache's Redis; None: no Redis for answers.
    shared_epochs: SharedEpochs | None = None
    # The keys' seen heads shared through the limits' Redis; None: no Redis.
    shared_heads: SharedHeads | None = None
    # Audits of the answers nodes give (router/audits.py); None: off.
    auditor: Auditor | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopped: bool = False

    def face(self, trusted: list[IpNetwork], executor: Executor) -> RouterFace:
        """The HTTP behaviour over this router, for a server of `executor`'s."""
        exposition = None
        if self.metrics_networks:
            share = self.metrics_share

            def counts() -> RouterMetrics:
                mine = self._counts_now()
                return mine if share is None else share.merged(mine)

            state = RouterState(
                counts=counts,
                snapshot=lambda: self.service.snapshot,
                health=self.health,
                cooldowns=self.cooldowns,
                sync=self.sync,
                auditor=self.auditor,
            )
            exposition = RouterExposition(state)
        access = MetricsAccess(self.metrics, exposition, self.metrics_networks)
        return RouterFace(
            self.service,
            self.sync,
            trusted,
            executor.name,
            self.readiness,
            access,
            self.request_log,
            self.hub,
            self.decider,
        )

    def readiness(self) -> Readiness:
        return readiness(
            self.service.snapshot,
            self.health,
            self.cooldowns,
            self.sync.last_contact,
            stale_after_s=self.stale_after_s,
        )

    async def start_background(self, executor: Executor, *, health_checks: bool = True) -> None:
        """Start the storage sync on the running event loop, and the health checker on
        `executor` (on the native one, the server's thread, beside the requests); before the
        server serves: the chains' shared finality epochs are read first, so that answers in
        Redis are used from the first call on."""
        cache = self.service.deps.cache
        if cache is not None and cache.redis is not None:
            cache.redis.bind(asyncio.get_running_loop())
        if self.shared_epochs is not None:
            await self.shared_epochs.first()
        task = asyncio.create_task(self.sync.run(), name="storage-sync")
        task.add_done_callback(_report_end)
        self._tasks.append(task)
        if self.shared_heads is not None:
            self.shared_heads.start(asyncio.get_running_loop())
            heads = asyncio.create_task(self.shared_heads.follow(), name="shared-heads")
            heads.add_done_callback(_report_end)
            self._tasks.append(heads)
        if self.metrics_share is not None:
            shared = asyncio.create_task(self._share_metrics(), name="metrics-share")
            shared.add_done_callback(_report_end)
            self._tasks.append(shared)
        if self.shared_epochs is not None:  # where the health checks report finality
            executor.spawn(self.shared_epochs.run())
        if health_checks:
            executor.spawn(self.health.run(self.current_nodes))
            if self.hub is not None:  # on this loop, the hub's
                hub = self.hub
                checks = asyncio.create_task(hub.health.run(hub.all_routes), name="ws-health")
                checks.add_done_callback(_report_end)
                self._tasks.append(checks)
            if self.prober is not None:
                executor.spawn(self.prober.run(self.current_nodes))
        if self.auditor is not None:
            executor.spawn(self.auditor.run())

    async def _share_metrics(self) -> None:
        """Leave this worker's counts for the other workers' scrapes, every few seconds."""
        share = self.metrics_share
        assert share is not None
        while True:
            mine = self._counts_now()
            await asyncio.to_thread(share.export, mine)
            await asyncio.sleep(_METRICS_SHARE_INTERVAL_S)

    def _counts_now(self) -> RouterMetrics:
        """This worker's counts: the request path's, the meter's, the WebSocket gauges, the
        response cache's, the shared epochs' and seen heads'."""
        deps = self.service.deps
        websocket = None if self.hub is None else self.hub.gauges()
        forwarded, answered, coalesced = self.ledger.counts()
        self.metrics.repeated = forwarded
        cache = cache_counts(deps.cache, coalesced, answered)
        epochs = None if self.shared_epochs is None else self.shared_epochs.counts()
        heads = None if self.shared_heads is None else self.shared_heads.counts()
        return with_metered(self.metrics, deps.meter, websocket, cache, epochs, heads)

    def current_nodes(self) -> list[NodeInfo]:
        routes = self.service.snapshot.routes
        return [node for nodes in routes.nodes_by_chain.values() for node in nodes]

    async def stop(self) -> None:
        """Stop background work, then write every metered call before closing (once)."""
        if self._stopped:
            return
        self._stopped = True
        self.health.stop()  # wherever it runs
        if self.auditor is not None:
            self.auditor.stop()
        if self.shared_epochs is not None:
            self.shared_epochs.stop()
        if self.prober is not None:
            self.prober.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if not await self.sync.flush():
            self.sync.log_unwritten()
        # A cordon made since the last round: unwritten, its node would serve again after a
        # restart (its disputes are journaled with the usage above).
        await self.sync.write_cordons()
        await self.sync.write_node_checks()  # counts: what a failed write holds is lost here
        self.sync.close_journal()
        if self.shared_heads is not None:
            await self.shared_heads.close()
        if self.metrics_share is not None:
            self.metrics_share.remove_own()
        if self.hub is not None:
            await self.hub.stop()
        await self.limiter.close()
        cache = self.service.deps.cache
        if cache is not None and cache.redis is not None:
            await cache.redis.close()
        self.engine.dispose()


def build_runtime(
    settings: Settings, engine: Engine, fast: FastPath | None = None
) -> RouterRuntime:
    """Everything a router process needs but an executor; the snapshot is loaded before this
    returns. `fast`: the native server's memo and epoch store, when it applies decisions."""
    # Usage a router killed without warning journaled goes to storage first, so that the
    # balances loaded next count it.
    instance = secrets.token_hex(8)  # names this process's flushes and its usage journal
    journal = None
    if settings.usage_journal_dir:
        directory = Path(settings.usage_journal_dir)
        database = database_fingerprint(engine.url.render_as_string(hide_password=True))
        try:
            replay_journals(
                directory,
                database,
                lambda flush: _write_replayed(engine, flush),
                marks_kept_s=FLUSH_MARK_RETENTION.total_seconds(),
            )
            journal = UsageJournal(directory, instance, database)
        except OSError as exc:  # a read-only or missing disk must not keep the router down
            log.error(
                "usage journal unavailable in %s (%s): usage metered since the last flush is "
                "lost if this router is killed; set CHAINROUTER_USAGE_JOURNAL_DIR to a writable "
                "directory",
                directory,
                exc,
            )
    snapshot = load_snapshot(engine)
    epochs = Epochs(None if fast is None else fast.epochs)
    cooldowns = MemoryCooldowns(epoch_store=epochs)
    health = HealthMonitor(
        cooldowns,
        interval_s=settings.health_check_interval_s,
        max_per_s=settings.health_check_max_per_s,
        concurrency=settings.health_check_concurrency,
        timeout_s=settings.health_check_timeout_s,
        max_block_lag=settings.max_block_lag,
        chain_max_block_lag=settings.chain_max_block_lag,
        epoch_store=epochs,
    )
    capabilities = CapabilityBook(health)
    cache, finality = _response_cache(settings, health, epochs)
    prober = None
    if settings.capability_probe_interval_s > 0:
        prober = CapabilityProber(
            capabilities,
            health,
            interval_s=settings.capability_probe_interval_s,
            timeout_s=settings.health_check_timeout_s,
        )
    limiter = create_limiter(settings.redis_url, redis_timeout_s=settings.redis_timeout_s)
    meter = UsageMeter(journal=journal)
    credits = CreditView()
    credits.replace_stored(dict(snapshot.balances_nano))
    metrics = RouterMetrics()
    seen_heads = SeenHeads(health)
    cordons = Cordons(meter, credits, health.cordon, health.uncordon)
    node_checks = NodeChecks()  # what audits and proofs find, flushed by `sync`
    ledger = Ledger(credits, meter, seen_heads, health, cooldowns, metrics, cache, cordons)
    service_of: list[RpcService] = []  # the service, once made: the auditor reads its routes
    auditor = audit = None
    if settings.audit_rate > 0 or settings.chain_audit_rate:
        auditor = Auditor(
            AuditSettings(
                rate=settings.audit_rate,
                chain_rate=dict(settings.chain_audit_rate),
                watched_rate=settings.audit_watched_rate,
                referees=settings.audit_referees,
                timeout_s=settings.upstream_timeout_s,
            ),
            lambda chain_id, method: service_of[0].snapshot.routes.routes(chain_id, method),
            cordons.cordon,
            cordons.clean,
            cordoned=lambda node_id: cordons.is_cordoned(node_id) or node_id in health.out_of_sync,
            checks=node_checks,
        )
        audit = Audit(
            auditor,
            finalized_from(None if finality is None else finality.finalized, health.chain_head),
        )
    grants = None if fast is None else Grants(fast.memo, credits)
    deps = StageDeps(
        limits=RouterLimits(
            max_body_bytes=settings.max_body_bytes,
            max_batch_size=settings.max_batch_size,
            attempt_timeout_s=settings.upstream_timeout_s,
            deadline_s=settings.request_deadline_s,
            max_logs_block_range=settings.max_logs_block_range,
            logs_split_max_parts=settings.logs_split_max_parts,
            logs_split_concurrency=settings.logs_split_concurrency,
            max_answer_bytes=settings.max_answer_bytes,
        ),
        free_tier=FreeTierLimits(
            enabled=settings.free_tier_enabled,
            ip_requests=settings.free_tier_ip_requests,
            ip_interval_s=settings.free_tier_ip_interval_s,
            capacity_per_s=settings.free_tier_capacity_per_s,
            signup_url=settings.signup_url,
            ip_answer_bytes=settings.free_tier_ip_answer_bytes,
        ),
        health=health,
        capabilities=capabilities,
        seen_heads=seen_heads,
        cooldowns=cooldowns,
        credits=credits,
        meter=meter,
        ledger=ledger,
        epochs=epochs,
        tail=tail_policies(settings),
        metrics=metrics,
        cache=cache,
        finality=finality,
        coalesce=settings.coalesce,
        cache_prices=CachePrices(settings.cache_prices_nano()),
        prover=prover_for(settings),
        cordon=cordons.cordon,
        grants=grants,
        audit=audit,
        node_checks=node_checks,
    )
    request_log = RequestLog(logging.getLevelNamesMapping()[settings.request_log_level.name])
    service = RpcService(
        snapshot,
        deps,
        keep_requests=request_log.enabled,
        batch_ids=None if fast is None else fast.memo.next_batch_id,
    )
    service_of.append(service)
    decider = settle = None
    if grants is not None:
        batch_max = settings.upstream_batch_max

        def batch_of(node: NodeInfo) -> int:
            own = capabilities.of(node).max_batch
            return batch_max if own is None else max(1, min(own, batch_max))

        decider = Decider(
            deps.cache_prices,
            grants,
            coalesce=settings.coalesce,
            forwards=settings.repeat_forwards,
            batch_of=batch_of,
            node_head=health.node_head,
            audit_every=(lambda n, m, p: 0) if audit is None else audit.every,
            max_answer_bytes=deps.limits.max_answer_bytes,
        )
        settle = Settle(
            ledger, grants, metrics, health.node_head, None if audit is None else audit.receipt
        )
    connect = _ws_connector(settings)
    holding_price = settings.ws_subscription_holding_nano_per_hour()
    ws_health = WsNodeHealth(
        connect,
        health.chain_head,
        WsHealthPolicy(
            interval_s=settings.ws_health_check_interval_s,
            timeout_s=settings.health_check_timeout_s,
            max_block_lag=settings.max_block_lag,
        ),
    )
    sync = StorageSync(
        engine,
        meter,
        credits,
        service.install,
        current=lambda: service.snapshot,
        version=snapshot.version,
        sync_interval_s=settings.sync_interval_s,
        flush_interval_s=settings.usage_flush_interval_s,
        health_reports=lambda: with_capabilities(health.take_reports(), service, capabilities),
        ws_health_reports=ws_health.take_reports,
        instance=instance,
        journal=journal,
        cordons=cordons,
        node_checks=node_checks,
    )
    return RouterRuntime(
        service,
        sync,
        health,
        capabilities,
        prober,
        limiter,
        cooldowns,
        engine,
        ledger,
        stale_after_s=settings.health_storage_stale_s,
        metrics=deps.metrics,
        metrics_networks=tuple(parse_networks(settings.metrics_networks)),
        metrics_share=MetricsShare(settings.metrics_dir) if settings.rpc_workers > 1 else None,
        request_log=request_log,
        hub=Hub(
            lambda: service.snapshot,
            connect,
            health.chain_head,
            bounds=WsBounds(
                settings.ws_max_connections_per_address,
                settings.ws_max_connections_per_customer,
                settings.ws_max_subscriptions_per_customer,
                settings.ws_max_filter_entries_per_customer,
            ),
            health=ws_health,
            recheck_interval_s=settings.ws_recheck_interval_s,
            feed_grace_s=settings.ws_feed_grace_s,
            holding_step_s=settings.ws_subscription_holding_step_s if holding_price else None,
            dials=DialPolicy(settings.ws_feed_dial_interval_s, settings.ws_feed_dial_backoff_max_s),
        ),
        ws_limits=WsLimits(
            settings.ws_max_subscriptions,
            settings.ws_send_queue,
            settings.max_batch_size,
            settings.ws_max_filter_entries,
            holding_price,
            settings.ws_subscribe_wait_s,
        ),
        shared_epochs=_shared_epochs(settings, cache, finality),
        shared_heads=None
        if not settings.redis_url
        else SharedHeads(
            seen_heads,
            settings.redis_url,
            timeout_s=settings.redis_timeout_s,
            name=instance,
            scope=database_fingerprint(engine.url.render_as_string(hide_password=True)),
        ),
        decider=decider,
        settle=settle,
        auditor=auditor,
    )


def _response_cache(
    settings: Settings, health: HealthMonitor, epochs: Epochs
) -> tuple[ResponseCache | None, Finality | None]:
    """The response cache and the chains' finality it keeps answers by (docs/cache.md); with
    it on, health checks ask the nodes' `finalized` block."""
    if not settings.cache_max_bytes:
        return None, None
    tier = redis_tier(
        settings.cache_redis_url or settings.redis_url,
        timeout_s=settings.cache_redis_timeout_s,
        ttl_s=settings.cache_redis_ttl_s,
        max_bytes=settings.cache_redis_max_bytes,
    )
    cache = ResponseCache(MemoryCache(settings.cache_max_bytes), tier, epochs)
    finality = Finality(
        health.chain_head,
        depth=settings.cache_finality_depth,
        depths=settings.chain_cache_finality_depth,
        on_regress=cache.purge,
        epoch_store=epochs,
    )
    health.finality = finality
    return cache, finality


def _shared_epochs(
    settings: Settings, cache: ResponseCache | None, finality: Finality | None
) -> SharedEpochs | None:
    if cache is None or cache.redis is None or finality is None:
        return None
    return SharedEpochs(finality, cache, interval_s=settings.cache_epoch_share_interval_s)


def _ws_connector(settings: Settings) -> Connect:
    """How the WebSocket feeds dial nodes: through the same dial rule and TLS trust as the
    router's HTTP calls."""
    rule = dial_rule(
        allow_private=settings.outbound_allow_private,
        trusted_networks=settings.outbound_trusted_networks,
    )
    tls = ssl_context(settings.outbound_ca_file)

    async def connect(url: str) -> UpstreamSocket:
        return await open_upstream(
            url,
            rule=rule,
            ssl=tls,
            connect_timeout_s=settings.upstream_connect_timeout_s,
            max_message_bytes=settings.ws_max_message_bytes,
        )

    return connect


def tail_policies(settings: Settings) -> TailPolicies:
    """The hedging and time-out policy of every chain, from the settings."""

    def policy(overrides: TailOverrides) -> TailPolicy:
        def pick(name: str) -> Any:
            own = getattr(overrides, name)
            return getattr(settings, name) if own is None else own

        return TailPolicy(
            hedge_max=pick("hedge_max"),
            hedge_quantile=pick("hedge_quantile"),
            hedge_floor_s=pick("hedge_delay_floor_ms") / 1000,
            hedge_ceiling_s=pick("hedge_delay_ceiling_ms") / 1000,
            timeout_multiplier=pick("adaptive_timeout_multiplier"),
            timeout_floor_s=pick("adaptive_timeout_floor_s"),
            timeout_ceiling_s=pick("upstream_timeout_s"),
        )

    by_chain = {chain_id: policy(own) for chain_id, own in settings.chain_tail.items()}
    return TailPolicies(policy(TailOverrides()), by_chain)


def _write_replayed(engine: Engine, flush: ReplayedFlush) -> None:
    write_usage(engine, flush.rows, flush.spend, reference=flush.reference)


def with_capabilities(
    reports: list[HealthReport], service: RpcService, book: CapabilityBook
) -> list[HealthReport]:
    """Health reports with what this router knows each node can answer (the provider's node
    status shows it)."""
    routes = service.snapshot.routes
    nodes = {node.node_id: node for found in routes.nodes_by_chain.values() for node in found}
    return [
        replace(report, capabilities=book.of(nodes[report.node_id]).as_json())
        if report.node_id in nodes
        else report
        for report in reports
    ]


def _report_end(task: asyncio.Task[None]) -> None:
    """Background work only ends at shutdown; anything else is a bug worth a loud log line."""
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped", task.get_name(), exc_info=task.exception())


def prover_for(settings: Settings) -> Prover:
    """The router's prover, with each chain's `verify` setting (a key may ask for more)."""
    default, per_chain = settings.verify, dict(settings.chain_verify)
    return Prover(lambda chain_id: per_chain.get(chain_id, default))
