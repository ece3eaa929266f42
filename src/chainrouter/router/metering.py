"""Metering: what each call cost, aggregated in memory until the next flush to storage.

Also the router's view of balances for the credit check: the balance storage last reported, minus
what this process has spent since and not yet written, minus what calls in flight have reserved.
Nothing here touches storage; `chainrouter.router.sync` moves batches in and balances out.

Both are shared between threads under the native server: calls are metered and charged on the
server's thread while the sync takes batches and writes balances on the event loop's. Each
method holds the object's lock for its few dictionary operations, so that no call is metered
into a batch already taken and no charge is lost to a concurrent update.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from chainrouter.domain.enums import Scenario
from chainrouter.router.journal import UsageJournal

# (customer id, API key id, chain id, method, scenario, hour start as Unix seconds, id of the
# plan whose node answered, 0 for none)
UsageKey = tuple[int, int, int, str, str, int, int]
UNSUPPORTED_METHOD_NAME = "(unsupported)"  # unknown names are not stored: clients choose them
_HOUR = 3600


@dataclass(slots=True)
class UsageBatch:
    """Usage taken out of the meter for one flush."""

    rows: dict[UsageKey, list[int]]  # key -> [request count, credits in nano]
    spend: dict[int, int]  # customer id -> nano-credits charged
    sequence: int  # flush number in this process; makes the ledger reference unique

    def __bool__(self) -> bool:
        return bool(self.rows)


@dataclass(slots=True)
class UsageMeter:
    _rows: dict[UsageKey, list[int]] = field(default_factory=dict)
    _spend: dict[int, int] = field(default_factory=dict)
    _sequence: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # Where each metered call and each take is also appended, as it happens (router/journal.py).
    journal: UsageJournal | None = None
    # Every take's calls and nano-credits so far by (chain, method, scenario), for the metrics
    # (`totals`): counted once per flush, never per call.
    _taken: dict[tuple[int, str, str], list[int]] = field(default_factory=dict)

    def record(
        self,
        customer_id: int,
        key_id: int,
        chain_id: int,
        method: str,
        scenario: Scenario,
        credits_nano: int,
        plan_id: int = 0,
        *,
        count: int = 1,
        hour: int | None = None,
    ) -> None:
        """`count` calls alike, each costing `credits_nano`, in this hour or the one given
        (Unix seconds; a dispute moves calls in the hour they were served: router/cordon.py).
        A negative `count` takes calls back."""
        if hour is None:
            hour = int(time.time()) // _HOUR * _HOUR
        # The member, not `.value`: a StrEnum member is already the string, and `.value` is a
        # Python-level property, run on every call.
        key = (customer_id, key_id, chain_id, method, scenario, hour, plan_id)
        if count != 1:
            credits_nano *= count
        self._add(key, count, credits_nano)

    def record_credits(
        self,
        customer_id: int,
        key_id: int,
        chain_id: int,
        method: str,
        scenario: Scenario,
        credits_nano: int,
    ) -> None:
        """`credits_nano` charged in this hour for something that is not a call (a WebSocket
        subscription held open: router/ws/session.py): its row's credits grow, its count of
        calls does not, and no plan earns it."""
        hour = int(time.time()) // _HOUR * _HOUR
        self._add((customer_id, key_id, chain_id, method, scenario, hour, 0), 0, credits_nano)

    def _add(self, key: UsageKey, count: int, credits_nano: int) -> None:
        customer_id = key[0]
        with self._lock:
            row = self._rows.get(key)
            if row is None:
                self._rows[key] = [count, credits_nano]
            else:
                row[0] += count
                row[1] += credits_nano
            if credits_nano:
                self._spend[customer_id] = self._spend.get(customer_id, 0) + credits_nano
            if self.journal is not None:
                self.journal.metered(key, credits_nano, count)

    def take(self) -> UsageBatch:
        with self._lock:
            self._sequence += 1
            batch = UsageBatch(self._rows, self._spend, self._sequence)
            self._rows, self._spend = {}, {}
            if self.journal is not None:
                self.journal.taken(self._sequence)
            _fold(self._taken, batch.rows)
        return batch

    def rotate_journal(self, written: int) -> None:
        """Flush `written` and every one before it are in storage: the journal may start
        afresh with only what was metered since (journal.py), if no later flush was taken."""
        with self._lock:
            if self.journal is not None and written == self._sequence:
                self.journal.rotate(written, self._rows)

    def totals(self) -> dict[tuple[int, str, str], list[int]]:
        """Calls and nano-credits metered since the process started, taken or not, by
        (chain, method, scenario): what the metrics show of keyed calls."""
        with self._lock:
            totals = {key: list(counts) for key, counts in self._taken.items()}
            _fold(totals, self._rows)
        return totals

    def pending_requests(self) -> int:
        with self._lock:
            return sum(row[0] for row in self._rows.values())


@dataclass(slots=True)
class CreditView:
    """Balances as this router must see them for the credit check."""

    _stored: dict[int, int] = field(default_factory=dict)  # as storage last reported
    _unwritten: dict[int, int] = field(default_factory=dict)  # charged here, not yet stored
    _reserved: dict[int, int] = field(default_factory=dict)  # held by calls in flight
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def available(self, customer_id: int) -> int:
        with self._lock:
            return (
                self._stored.get(customer_id, 0)
                - self._unwritten.get(customer_id, 0)
                - self._reserved.get(customer_id, 0)
            )

    def hold(self, customer_id: int, amount_nano: int, *, check: bool = True) -> bool:
        """Hold `amount_nano` for a call in flight, so that concurrent calls cannot all spend the
        same credits. With `check`, only if that much is available: False, and nothing held,
        otherwise. Every hold ends with `settle`."""
        with self._lock:
            held = self._reserved.get(customer_id, 0)
            if check and (
                self._stored.get(customer_id, 0) - self._unwritten.get(customer_id, 0) - held
                < amount_nano
            ):
                return False
            if amount_nano:
                self._reserved[customer_id] = held + amount_nano
            return True

    def charge(self, customer_id: int, amount_nano: int, *, check: bool = True) -> bool:
        """Charge `amount_nano` for a call already served and not held for (a repeated forward,
        router/forwards.py): with `check`, only if that much is available; False, and nothing
        charged, otherwise."""
        with self._lock:
            unwritten = self._unwritten.get(customer_id, 0)
            if check and (
                self._stored.get(customer_id, 0) - unwritten - self._reserved.get(customer_id, 0)
                < amount_nano
            ):
                return False
            if amount_nano:
                self._unwritten[customer_id] = unwritten + amount_nano
            return True

    def settle(self, customer_id: int, held_nano: int, charged_nano: int) -> None:
        """A call has ended: release what it held and charge what it cost, in one step."""
        with self._lock:
            if held_nano:
                left = self._reserved[customer_id] - held_nano
                if left:
                    self._reserved[customer_id] = left
                else:
                    del self._reserved[customer_id]
            if charged_nano:
                self._unwritten[customer_id] = self._unwritten.get(customer_id, 0) + charged_nano

    def replace_stored(self, balances: dict[int, int]) -> None:
        """Balances read while nothing of this process was being written."""
        with self._lock:
            self._stored = balances

    def written(self, spend: dict[int, int], balances: dict[int, int]) -> None:
        """`spend` is now in storage, and `balances` were read after writing it."""
        with self._lock:
            for customer_id, amount in spend.items():
                left = self._unwritten.get(customer_id, 0) - amount
                if left:
                    self._unwritten[customer_id] = left
                else:
                    self._unwritten.pop(customer_id, None)
            self._stored = balances


def _fold(totals: dict[tuple[int, str, str], list[int]], rows: dict[UsageKey, list[int]]) -> None:
    for (_, _, chain_id, method, scenario, _, _), (count, credits) in rows.items():
        found = totals.get((chain_id, method, scenario))
        if found is None:
            totals[(chain_id, method, scenario)] = [count, credits]
        else:
            found[0] += count
            found[1] += credits
