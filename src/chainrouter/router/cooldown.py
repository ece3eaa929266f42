"""Cooldown of failing nodes: back off exponentially, recover on the first success.

A node that fails is not offered again until its cooldown ends: 1 s after the first failure, then
2, 4, 8 ... seconds up to a cap while the failures continue. When the pause ends, one call tries
the node (`take`); the calls after it wait for its outcome, for `base_s` at most: a success clears
the record, a failure pauses the node longer. So a node that is still down costs one call per
pause, not every call that arrives as it ends. Each router process keeps its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chainrouter.router import epochs
from chainrouter.router.epochs import Epochs


@dataclass(slots=True)
class _Record:
    failures: int
    until: float


@dataclass(slots=True)
class MemoryCooldowns:
    base_s: float = 1.0
    max_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    # Raised when a node starts or ends a cooldown: decisions that read it stand no more (the
    # end of a pause by time alone raises nothing; the decisions' age bounds it).
    epoch_store: Epochs = field(default_factory=Epochs)
    _records: dict[int, _Record] = field(default_factory=dict)

    def available(self, node_id: int) -> bool:
        """Whether the node is not cooling down (its pause, if any, has ended)."""
        record = self._records.get(node_id)
        return record is None or self.clock() >= record.until

    def remaining(self, node_id: int) -> float:
        """Seconds until the node may be tried again (0: now)."""
        record = self._records.get(node_id)
        return 0.0 if record is None else max(record.until - self.clock(), 0.0)

    def clean(self, node_id: int) -> bool:
        """Whether the node has no failure on record (none since its last success)."""
        return node_id not in self._records

    def take(self, node_id: int) -> bool:
        """Whether a call may try the node now; the first call after a pause is its trial, and
        the node stays out for the others until the trial's outcome, `base_s` at most."""
        record = self._records.get(node_id)
        if record is None:
            return True
        now = self.clock()
        if now < record.until:
            return False
        record.until = now + self.base_s
        return True

    def failed(self, node_id: int) -> float:
        """Record a failure; return how long the node now stays out, in seconds."""
        record = self._records.get(node_id)
        failures = 1 if record is None else record.failures + 1
        # The exponent is capped so that a node failing for days cannot overflow the float.
        pause = min(self.base_s * 2.0 ** min(failures - 1, 30), self.max_s)
        self._records[node_id] = _Record(failures, self.clock() + pause)
        self.epoch_store.bump(epochs.node(node_id))
        return pause

    def succeeded(self, node_id: int) -> None:
        if self._records.pop(node_id, None) is not None:
            self.epoch_store.bump(epochs.node(node_id))
