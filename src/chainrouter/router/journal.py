"""The usage journal: what a router metered, on local disk before storage has it, so that a
router killed without warning (`kill -9`, the OOM killer, a lost machine's process) loses no
served usage (docs/router.md, "Usage").

Each router process appends to its own file, `<dir>/<instance>.journal`, one JSON line per
event, written with one `write` to a file opened for appending, at the moment the event happens.
The first line names the database the usage belongs to (`{"db": <fingerprint>}`, a digest of
its URL without the password): a journal is replayed only into that database.
- `{"u": [customer, key, chain, method, scenario, hour, nano-credits, plan]}`: a call was
  metered (`plan` 0 when no plan's node answered it; lines written before plans were counted
  have no `plan` and replay as 0);
- `{"t": N, "at": unix seconds}`: the meter's rows so far were taken as flush N at that time
  (the `u` lines since the previous `t` belong to it; lines written before the time was kept
  have no `at`);
- `{"w": N}`: flush N is in storage.

A live router's journal would grow with every call it serves: once every flush it took is in
storage and the file is over `ROTATE_BYTES`, it is replaced (`rotate`, under the meter's lock)
by a new one holding only what is not: its header says the flushes before continue after N
(`{"db": ..., "s": N}`), and the calls metered since flush N follow as `u` lines with a count (a
ninth field). The new file is written beside the old and renamed over it, so a replay finds one
or the other, never both.
A `write` is in the kernel when it returns: a process killed after it loses nothing; only a
machine that loses power before the page cache reaches the disk does (no `fsync` per call: it
would cost milliseconds). On a full disk the router keeps serving (storage still gets every
flush); a line the disk refused is lost to the journal, but a refused `t` or `w` is written again
before the next line once there is room, so the flushes stay apart.

The live process holds an exclusive lock (`flock`) on its file, which the kernel drops when the
process dies, however it dies. At start, a router replays every journal in the directory whose
lock it can take: each flush not marked written (and the rows after the last `t`) is written to
storage under the dead process's own flush reference, `usage:<instance>:<N>`, which storage
accepts once per customer (stores/sql/usage.py), so a flush that did reach storage before the
crash is not charged twice. Then the file is removed. A graceful stop removes its own file once
everything is written.

Storage keeps those marks for a while only (`usage_flushes`, FLUSH_MARK_RETENTION). A flush
taken longer ago than that, less a margin for clocks, may or may not be in storage, and nothing
can tell which: replayed, it could be counted twice (a free call has no ledger row to guard it);
refused by the ledger's unique reference, it would be tried again at every start. Such a flush is
not written: the journal is set aside as `<instance>.journal.stale` and the flush logged as an
error, with its calls and credits, for an operator to decide (docs/router.md, "Usage").
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from chainrouter.domain.enums import Scenario

log = logging.getLogger(__name__)

SUFFIX = ".journal"
ROTATE_BYTES = 1 << 20  # a journal whose flushes are all in storage is replaced past this size
STALE_SUFFIX = ".stale"  # a journal with a flush too old to replay safely, set aside
ROTATING_SUFFIX = ".new"  # a journal's replacement while it is written (`rotate`)
# Storage's flush marks are written on the router's clock and deleted on another's: a flush is
# replayed only while its marks, if any, are sure to be there, this much before they go.
CLOCK_MARGIN_S = 3600.0
# (customer, key, chain, method, scenario, hour, plan): the meter's row key (router/metering.py)
RowKey = tuple[int, int, int, str, str, int, int]


class UsageJournal:
    """This process's journal, open for appending and locked for as long as it lives."""

    def __init__(self, directory: Path, instance: str, database: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{instance}{SUFFIX}"
        self._database = database
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self.failed_writes = 0
        self._writing = threading.Lock()  # calls are metered on one thread, flushes on another
        self._torn = False  # a write failed: the file may end in part of a line
        self._unwritten_markers = b""  # `t` and `w` lines whose write failed, to write first
        self._append(orjson.dumps({"db": database}))

    def metered(self, key: RowKey, credits_nano: int, count: int = 1) -> None:
        """`count` calls of one row, costing `credits_nano` in all."""
        self._append(_row_line(key, credits_nano, count))

    def rotate(self, after: int, rows: dict[RowKey, list[int]]) -> bool:
        """Replace the file, once past `ROTATE_BYTES`, by one that holds only `rows` (the calls
        metered since flush `after`, every flush up to which is in storage). The caller holds
        the meter's lock: nothing is metered meanwhile. True if replaced."""
        try:
            if os.fstat(self._fd).st_size < ROTATE_BYTES:
                return False
            fresh = self.path.with_name(self.path.name + ROTATING_SUFFIX)  # not one to replay
            fd = os.open(fresh, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            log.warning("usage journal %s not rotated: %s", self.path, exc)
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            lines = [orjson.dumps({"db": self._database, "s": after})]
            lines += [_row_line(key, credits, count) for key, (count, credits) in rows.items()]
            _write_all(fd, b"\n".join(lines) + b"\n")
            os.rename(fresh, self.path)
        except OSError as exc:
            os.close(fd)
            fresh.unlink(missing_ok=True)
            log.warning("usage journal %s not rotated: %s", self.path, exc)
            return False
        with self._writing:
            os.close(self._fd)
            self._fd, self._torn, self._unwritten_markers = fd, False, b""
        return True

    def taken(self, sequence: int) -> None:
        self._append(b'{"t":%d,"at":%d}' % (sequence, time.time()), marker=True)

    def written(self, sequence: int) -> None:
        self._append(b'{"w":%d}' % sequence, marker=True)

    def _append(self, line: bytes, *, marker: bool = False) -> None:
        with self._writing:
            self._append_locked(line, marker)

    def _append_locked(self, line: bytes, marker: bool) -> None:
        data = line + b"\n"
        if self._unwritten_markers or self._torn:
            # After a failed write: a newline first, so that a torn line stays a line of its own
            # (unreadable, skipped by the replay), then the flush markers that failed, in order:
            # a lost `t` would have the replay take two flushes' rows for the later one.
            data = b"\n" + self._unwritten_markers + data
        try:
            _write_all(self._fd, data)
            self._torn, self._unwritten_markers = False, b""
        except OSError as exc:  # a full disk must not stop serving: storage still gets it all
            self._torn = True
            if marker:
                self._unwritten_markers += line + b"\n"
            self.failed_writes += 1
            if self.failed_writes == 1 or self.failed_writes % 10_000 == 0:
                log.error(
                    "usage journal %s not written (%d times): %s",
                    self.path,
                    self.failed_writes,
                    exc,
                )

    def close(self, *, remove: bool) -> None:
        """Close the file; with `remove`, delete it first (everything in it is in storage)."""
        if self._fd < 0:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = -1


@dataclass(slots=True)
class ReplayedFlush:
    instance: str
    sequence: int
    rows: dict[RowKey, list[int]]  # key -> [calls, nano-credits]
    spend: dict[int, int]  # customer -> nano-credits
    # Unix seconds it was taken at (the `t` line's `at`, or the file's last change for a `t`
    # without one); None for rows after the last `t`: never taken, so never in storage.
    taken_at: float | None = None

    @property
    def reference(self) -> str:
        return f"usage:{self.instance}:{self.sequence}"


def database_fingerprint(url: str) -> str:
    """Names a database without revealing its URL: a digest of the URL without the password."""
    return hashlib.sha256(url.encode()).hexdigest()[:32]


def _row_line(key: RowKey, credits_nano: int, count: int = 1) -> bytes:
    """A `u` line: one metered call, (a rotated file's) `count` calls of one row, or credits
    charged for no call (count 0: a subscription held)."""
    customer, api_key, chain, method, scenario, hour, plan = key
    # Formatted, not a dictionary encoded: this runs once per call. The method (a name some plan
    # prices, or "(unsupported)") is the one field that may need escaping.
    line = b'{"u":[%d,%d,%d,%b,"%b",%d,%d,%d' % (
        customer,
        api_key,
        chain,
        orjson.dumps(method),
        scenario.encode(),
        hour,
        credits_nano,
        plan,
    )
    return line + (b"]}" if count == 1 else b",%d]}" % count)


def _write_all(fd: int, data: bytes) -> None:
    """Write all of `data`: a short write (a disk filling up) is followed by the rest, or by
    the OSError that stopped it."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])


def journal_database(lines: Iterator[bytes]) -> str | None:
    """The database fingerprint a journal's first line names, if it names one."""
    return _header(next(lines, b""))[0]


def _header(first: bytes) -> tuple[str | None, int]:
    """A journal's database, and the flush its rows continue after (0 but in a rotated one)."""
    try:
        header = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None, 0
    if not isinstance(header, dict):
        return None, 0
    database, after = header.get("db"), header.get("s", 0)
    return (database if isinstance(database, str) else None), (
        after if isinstance(after, int) and after >= 0 else 0
    )


def unwritten_flushes(
    instance: str, lines: Iterator[bytes], after: int = 0, changed_at: float = 0.0
) -> list[ReplayedFlush]:
    """The flushes a journal holds that it does not mark written, rows after the last `t`
    included (as the flush after it). A torn last line (the process died inside a `write`) or
    any line that is not an event is skipped. `changed_at`: when the file last changed, taken as
    the time of a `t` that does not say its own."""
    flushes: dict[int, ReplayedFlush] = {}
    written: set[int] = set()
    current = ReplayedFlush(instance, after + 1, {}, {})
    for raw in lines:
        try:
            event: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        if "u" in event:
            _add(current, event["u"])
        elif isinstance(event.get("t"), int):
            current.sequence = event["t"]
            at = event.get("at")
            current.taken_at = at if isinstance(at, int) else changed_at
            flushes[current.sequence] = current
            current = ReplayedFlush(instance, current.sequence + 1, {}, {})
        elif isinstance(event.get("w"), int):
            written.add(event["w"])
        elif isinstance(event.get("s"), int) and not current.rows:  # a rotated file's header
            current.sequence = event["s"] + 1
    if current.rows:
        flushes[current.sequence] = current
    return [f for n, f in sorted(flushes.items()) if n not in written and f.rows]


def _add(flush: ReplayedFlush, fields: Any) -> None:
    if not isinstance(fields, list) or len(fields) not in (7, 8, 9):
        return
    customer, api_key, chain, method, scenario, hour, credits, *rest = fields
    plan = rest[0] if rest else 0
    # A rotated file's rows carry their count, and so do calls taken back: a dispute moves
    # calls out of their scenario with a negative count (router/cordon.py).
    count = rest[1] if len(rest) > 1 else 1
    values = (customer, api_key, chain, hour, credits, plan, count)
    # A count of 0 with credits is a charge for no call (a subscription held); 0 and 0 is
    # nothing at all.
    if not all(isinstance(v, int) for v in values) or (count == 0 and credits == 0):
        return
    if not isinstance(method, str) or scenario not in Scenario._value2member_map_:
        return
    key = (customer, api_key, chain, method, Scenario(scenario), hour, plan)
    row = flush.rows.setdefault(key, [0, 0])
    row[0] += count
    row[1] += credits
    if credits:
        flush.spend[customer] = flush.spend.get(customer, 0) + credits


WriteFlush = Callable[[ReplayedFlush], None]


def replay_journals(
    directory: Path,
    database: str,
    write: WriteFlush,
    *,
    marks_kept_s: float,
    now: Callable[[], float] = time.time,
) -> int:
    """Write what dead routers' journals of `database` in `directory` hold and storage may
    lack; remove each journal once done. Journals of live routers (locked) and of other
    databases are left alone. The number of flushes written. A flush storage refuses for good
    is logged and its journal kept, for an operator. `marks_kept_s`: how long storage keeps a
    flush's marks; a flush taken longer ago (less CLOCK_MARGIN_S) is set aside, not written."""
    if not directory.is_dir():
        return 0
    replayed = 0
    for path in sorted(directory.glob(f"*{SUFFIX}")):
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:  # another router replayed it first
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its router is alive
            try:
                current = os.stat(path)
            except FileNotFoundError:
                continue  # replayed and removed while this one waited
            if current.st_ino != os.fstat(fd).st_ino:
                continue  # its live router rotated it: the file locked here is not the journal
            with open(fd, "rb", closefd=False) as journal:
                lines = iter(journal)
                named, after = _header(next(lines, b""))
                if named != database:
                    continue  # another database's usage: not this router's to write
                flushes = unwritten_flushes(path.stem, lines, after, current.st_mtime)
            oldest_safe = now() - marks_kept_s + CLOCK_MARGIN_S
            stale: list[ReplayedFlush] = []
            fresh: list[ReplayedFlush] = []
            for flush in flushes:
                old = flush.taken_at is not None and flush.taken_at < oldest_safe
                (stale if old else fresh).append(flush)
            for flush in fresh:
                write(flush)
                replayed += 1
                log.warning(
                    "usage of a router that stopped without writing it replayed from %s: "
                    "flush %d, %d calls",
                    path.name,
                    flush.sequence,
                    sum(row[0] for row in flush.rows.values()),
                )
            if stale:
                path.rename(path.with_name(path.name + STALE_SUFFIX))
                _log_stale(path, stale)
            else:
                path.unlink()
            # A rotation its router died in leaves the new file unrenamed: the old one, just
            # replayed, held everything.
            path.with_name(path.name + ROTATING_SUFFIX).unlink(missing_ok=True)
        except Exception:
            log.exception("usage journal %s not replayed; kept for the next start", path)
        finally:
            os.close(fd)
    return replayed


def _log_stale(path: Path, stale: list[ReplayedFlush]) -> None:
    for flush in stale:
        log.error(
            "usage journal %s set aside as %s%s: flush %d (%s), taken at %s, is older than "
            "storage keeps its marks, so whether storage has it cannot be told; not written: "
            "%d calls, %d nano-credits; check the usage and ledger of its customers %s and "
            "replay or remove it by hand",
            path.name,
            path.name,
            STALE_SUFFIX,
            flush.sequence,
            flush.reference,
            time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(flush.taken_at or 0)),
            sum(row[0] for row in flush.rows.values()),
            sum(row[1] for row in flush.rows.values()),
            sorted({key[0] for key in flush.rows}),
        )
