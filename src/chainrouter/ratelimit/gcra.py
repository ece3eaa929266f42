"""Rate limits: per node, per plan (requests and credits), per priced method, per free-tier IP.

Every limit is "at most `limit` units per `interval_s` seconds", enforced with GCRA (the generic
cell rate algorithm): one number per bucket, the theoretical arrival time, so memory stays flat
and a full interval's worth may arrive at once but never more. A request that needs several
buckets (node, plan, plan credits, method) takes all of them or none, so a refusal by one limit
never spends another's budget.

`MemoryLimiter` serves one process; `RedisLimiter` (`shared.py`) shares the
same buckets across routers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Bucket:
    key: str  # what is limited, e.g. "node:12" or "ip:203.0.113.7"
    limit: int  # units per interval; > 0
    interval_s: float
    amount: int = 1  # units this request takes (1 call, or its price in nano-credits)

    @property
    def refill_s(self) -> float:
        """The longest a refused request waits until its amount fits again: the refill of that
        amount, at most the whole interval (an amount over the limit never fits)."""
        return min(self.interval_s / self.limit * self.amount, self.interval_s)


class Limiter(Protocol):
    async def acquire(self, buckets: Sequence[Bucket]) -> bool:
        """Take `amount` from every bucket, or from none; True when all had room."""
        ...

    async def admit_or_wait(self, bucket: Bucket) -> float:
        """Take `amount` from `bucket` and return 0.0, or return the seconds until it would fit."""
        ...

    async def close(self) -> None: ...


def _next_arrival(tat: float, now: float, bucket: Bucket) -> float | None:
    """The bucket's new theoretical arrival time if it admits the request, else None."""
    emission = bucket.interval_s / bucket.limit
    new_tat = max(tat, now) + emission * bucket.amount
    # Allow a burst of up to one whole interval's budget, no more.
    return new_tat if new_tat - now <= bucket.interval_s + 1e-9 else None


@dataclass(slots=True)
class MemoryLimiter:
    clock: Callable[[], float] = time.monotonic
    _tat: dict[str, float] = field(default_factory=dict)
    _sweeps: int = 0

    def try_acquire(self, buckets: Sequence[Bucket]) -> bool:
        now = self.clock()
        updates = []
        for bucket in buckets:
            new_tat = _next_arrival(self._tat.get(bucket.key, now), now, bucket)
            if new_tat is None:
                return False
            updates.append((bucket.key, new_tat))
        for key, new_tat in updates:
            self._tat[key] = new_tat
        self._sweeps += 1
        if self._sweeps >= 100_000:
            self.sweep()
        return True

    async def acquire(self, buckets: Sequence[Bucket]) -> bool:
        return self.try_acquire(buckets)

    def try_admit_or_wait(self, bucket: Bucket) -> float:
        now = self.clock()
        tat = max(self._tat.get(bucket.key, now), now)
        new_tat = tat + bucket.interval_s / bucket.limit * bucket.amount
        wait = new_tat - now - bucket.interval_s
        if wait > 1e-9:
            return wait
        self._tat[bucket.key] = new_tat
        return 0.0

    async def admit_or_wait(self, bucket: Bucket) -> float:
        return self.try_admit_or_wait(bucket)

    def sweep(self) -> None:
        """Forget buckets that are full again; keeps per-IP buckets from growing without end."""
        now = self.clock()
        self._tat = {key: tat for key, tat in self._tat.items() if tat > now}
        self._sweeps = 0

    def __len__(self) -> int:
        return len(self._tat)

    async def close(self) -> None:
        return None
