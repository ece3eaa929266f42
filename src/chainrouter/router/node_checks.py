"""What audits and proofs found of each node, counted for storage (docs/integrity.md, "What is
visible where"): audits passed and failed (router/audits.py), answers a proof held and answers
it refuted (router/stages/attempt.py).

The request path only adds to a dict in memory (`add`: a lock and an increment, no I/O); the
router's periodic flush (router/sync.py) takes what was added (`take`) and adds it to the node's
totals in storage, `n = n + d`, so that every worker of every router adds to the same totals.
A flush that fails puts what it took back (`put_back`) for the next. What is counted but not yet
flushed when a router dies is lost: at most one flush interval of counts, never money (the
disputes and refunds a failed audit causes go through the usage journal, router/cordon.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from enum import Enum
from typing import Any

from chainrouter.domain.records import NodeChecksWrite


class NodeCheck(Enum):
    AUDIT_PASSED = "audits_passed"  # a referee agreed, or the node was in the majority
    AUDIT_FAILED = "audits_failed"  # outvoted (and cordoned)
    PROOF_CHECKED = "proofs_checked"  # its answer was proven (`X-Verified: proof`)
    PROOF_FAILED = "proofs_failed"  # a proof refuted its answer, another provider's held


LAST_AT = {
    NodeCheck.AUDIT_PASSED: "last_audit_passed_at",
    NodeCheck.AUDIT_FAILED: "last_audit_failed_at",
    NodeCheck.PROOF_CHECKED: "last_proof_checked_at",
    NodeCheck.PROOF_FAILED: "last_proof_failed_at",
}


class NodeChecks:
    """The counts since the last flush: (node, check) -> [count, when last], at most four
    entries per node the router knows. Any thread may `add` (the native server books on its
    own); `take` runs on the flush's."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, NodeCheck], list[float]] = {}

    def add(self, node_id: int, check: NodeCheck) -> None:
        at = self._now()
        with self._lock:
            counted = self._counts.get((node_id, check))
            if counted is None:
                self._counts[(node_id, check)] = [1, at]
            else:
                counted[0] += 1
                counted[1] = at

    def take(self) -> list[NodeChecksWrite]:
        """What was added since the last `take`, one write per node, by node."""
        with self._lock:
            counts, self._counts = self._counts, {}
        writes: dict[int, NodeChecksWrite] = {}
        for (node_id, check), (count, at) in counts.items():
            fields: dict[str, Any] = {check.value: int(count), LAST_AT[check]: at}
            writes[node_id] = replace(writes.get(node_id) or NodeChecksWrite(node_id), **fields)
        return [writes[node_id] for node_id in sorted(writes)]

    def put_back(self, writes: Iterable[NodeChecksWrite]) -> None:
        """Writes storage did not take: added to what came since, for the next flush."""
        with self._lock:
            for write in writes:
                for check, last in LAST_AT.items():
                    count = getattr(write, check.value)
                    if not count:
                        continue
                    at = getattr(write, last)
                    counted = self._counts.get((write.node_id, check))
                    if counted is None:
                        self._counts[(write.node_id, check)] = [count, at]
                    else:
                        counted[0] += count
                        counted[1] = max(counted[1], at)

    def pending(self) -> int:
        """Checks counted and not yet taken."""
        with self._lock:
            return int(sum(count for count, _ in self._counts.values()))
