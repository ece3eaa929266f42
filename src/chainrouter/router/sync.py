"""The router's only link to storage: reload the snapshot when configuration changes, write usage.

One background loop, so a reload and a flush never overlap (the credit view relies on that):
every `sync_interval_s` it reads the configuration version and, when it moved, loads a new
snapshot; every `flush_interval_s` it writes the metered usage and re-reads balances. Database
calls run in a worker thread so the event loop keeps serving. A flush that fails is kept and
retried first next time; nothing metered is dropped, and the final flush runs at shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from chainrouter.domain.routing import HealthReport
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.router.metering import CreditView, UsageBatch, UsageMeter
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.node_health import write_node_health
from chainrouter.stores.sql.snapshot import load_router_snapshot
from chainrouter.stores.sql.usage import read_balances, write_usage

log = logging.getLogger(__name__)


def load_snapshot(engine: Engine) -> RouterSnapshot:
    with engine.begin() as connection:
        return load_router_snapshot(connection)


def _read_version(engine: Engine) -> int:
    with engine.connect() as connection:
        return read_config_version(connection)


class StorageSync:
    def __init__(
        self,
        engine: Engine,
        meter: UsageMeter,
        credits: CreditView,
        install: Callable[[RouterSnapshot], None],
        *,
        version: int,
        sync_interval_s: float,
        flush_interval_s: float,
        health_reports: Callable[[], list[HealthReport]] | None = None,
    ) -> None:
        self.engine = engine
        self._meter = meter
        self._credits = credits
        self._install = install
        self.version = version
        self._sync_interval_s = sync_interval_s
        self._flush_interval_s = flush_interval_s
        self._health_reports = health_reports
        # Names this process's flushes in the ledger (idempotent retries; see write_usage).
        self._instance = secrets.token_hex(8)
        self._unwritten: list[UsageBatch] = []
        self.failed_flushes = 0

    async def run(self) -> None:
        """Until cancelled; storage errors are logged and retried, never fatal."""
        last_flush = time.monotonic()
        while True:
            await asyncio.sleep(self._sync_interval_s)
            try:
                await self.refresh()
            except SQLAlchemyError as exc:
                log.warning("cannot read the configuration version: %s", _first_line(exc))
            except Exception:  # a bad row must not end syncing for the life of the process
                log.exception("cannot load the configuration; still serving the previous one")
            if time.monotonic() - last_flush >= self._flush_interval_s:
                last_flush = time.monotonic()
                await self.flush()
                await self.report_health()

    async def report_health(self) -> None:
        """Store what this router's health checker saw since the last report."""
        if self._health_reports is None:
            return
        reports = self._health_reports()
        try:
            await asyncio.to_thread(write_node_health, self.engine, reports)
        except SQLAlchemyError as exc:  # each node is reported again after its next check
            log.warning("cannot store node health: %s", _first_line(exc))

    async def refresh(self) -> bool:
        """Load and install a new snapshot if the configuration changed; True if it did."""
        version = await asyncio.to_thread(_read_version, self.engine)
        if version == self.version:
            return False
        snapshot = await asyncio.to_thread(load_snapshot, self.engine)
        self._install(snapshot)
        self._credits.replace_stored(dict(snapshot.balances_nano))
        log.info("configuration version %d loaded (was %d)", snapshot.version, self.version)
        self.version = snapshot.version
        return True

    async def flush(self) -> bool:
        """Write what was metered; True when nothing is left unwritten."""
        taken = self._meter.take()
        if taken:
            self._unwritten.append(taken)
        wrote = False
        while self._unwritten:
            batch = self._unwritten[0]
            try:
                balances = await asyncio.to_thread(
                    write_usage,
                    self.engine,
                    batch.rows,
                    batch.spend,
                    reference=f"usage:{self._instance}:{batch.sequence}",
                )
            except SQLAlchemyError as exc:
                self.failed_flushes += 1
                log.warning(
                    "usage not written yet (%d flushes pending, kept for retry): %s",
                    len(self._unwritten),
                    _first_line(exc),
                )
                return False
            except Exception:
                self.failed_flushes += 1
                log.exception("usage not written yet (kept for retry)")
                return False
            self._unwritten.pop(0)
            self._credits.written(batch.spend, balances)
            wrote = True
        if not wrote:
            # Nothing of ours to write, but others (routers, purchases) may have moved balances.
            try:
                balances = await asyncio.to_thread(_read_balances, self.engine)
            except SQLAlchemyError as exc:
                log.warning("cannot read balances: %s", _first_line(exc))
                return True
            self._credits.replace_stored(balances)
        return True


def _read_balances(engine: Engine) -> dict[int, int]:
    with engine.connect() as connection:
        return read_balances(connection)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
