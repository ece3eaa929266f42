"""When a router process's feeds may dial each WebSocket node (docs/websocket.md): at most once
per `interval_s`, however many feeds want it and however often subscribers come and go, and
after failed dials less and less often, so that a node that refuses or drops connections is not
dialled in a tight loop by the subscribers arriving.

After n failures in a row the node rests interval_s x 2^n (at most `backoff_max_s`) from the
last dial or failure, whichever is later, and feeds pass it over for the chain's other nodes
meanwhile. A failure is a dial refused, or a connection that failed before it had lasted
`backoff_max_s` (a node that accepts and drops, again and again, flaps: its rests grow all the
same); one that lasted that long counts as the node having been well, and its failure starts
the count again. A feed stopped because nobody wants it is no failure. Sans-IO: the clock is
given (`time.monotonic` by default). The health checks dial on their own interval, not here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

_MOST_DOUBLINGS = 30  # 2^30 intervals is past any cap: the exponent need not grow further


@dataclass(frozen=True, slots=True)
class DialPolicy:
    interval_s: float = 1.0  # least time between two dials of one node
    backoff_max_s: float = 60.0  # longest rest after failures


class DialPacer:
    def __init__(
        self, policy: DialPolicy | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.policy = policy if policy is not None else DialPolicy()
        self._clock = clock
        self._since: dict[int, float] = {}  # node -> its last dial or failure
        self._failures: dict[int, int] = {}  # node -> failures in a row

    def wait_s(self, node_id: int) -> float:
        """How long before the node may be dialled (0: now)."""
        since = self._since.get(node_id)
        if since is None:
            return 0.0
        return max(0.0, since + self._rest_s(node_id) - self._clock())

    def resting(self, node_id: int) -> bool:
        """Whether the node rests after failures (a feed passes it over for the next); a node
        merely dialled within the interval is not: a feed waits for it."""
        return node_id in self._failures and self.wait_s(node_id) > 0

    def dialling(self, node_id: int) -> None:
        self._since[node_id] = self._clock()

    def ended(self, node_id: int, up_s: float | None, *, failed: bool) -> None:
        """A feed left the node after `up_s` seconds subscribed there (None: it never was),
        because the node failed or (`failed` False) because nobody wants the feed any more."""
        if up_s is not None and up_s >= self.policy.backoff_max_s:
            self._failures.pop(node_id, None)
        if failed:
            self._since[node_id] = self._clock()
            self._failures[node_id] = min(self._failures.get(node_id, 0) + 1, _MOST_DOUBLINGS)

    def _rest_s(self, node_id: int) -> float:
        interval = self.policy.interval_s
        failures = self._failures.get(node_id, 0)
        if not failures:
            return interval
        backoff: float = interval * 2**failures
        return max(interval, min(backoff, self.policy.backoff_max_s))
