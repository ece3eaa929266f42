"""Cooldown of failing nodes: back off exponentially, recover on the first success.

A node that fails is not offered again until its cooldown ends: 1 s after the first failure, then
2, 4, 8 ... seconds up to a cap while the failures continue. A success clears the record. This is
the in-process implementation; routers that share load share it through Redis instead (same
interface).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Record:
    failures: int
    until: float


@dataclass(slots=True)
class MemoryCooldowns:
    base_s: float = 1.0
    max_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _records: dict[int, _Record] = field(default_factory=dict)

    def available(self, node_id: int) -> bool:
        record = self._records.get(node_id)
        return record is None or self.clock() >= record.until

    def failed(self, node_id: int) -> float:
        """Record a failure; return how long the node now stays out, in seconds."""
        record = self._records.get(node_id)
        failures = 1 if record is None else record.failures + 1
        # The exponent is capped so that a node failing for days cannot overflow the float.
        pause = min(self.base_s * 2.0 ** min(failures - 1, 30), self.max_s)
        self._records[node_id] = _Record(failures, self.clock() + pause)
        return pause

    def succeeded(self, node_id: int) -> None:
        self._records.pop(node_id, None)
