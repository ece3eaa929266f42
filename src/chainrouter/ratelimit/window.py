"""Rate limits: per node, per plan (requests and credits), per priced method, per API key, per
free-tier IP.

Every limit is "at most `limit` units in any window of `interval_s` seconds", as a provider that
counts in fixed or sliding windows reads it. Each bucket keeps its admissions in `SLOTS` + 1 time
slots of `interval_s / SLOTS` and admits a request when the slots still inside the window, plus
the request, hold at most `limit`. Counting whole slots reaches up to one slot further back than
the window, never less, so the bound holds for every window, wherever it starts; the price is
the rate of a caller that never stops, which gets `SLOTS / (SLOTS + 1)` (91 %) of `limit` per
interval. The whole `limit` may arrive at once. (The GCRA used before admitted up to twice
`limit` in one window: a full burst, then the refill.)

A request that needs several buckets (node, plan, plan credits, method) takes all of them or
none, so a refusal by one limit never spends another's budget. A refusal says how long until
every refusing bucket would have room for it. Units may be given back (a negative amount, as
an attempt that got no answer gives back its price to the plan's credits): to the slot they
were taken in.

`MemoryLimiter` serves one process; `RedisLimiter` (`shared.py`) shares the same buckets across
routers.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

SLOTS = 10  # per interval: a steady caller gets 10/11 of the limit; memory is 11 counts a bucket


@dataclass(frozen=True, slots=True)
class Bucket:
    key: str  # what is limited, e.g. "node:12" or "ip:203.0.113.7"
    limit: int  # units per interval; > 0
    interval_s: float
    amount: int = 1  # units this request takes (1 call, or its price in nano-credits)
    # A negative amount gives back units taken this many seconds ago: to the slot they were
    # taken in, at most what it holds, and nothing once it has left the window (given back
    # anywhere else, they would cancel other requests' units, or outlive their own).
    taken_s_ago: float = 0.0

    @property
    def slot_s(self) -> float:
        return self.interval_s / SLOTS


class Limiter(Protocol):
    async def acquire(self, buckets: Sequence[Bucket]) -> float:
        """Take `amount` from every bucket, or from none. 0.0 when all had room; else the
        seconds until each refusing bucket would have room for it (the longest of them)."""
        ...

    async def close(self) -> None: ...


class _Window:
    """One bucket's admissions: (slot number, units) oldest first, and their sum."""

    __slots__ = ("slot_s", "slots", "total")

    def __init__(self, slot_s: float) -> None:
        self.slot_s = slot_s
        self.slots: deque[list[int]] = deque()
        self.total = 0

    def forget_before(self, oldest: int) -> None:
        slots = self.slots
        while slots and slots[0][0] < oldest:
            self.total -= slots.popleft()[1]

    def add(self, slot: int, amount: int) -> None:
        slots = self.slots
        if slots and slots[-1][0] == slot:
            slots[-1][1] += amount
        else:
            slots.append([slot, amount])
        self.total += amount

    def give_back(self, slot: int, amount: int) -> int:
        """Take `amount` units out of `slot`, at most what it holds; none if it is gone. The
        units taken out."""
        for held in reversed(self.slots):
            if held[0] == slot:
                back = min(amount, held[1])
                held[1] -= back
                self.total -= back
                return back
            if held[0] < slot:
                return 0
        return 0

    def wait_s(self, bucket: Bucket, now: float) -> float:
        """Seconds until `bucket.amount` fits, with no other admission meanwhile: the oldest
        slots leave the window one by one. An amount over the limit never fits: the interval."""
        excess = self.total + bucket.amount - bucket.limit
        if bucket.amount > bucket.limit:
            return bucket.interval_s
        for slot, units in self.slots:
            excess -= units
            if excess <= 0:
                # A microsecond past the slot's end: a caller that waits exactly this long
                # finds the slot gone despite rounding.
                return max((slot + SLOTS + 1) * self.slot_s - now, 0.0) + 1e-6
        return bucket.interval_s  # not reached: the slots hold the whole excess


@dataclass(slots=True)
class MemoryLimiter:
    clock: Callable[[], float] = time.monotonic
    _windows: dict[str, _Window] = field(default_factory=dict)
    _admissions: int = 0

    def try_acquire(self, buckets: Sequence[Bucket]) -> float:
        now = self.clock()
        windows = self._windows
        wait = 0.0
        found = []
        for bucket in buckets:
            window = windows.get(bucket.key)
            if window is None or window.slot_s != bucket.slot_s:  # new, or its interval changed
                window = _Window(bucket.slot_s)  # kept only if the request is admitted
            slot = math.floor(now / window.slot_s)
            window.forget_before(slot - SLOTS)
            if window.total + bucket.amount > bucket.limit:
                wait = max(wait, window.wait_s(bucket, now))
            found.append((window, slot))
        if wait > 0:
            # Nothing kept for a refusal: refusals are not admissions, which alone lead to a
            # sweep, so windows made for them (a refused client from ever new addresses) would
            # pile up.
            return float(wait)  # a float, always: the native driver tells it from a future so
        for bucket, (window, slot) in zip(buckets, found, strict=True):
            windows[bucket.key] = window
            if bucket.amount >= 0:
                window.add(slot, bucket.amount)
            else:
                taken = math.floor((now - bucket.taken_s_ago) / window.slot_s)
                window.give_back(taken, -bucket.amount)
        self._admissions += 1
        if self._admissions >= 100_000:
            self.sweep()
        return 0.0

    async def acquire(self, buckets: Sequence[Bucket]) -> float:
        return self.try_acquire(buckets)

    def give_back_held(self, buckets: Sequence[Bucket]) -> list[Bucket]:
        """For give-backs (negative amounts): give back what this limiter holds of them, each to
        the slot it was taken in; the rest of each, to be given back where it was taken."""
        now = self.clock()
        rest = []
        for bucket in buckets:
            back = 0
            window = self._windows.get(bucket.key)
            if window is not None and window.slot_s == bucket.slot_s:
                window.forget_before(math.floor(now / window.slot_s) - SLOTS)
                taken = math.floor((now - bucket.taken_s_ago) / window.slot_s)
                back = window.give_back(taken, -bucket.amount)
            if back < -bucket.amount:
                rest.append(replace(bucket, amount=bucket.amount + back))
        return rest

    def sweep(self) -> None:
        """Forget buckets with nothing left in their window; keeps per-IP buckets from growing
        without end."""
        now = self.clock()
        kept = {}
        for key, window in self._windows.items():
            window.forget_before(math.floor(now / window.slot_s) - SLOTS)
            if window.slots:
                kept[key] = window
        self._windows = kept
        self._admissions = 0

    def __len__(self) -> int:
        return len(self._windows)

    async def close(self) -> None:
        return None
