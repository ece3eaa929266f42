"""Assembling a router process from settings: storage, snapshot, clients, limits, background."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from sqlalchemy import Engine

from chainrouter.domain.routing import NodeInfo
from chainrouter.ratelimit import create_limiter
from chainrouter.ratelimit.gcra import Limiter
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.health import HealthMonitor
from chainrouter.router.http1 import Http1Upstream
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.native_io import ASYNCIO, NATIVE, NativeUpstream
from chainrouter.router.service import FreeTierLimits, RouterLimits, RpcService
from chainrouter.router.sync import StorageSync, load_snapshot
from chainrouter.router.upstream import UpstreamClient
from chainrouter.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class RouterRuntime:
    service: RpcService
    sync: StorageSync
    health: HealthMonitor
    limiter: Limiter
    cooldowns: MemoryCooldowns
    client: UpstreamClient
    engine: Engine
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopped: bool = False

    def start_background(self, *, health_checks: bool = True) -> None:
        """Start the storage sync (and the health checker) on the running event loop. The native
        server runs the checker on its own thread instead (`native_server.run_worker`)."""
        self._tasks.append(asyncio.create_task(self.sync.run(), name="storage-sync"))
        if health_checks:
            self._tasks.append(
                asyncio.create_task(self.health.run(self.current_nodes), name="health-checks")
            )
        for task in self._tasks:
            task.add_done_callback(_report_end)

    def current_nodes(self) -> list[NodeInfo]:
        routes = self.service.snapshot.routes
        return [node for nodes in routes.nodes_by_chain.values() for node in nodes]

    async def stop(self) -> None:
        """Stop background work, then write every metered call before closing (once)."""
        if self._stopped:
            return
        self._stopped = True
        self.health.stop()  # wherever it runs
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if not await self.sync.flush():
            self.sync.log_unwritten()
        await self.client.close()
        await self.limiter.close()
        self.engine.dispose()


def build_runtime(
    settings: Settings,
    engine: Engine,
    *,
    client: UpstreamClient | None = None,
    native: bool = False,
) -> RouterRuntime:
    """Everything a router process needs; the snapshot is loaded before this returns.

    `client` replaces the HTTP client to the nodes (the pipeline benchmark uses one that answers
    at once, to time the pipeline without any I/O). `native`: the pipeline and the health checker
    are run by the native server, so calls go out through its Rust client.
    """
    snapshot = load_snapshot(engine)
    if client is None and native:
        client = NativeUpstream()
    elif client is None:
        client = Http1Upstream(
            max_response_bytes=settings.max_response_bytes,
            connect_timeout_s=settings.upstream_connect_timeout_s,
            ca_file=settings.outbound_ca_file,
        )
    cooldowns = MemoryCooldowns()
    health = HealthMonitor(
        client,
        cooldowns,
        interval_s=settings.health_check_interval_s,
        max_per_s=settings.health_check_max_per_s,
        concurrency=settings.health_check_concurrency,
        timeout_s=settings.health_check_timeout_s,
        max_block_lag=settings.max_block_lag,
    )
    limiter = create_limiter(settings.redis_url)
    meter = UsageMeter()
    credits = CreditView()
    credits.replace_stored(dict(snapshot.balances_nano))
    service = RpcService(
        snapshot,
        client=client,
        limiter=limiter,
        cooldowns=cooldowns,
        health=health,
        meter=meter,
        credits=credits,
        limits=RouterLimits(
            max_body_bytes=settings.max_body_bytes,
            max_batch_size=settings.max_batch_size,
            attempt_timeout_s=settings.upstream_timeout_s,
            deadline_s=settings.request_deadline_s,
            max_logs_block_range=settings.max_logs_block_range,
        ),
        free_tier=FreeTierLimits(
            enabled=settings.free_tier_enabled,
            ip_requests=settings.free_tier_ip_requests,
            ip_interval_s=settings.free_tier_ip_interval_s,
            capacity_per_s=settings.free_tier_capacity_per_s,
            signup_url=settings.signup_url,
        ),
        concurrency=NATIVE if native else ASYNCIO,
    )
    sync = StorageSync(
        engine,
        meter,
        credits,
        service.install,
        version=snapshot.version,
        sync_interval_s=settings.sync_interval_s,
        flush_interval_s=settings.usage_flush_interval_s,
        health_reports=health.take_reports,
    )
    return RouterRuntime(service, sync, health, limiter, cooldowns, client, engine)


def _report_end(task: asyncio.Task[None]) -> None:
    """Background work only ends at shutdown; anything else is a bug worth a loud log line."""
    if not task.cancelled() and task.exception() is not None:
        log.error("%s stopped", task.get_name(), exc_info=task.exception())
