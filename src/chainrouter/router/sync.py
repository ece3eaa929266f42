"""The router's only link to storage: reload the snapshot when configuration changes, write usage.

One background loop, so a reload and a flush never overlap (the credit view relies on that):
every `sync_interval_s` it reads the configuration version and, when it moved, loads a new
snapshot; every `flush_interval_s` it writes the metered usage, re-reads balances, and re-reads
where each plan with a quota stands in its billing cycle, installing the snapshot's routes in a
new order when a standing changed (a plan into overage, or out of it as a cycle begins). Database
calls run in a worker thread so the event loop keeps serving. A flush that fails because the
database is away (an error of the kind an unreachable database raises, and a read then fails too)
is kept and retried first next time; nothing metered is dropped, and the final flush runs at
shutdown. A flush that fails for any other reason (a constraint, a balance out of
range, a bug) would fail the same way every time, so it must not hold back the flushes behind it:
it is split by customer, the parts that can be written are, and a part that still fails is set
aside, logged, and tried again at every flush after the others. After the usage, each flush
writes the health reports, the cordons, and what audits and proofs found of each node (counts
added to the node's totals, kept for the next flush if storage fails: router/node_checks.py).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from chainrouter.domain.money import format_credits
from chainrouter.domain.plan_cycle import PlanTerms, Standing
from chainrouter.domain.routing import HealthReport
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.router.cordon import Cordons
from chainrouter.router.journal import UsageJournal
from chainrouter.router.metering import CreditView, UsageBatch, UsageKey, UsageMeter
from chainrouter.router.node_checks import NodeChecks
from chainrouter.stores.sql.config_version import read_config_version
from chainrouter.stores.sql.engine import database_away, read_snapshot
from chainrouter.stores.sql.node_checks import write_node_checks
from chainrouter.stores.sql.node_health import write_node_health
from chainrouter.stores.sql.nodes import write_cordons
from chainrouter.stores.sql.plan_usage import plan_standings
from chainrouter.stores.sql.schema import utcnow
from chainrouter.stores.sql.snapshot import load_router_snapshot
from chainrouter.stores.sql.usage import read_balances, write_usage

log = logging.getLogger(__name__)


def load_snapshot(engine: Engine) -> RouterSnapshot:
    # One snapshot of the database for every part: under READ COMMITTED each statement would see
    # the commits made since the one before, and keys, routes and balances could disagree.
    with read_snapshot(engine) as connection:
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
        current: Callable[[], RouterSnapshot] | None = None,
        version: int,
        sync_interval_s: float,
        flush_interval_s: float,
        health_reports: Callable[[], list[HealthReport]] | None = None,
        ws_health_reports: Callable[[], list[HealthReport]] | None = None,
        instance: str | None = None,
        journal: UsageJournal | None = None,
        cordons: Cordons | None = None,
        node_checks: NodeChecks | None = None,
    ) -> None:
        self.engine = engine
        self._cordons = cordons  # cordons to store (router/cordon.py)
        self._node_checks = node_checks  # audits' and proofs' counts (router/node_checks.py)
        self._meter = meter
        self._credits = credits
        self._install = install
        self._current = current  # the installed snapshot; None: plan standings are not followed
        self.version = version
        self._sync_interval_s = sync_interval_s
        self._flush_interval_s = flush_interval_s
        self._health_reports = health_reports
        self._ws_health_reports = ws_health_reports
        # Names this process's flushes in storage (idempotent retries; see write_usage), and its
        # usage journal, which is told when a flush is in storage.
        self._instance = instance or secrets.token_hex(8)
        self._journal = journal
        # When storage last answered (monotonic): the snapshot was loaded just before this.
        self.last_contact: float | None = time.monotonic()
        self.last_flushed: float | None = None  # when everything metered was last in storage
        self._unwritten: list[UsageBatch] = []  # in order; the head is retried first
        self._set_aside: list[UsageBatch] = []  # one customer each, failed but not for a outage
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
                await self.write_cordons()
                await self.write_node_checks()

    async def report_health(self) -> None:
        """Store what this router's health checker saw since the last report."""
        for ws, source in ((False, self._health_reports), (True, self._ws_health_reports)):
            if source is None:
                continue
            reports = source()
            try:
                await asyncio.to_thread(write_node_health, self.engine, reports, ws=ws)
            except SQLAlchemyError as exc:  # each node is reported again after its next check
                log.warning("cannot store node health: %s", _first_line(exc))

    async def write_cordons(self) -> None:
        """Store the cordons made since the last round; kept for the next if storage fails."""
        if self._cordons is None:
            return
        writes = self._cordons.take_writes()
        if not writes:
            return
        try:
            await asyncio.to_thread(write_cordons, self.engine, writes)
        except SQLAlchemyError as exc:
            self._cordons.put_back(writes)
            log.warning("cannot store cordons: %s", _first_line(exc))
            return
        self._cordons.stored(writes)

    async def write_node_checks(self) -> None:
        """Add what audits and proofs found since the last round to the nodes' totals; kept
        for the next round if storage fails (lost only if this router dies first: counts, not
        money)."""
        if self._node_checks is None:
            return
        writes = self._node_checks.take()
        if not writes:
            return
        try:
            await asyncio.to_thread(write_node_checks, self.engine, writes)
        except SQLAlchemyError as exc:
            self._node_checks.put_back(writes)
            log.warning("cannot store node checks: %s", _first_line(exc))

    async def refresh(self) -> bool:
        """Load and install a new snapshot if the configuration changed; True if it did."""
        version = await asyncio.to_thread(_read_version, self.engine)
        self.last_contact = time.monotonic()
        if version == self.version and not self._price_due():
            return False
        snapshot = await asyncio.to_thread(load_snapshot, self.engine)
        self._install(snapshot)
        if self._cordons is not None:
            routes = snapshot.routes
            self._cordons.present({n.node_id for ns in routes.nodes_by_chain.values() for n in ns})
            self._cordons.elsewhere(snapshot.cordoned)
        self._credits.replace_stored(dict(snapshot.balances_nano))
        log.info("configuration version %d loaded (was %d)", snapshot.version, self.version)
        self.version = snapshot.version
        return True

    def _price_due(self) -> bool:
        """Whether a price set with notice applies now, with the configuration unchanged: the
        routers load their prices again (stores/sql/snapshot.py, `next_price_at`)."""
        current = self._current
        due = None if current is None else current().next_price_at
        return due is not None and due <= utcnow()

    async def flush(self) -> bool:
        """Write what was metered; True when nothing is left unwritten."""
        taken = self._meter.take()
        if taken:
            self._unwritten.append(taken)
        wrote = False
        while self._unwritten:
            batch = self._unwritten[0]
            try:
                await self._write(batch)
            except Exception as exc:
                self.failed_flushes += 1
                if await self._storage_away(exc):
                    log.warning(
                        "usage not written yet (%d flushes pending, kept for retry): %s",
                        len(self._unwritten),
                        _first_line(exc),
                    )
                    return False
                self._unwritten.pop(0)
                self._unwritten[:0] = self._isolate(batch, exc)
                continue
            self._unwritten.pop(0)
            self._journal_written(batch.sequence)
            wrote = True
        for batch in list(self._set_aside):
            try:
                await self._write(batch)
            except Exception as exc:
                if await self._storage_away(exc):
                    return False
                log.debug("usage set aside still not written: %s", _first_line(exc))
                continue
            self._set_aside.remove(batch)
            self._journal_written(batch.sequence)
            log.warning("usage set aside earlier is now written (%s)", _describe(batch))
            wrote = True
        if not wrote:
            # Nothing of ours to write, but others (routers, purchases) may have moved balances.
            try:
                balances = await asyncio.to_thread(_read_balances, self.engine)
            except SQLAlchemyError as exc:
                log.warning("cannot read balances: %s", _first_line(exc))
                return not self._set_aside
            self.last_contact = time.monotonic()
            self._credits.replace_stored(balances)
        if not self._unwritten and not self._set_aside:
            self.last_flushed = time.monotonic()
        await self.follow_plan_standings()
        return not self._set_aside

    async def follow_plan_standings(self) -> bool:
        """Re-read where each plan with a quota stands in its cycle (what every router has
        flushed so far); when one changed, install the snapshot's routes ordered by the new
        standings. True if it did."""
        if self._current is None:
            return False
        snapshot = self._current()
        routes = snapshot.routes
        terms = {
            plan.plan_id: PlanTerms(plan.quota, plan.cycle)
            for plan in routes.plans.values()
            if plan.quota is not None
        }
        if not terms:
            return False
        try:
            standings = await asyncio.to_thread(_read_standings, self.engine, terms)
        except SQLAlchemyError as exc:
            log.warning("cannot read plan standings: %s", _first_line(exc))
            return False
        if standings == routes.standings:
            return False
        for plan_id in sorted(standings):
            was = routes.standings.get(plan_id)
            if standings[plan_id] != was:
                log.info("plan %d now %s (was %s)", plan_id, standings[plan_id], was)
        self._install(replace(snapshot, routes=routes.with_standings(standings)))
        return True

    def _journal_written(self, sequence: int) -> None:
        """Mark flush `sequence` written in the journal once no part of it is pending."""
        if self._journal is None:
            return
        if any(b.sequence == sequence for b in (*self._unwritten, *self._set_aside)):
            return
        self._journal.written(sequence)
        if not self._unwritten and not self._set_aside:  # every flush taken is in storage
            self._meter.rotate_journal(sequence)

    def close_journal(self) -> None:
        """At exit: the journal is removed when everything in it is in storage, else kept for
        the next start to replay."""
        if self._journal is not None:
            self._journal.close(remove=not self.unwritten_batches)

    @property
    def unwritten_batches(self) -> int:
        """Flushes (or customers' parts of them) metered but not yet in storage."""
        return len(self._unwritten) + len(self._set_aside)

    def log_unwritten(self) -> None:
        """At exit, whatever storage never took goes to the log, so it can be put right by hand."""
        for batch in [*self._unwritten, *self._set_aside]:
            log.error("usage lost at exit, never written: %s", _describe(batch))

    async def _write(self, batch: UsageBatch) -> None:
        balances = await asyncio.to_thread(
            write_usage,
            self.engine,
            batch.rows,
            batch.spend,
            reference=f"usage:{self._instance}:{batch.sequence}",
        )
        self.last_contact = time.monotonic()
        self._credits.written(batch.spend, balances)

    async def _storage_away(self, exc: Exception) -> bool:
        """Whether a write failed because storage is away (then it is retried as it is, and
        holds back what follows, which could not be written either). An OperationalError is also
        what one row that can never be written may raise (a program limit, a statement time-out,
        SQLite's errors): if storage still answers, the write failed for itself, and must not
        hold back every later flush."""
        if not database_away(exc):
            return False
        if _contended(exc):  # busy, not broken: a reader would pass while the writer waits
            return True
        try:
            await asyncio.to_thread(_read_version, self.engine)
        except SQLAlchemyError:
            return True
        self.last_contact = time.monotonic()
        return False

    def _isolate(self, batch: UsageBatch, exc: Exception) -> list[UsageBatch]:
        """What to retry at once in place of a batch that failed for good: its customers' parts,
        or nothing when it is one customer's already (that part is set aside)."""
        parts = split_by_customer(batch)
        if len(parts) > 1:
            log.warning("usage not written (%s); writing it customer by customer", _first_line(exc))
            return parts
        self._set_aside.append(batch)
        log.error(
            "usage cannot be written (%s): %s; kept in memory, counted against the balance, and "
            "retried at every flush without holding back the others",
            _first_line(exc),
            _describe(batch),
            exc_info=not isinstance(exc, SQLAlchemyError),
        )
        return []


def split_by_customer(batch: UsageBatch) -> list[UsageBatch]:
    """One batch per customer, each under the batch's own number.

    They may keep the one reference: storage marks a flush as written once per customer, so a
    part retried after an unknown outcome is still recognised as written.
    """
    rows: dict[int, dict[UsageKey, list[int]]] = {}
    for key, counts in batch.rows.items():
        rows.setdefault(key[0], {})[key] = counts
    return [
        UsageBatch(
            part,
            {customer: batch.spend[customer]} if customer in batch.spend else {},
            batch.sequence,
        )
        for customer, part in sorted(rows.items())
    ]


# PostgreSQL: lock_not_available, serialization_failure, deadlock_detected.
_CONTENDED_STATES = frozenset({"55P03", "40001", "40P01"})
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6  # primary result codes (extended ones add high bits)


def _contended(exc: BaseException) -> bool:
    """Whether a write lost a wait for a lock (another writer held the database or its rows):
    the same write succeeds once the other is done, whoever the customers are."""
    original = getattr(exc, "orig", None)
    if getattr(original, "sqlstate", None) in _CONTENDED_STATES:
        return True
    code = getattr(original, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)


def _describe(batch: UsageBatch) -> str:
    customers = sorted({key[0] for key in batch.rows})
    calls = sum(counts[0] for counts in batch.rows.values())
    spend = ", ".join(
        f"customer {c}: {format_credits(n)} credits" for c, n in sorted(batch.spend.items())
    )
    return (
        f"flush {batch.sequence}, {calls} calls of customers {customers}"
        f"{'; ' + spend if spend else ''}"
    )


def _read_standings(engine: Engine, terms: dict[int, PlanTerms]) -> dict[int, Standing]:
    with engine.connect() as connection:
        return plan_standings(connection, terms)


def _read_balances(engine: Engine) -> dict[int, int]:
    with engine.connect() as connection:
        return read_balances(connection)


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
