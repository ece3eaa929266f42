"""The newest block each key has seen on each chain, so that its next reads of the head do not
go back in time (design notes, "Tail latency and consistency"; docs/router.md).

A key sees a block when an `eth_blockNumber` answer it was served names it. The map is bounded:
past `max_entries` the entry written longest ago is forgotten (that key then starts afresh).
Kept per router process; with a limits' Redis the routers share what their keys saw
(router/shared_heads.py), so that a client whose calls a load balancer spreads over several
routers is kept consistent across them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

from chainrouter.domain.routing import NodeInfo
from chainrouter.router import epochs
from chainrouter.router.health import HealthMonitor

MAX_ENTRIES = 100_000


class SeenHeads:
    def __init__(self, health: HealthMonitor, max_entries: int = MAX_ENTRIES) -> None:
        self._health = health
        self._max_entries = max_entries
        self._seen: dict[tuple[int, int], int] = {}  # (key id, chain id) -> block
        self._lock = threading.Lock()
        # Told of each raise seen here (key id, chain id, block), for the other routers.
        self.share: Callable[[int, int, int], None] | None = None

    def seen(self, key_id: int, chain_id: int) -> int | None:
        return self._seen.get((key_id, chain_id))

    def saw(self, key_id: int, chain_id: int, block: int, node: NodeInfo | None) -> None:
        """`key_id` was served `block` as the head by `node` (that node is at `block` at least),
        or by an identical call in flight (None)."""
        if node is not None:
            self._health.observe_head(node, block)
        entry = (key_id, chain_id)
        with self._lock:
            previous = self._seen.pop(entry, None)  # re-inserted last: the newest written
            self._seen[entry] = block if previous is None else max(previous, block)
        if previous is None or block > previous:  # what the key's decisions read moved on
            self._moved(key_id)
            share = self.share
            if share is not None:
                share(key_id, chain_id, block)

    def adopt(self, key_id: int, chain_id: int, block: int) -> bool:
        """Another router served `key_id` `block` as the head: raise what it has seen here to
        it (never lower it). Whether that raised it."""
        entry = (key_id, chain_id)
        with self._lock:
            previous = self._seen.get(entry)
            if previous is not None and previous >= block:
                return False
            self._seen.pop(entry, None)
            self._seen[entry] = block
        self._moved(key_id)
        return True

    def _moved(self, key_id: int) -> None:
        self._health.epochs.bump(epochs.seen(key_id))
        if len(self._seen) > self._max_entries:
            with self._lock, contextlib.suppress(StopIteration, KeyError):
                del self._seen[next(iter(self._seen))]

    def __len__(self) -> int:
        return len(self._seen)
