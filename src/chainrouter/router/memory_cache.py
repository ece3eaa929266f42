"""The response cache's in-process store: answers by key, in one ring of memory whose size is
set once, so that what the process holds is the bound and not a multiple of it.

Why a ring: kept answers are a few hundred bytes to a few kilobytes, allocated between the
request path's own short-lived objects of the same sizes. Held as separate `bytes`, the C
allocator could not give the holes left by evicted answers back or reuse them well: measured
(docs/benchmarks.md), a dictionary bounded at 64 MiB of answers grew the process by 550 MiB.
Here every answer is copied into an anonymous memory map (pages are taken as they are first
written), and the index is small fixed-size objects.

How it evicts: answers are written one after the other; when the ring is full the writing
starts again at its beginning, over the oldest answers (first in, first out). A hit on an
answer that the writing will reach within the next quarter of the ring copies it to the front
again, so answers in use stay (least recently used first out, near enough). The index holds at
most one entry per `ENTRY_OVERHEAD` bytes of a quarter of the bound, which bounds its own size.
"""

from __future__ import annotations

import mmap
import threading
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

ENTRY_OVERHEAD = 320  # bytes an entry costs outside the ring (key, index and order records)

CacheStat = tuple[int, str]  # (chain, method)


class _Place(NamedTuple):
    offset: int
    length: int
    lap: int  # how many times the writing had wrapped when this was written


class MemoryCache:
    """Answers (the JSON of a `result`) by key, within `max_bytes` in all."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._ring_bytes = max_bytes - max_bytes // 4  # a quarter for the index
        self._max_entries = (max_bytes // 4) // ENTRY_OVERHEAD  # 0: too small to hold any
        self._ring = mmap.mmap(-1, self._ring_bytes) if self._ring_bytes else None
        self._head = 0  # where the next answer is written
        self._lap = 0
        self._index: dict[str, _Place] = {}
        # Every place written, oldest first; one whose key now points elsewhere (or nowhere) is
        # stale and skipped as the writing passes it.
        self._order: deque[tuple[str, _Place]] = deque()
        self._bytes = 0  # live answers' bytes, plus ENTRY_OVERHEAD each
        self._lock = threading.Lock()  # purges and scrapes come from the event loop's thread
        self.hits: dict[CacheStat, int] = {}
        self.misses: dict[CacheStat, int] = {}
        self.evictions: dict[CacheStat, int] = {}
        self.bytes_by: dict[CacheStat, int] = {}

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._index)

    def count(self, stat: CacheStat, hit: bool, times: int = 1) -> None:
        counts = self.hits if hit else self.misses
        counts[stat] = counts.get(stat, 0) + times

    def get(self, key: str) -> bytes | None:
        with self._lock:
            place = self._index.get(key)
            if place is None or self._ring is None:
                return None
            value = self._ring[place.offset : place.offset + place.length]
            if place.lap < self._lap and place.offset - self._head < self._ring_bytes // 4:
                self._write(key, value)  # about to be written over: to the front again
            return value

    def put(self, key: str, value: bytes) -> None:
        with self._lock:
            if len(value) > self._ring_bytes // 2 or not self._max_entries:
                # An answer that would take most of the cache is kept nowhere, and no older
                # one under its key stays either.
                old = self._index.pop(key, None)
                if old is not None:
                    self._forget(key, old)
                return
            self._write(key, value)

    def purge(self, chain_id: int) -> int:
        """Drop every answer of the chain; how many there were. (Their bytes in the ring are
        written over in their turn.)"""
        prefix = f"{chain_id}:"
        with self._lock:
            doomed = [key for key in self._index if key.startswith(prefix)]
            for key in doomed:
                self._forget(key, self._index.pop(key))
        return len(doomed)

    def _write(self, key: str, value: bytes) -> None:
        ring = self._ring
        assert ring is not None
        length = len(value)
        old = self._index.pop(key, None)
        if old is not None:
            self._forget(key, old)
        if self._head + length > self._ring_bytes:  # the rest of the ring is left unused
            self._evict(lambda place: place.lap < self._lap)
            self._lap += 1
            self._head = 0
        start, end = self._head, self._head + length
        self._evict(lambda place: place.lap < self._lap and place.offset < end)
        ring[start:end] = value
        place = _Place(start, length, self._lap)
        self._index[key] = place
        self._order.append((key, place))
        self._head = end
        self._account(key, length + ENTRY_OVERHEAD)
        while len(self._index) > self._max_entries:
            self._evict_oldest()

    def _evict(self, overwritten: Callable[[_Place], bool]) -> None:
        """Drop the oldest places while `overwritten(place)` says the writing reaches them."""
        order = self._order
        while order and overwritten(order[0][1]):
            self._drop(*order.popleft())

    def _evict_oldest(self) -> None:
        while self._order:
            if self._drop(*self._order.popleft()):
                return

    def _drop(self, key: str, place: _Place) -> bool:
        """An old place leaves the ring: an eviction if its key still points at it."""
        if self._index.get(key) != place:
            return False  # stale: rewritten elsewhere, or purged
        del self._index[key]
        self._forget(key, place)
        stat = _stat_of(key)
        self.evictions[stat] = self.evictions.get(stat, 0) + 1
        return True

    def _forget(self, key: str, place: _Place) -> None:
        self._account(key, -(place.length + ENTRY_OVERHEAD))

    def _account(self, key: str, delta: int) -> None:
        self._bytes += delta
        stat = _stat_of(key)
        held = self.bytes_by.get(stat, 0) + delta
        if held:
            self.bytes_by[stat] = held
        else:
            self.bytes_by.pop(stat, None)


def _stat_of(key: str) -> CacheStat:
    """(chain, method) of a key made by `domain.cacheable.cache_key`."""
    chain, _, method, _ = key.split(":", 3)
    return int(chain), method
