"""The response cache's storage: answers that can no longer change (`domain/cacheable.py` says
which), by key, in process and, when routers share a Redis, there too.

In process (`memory_cache.py`): bounded in bytes, least recently used first out, near enough.
In Redis: answers up to `REDIS_MAX_VALUE_BYTES`, kept for `redis_ttl_s` and within a budget of
`redis_max_bytes` that the routers keep together, oldest answers out first (below); looked up
only when the process has no copy, within `redis_timeout_s`.
Redis slow, away or answering garbage is a miss, never an error: the call is served by a node as
if nothing were cached. After a failure or a time-out Redis is left alone for `REDIS_REST_S` (the
calls meanwhile do not wait on it), and the failure is logged at most once a minute.

The budget holds whatever Redis the answers share, the limits' one included: one script call per
write (`_KEEP`) stores the answer, records it in an index by when it was written (a sorted set,
with what it counts in a hash and the sum in a counter) and deletes the oldest answers until the
sum is within the budget, atomically, so that routers writing at once keep it together. It only
ever deletes answers it indexed: nothing else in that Redis (rate limits, heads, epochs) can be
evicted by it. An answer counts its bytes, its key's three times (the answer, the index, the
hash) and `ENTRY_OVERHEAD_BYTES`; one that expired (its TTL) or was deleted by other means is
counted until the index reaches it, so the answers in Redis are at most the budget, never more.

The chains' finality epochs (router/finality.py), part of every key, are shared in Redis as well
(router/shared_epochs.py): until this process has read them once, it neither reads nor writes
answers there, since an epoch it does not know of may have made some of them stale.

An entry is the answer's `result` as JSON, after one byte saying how the answer was verified
before it was kept (router/proving.py): 0x01 a proof, 0x02 two providers' agreement; an entry
without the byte (kept under `verify = off`, or by a router before the byte existed, whose
entries in Redis stay readable) was not verified. JSON text never begins with either byte. A
router before the byte reads a marked entry from Redis as garbage: a miss, never an answer.

The pipeline runs on the executor's thread (the native server's, or the event loop's); Redis is
reached on the event loop: a look-up there is a `concurrent.futures.Future` the pipeline awaits
with `Join`, and a write is handed to the loop and not waited for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Awaitable
from typing import Any

from redis.asyncio import Redis

from chainrouter.domain.verification import Verified
from chainrouter.router import epochs
from chainrouter.router.epochs import Epochs
from chainrouter.router.memory_cache import CacheStat, MemoryCache

log = logging.getLogger(__name__)

_WARN_EVERY_S = 60.0
_REDIS_PREFIX = "chainrouter:cache:"
_MAX_PENDING_WRITES = 1000  # writes to Redis not yet done; beyond it, new ones are skipped
REDIS_REST_S = 5.0  # after Redis failed or was slow, left alone this long
# Larger answers (up to 32 MiB) stay in process: writing one took Redis longer than the time-out,
# and that failure left Redis unused by every call for `REDIS_REST_S`.
REDIS_MAX_VALUE_BYTES = 1 << 20
EPOCHS_KEY = "chainrouter:cache-epochs"  # chain -> finality epoch; outside the answers' prefix
# Raise a chain's shared epoch to ARGV[2] at least and, with ARGV[3] 1, past what it was (a
# regress: an epoch the others have not kept answers under in Redis); its value after. Atomic:
# two routers that raise it at once both move it on.
_RAISE_EPOCH = """
local was = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') or 0
local now = math.max(was + tonumber(ARGV[3]), tonumber(ARGV[2]))
if now ~= was then redis.call('HSET', KEYS[1], ARGV[1], now) end
return now
"""


_MARKS = {Verified.PROOF: b"\x01", Verified.AGREEMENT: b"\x02"}
_MARKED = {mark[0]: verified for verified, mark in _MARKS.items()}


def entry(result: bytes, verified: Verified | None) -> bytes:
    """What the cache keeps of an answer: its `result`'s JSON, marked with how it was verified."""
    return result if verified is None else _MARKS[verified] + result


def read_entry(stored: bytes) -> tuple[bytes, Verified | None]:
    """A kept entry's `result` JSON, and how it was verified (None: it was not)."""
    verified = _MARKED.get(stored[0]) if stored else None
    return (stored, None) if verified is None else (stored[1:], verified)


INDEX_KEY = "chainrouter:cache-index"  # sorted set: answer key -> when written (µs, Redis's clock)
SIZES_KEY = "chainrouter:cache-sizes"  # hash: answer key -> bytes it counts
TOTAL_KEY = "chainrouter:cache-bytes"  # the sum of SIZES_KEY's values
ENTRY_OVERHEAD_BYTES = 100  # what Redis keeps besides an answer's key and bytes, about
EVICT_MAX = 1000  # answers one write may delete; past it, the answer is not kept
# KEYS: the answer, INDEX_KEY, SIZES_KEY, TOTAL_KEY. ARGV: the answer, its TTL (s), the budget,
# what it counts, EVICT_MAX. Keeps the answer unless it alone passes the budget, or making room
# for it would take more than EVICT_MAX deletions; returns how many answers it deleted, or -1
# when it did not keep it.
_KEEP = """
local budget, size, most = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if size > budget then return -1 end
local total = tonumber(redis.call('GET', KEYS[4]) or '0') or 0
local was = tonumber(redis.call('HGET', KEYS[3], KEYS[1]) or '0') or 0
total = total - was
local evicted = 0
while total + size > budget do
  if evicted >= most then
    redis.call('SET', KEYS[4], total + was)
    return -1
  end
  local oldest = redis.call('ZPOPMIN', KEYS[2])
  if #oldest == 0 then
    total = 0  -- no answer indexed: what the counter held was stale
    break
  end
  local key = oldest[1]
  if key == KEYS[1] then
    was = 0  -- this answer's older copy: counted out above, and written again below
  else
    total = total - (tonumber(redis.call('HGET', KEYS[3], key) or '0') or 0)
    evicted = evicted + 1
  end
  redis.call('UNLINK', key)
  redis.call('HDEL', KEYS[3], key)
end
local t = redis.call('TIME')
redis.call('SET', KEYS[1], ARGV[1], 'EX', tonumber(ARGV[2]))
redis.call('ZADD', KEYS[2], tonumber(t[1]) * 1000000 + tonumber(t[2]), KEYS[1])
redis.call('HSET', KEYS[3], KEYS[1], size)
redis.call('SET', KEYS[4], total + size)
return evicted
"""
# KEYS: INDEX_KEY, SIZES_KEY, TOTAL_KEY, then the answers to delete; they stop counting.
_FORGET = """
local total = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
for i = 4, #KEYS do
  total = total - (tonumber(redis.call('HGET', KEYS[2], KEYS[i]) or '0') or 0)
  redis.call('HDEL', KEYS[2], KEYS[i])
  redis.call('ZREM', KEYS[1], KEYS[i])
  redis.call('UNLINK', KEYS[i])
end
redis.call('SET', KEYS[3], math.max(total, 0))
return #KEYS - 3
"""


def counted_bytes(key: str, value: bytes) -> int:
    """What an answer counts against the Redis budget: its bytes, its full key's three times
    (the answer, the index, the sizes), and what Redis keeps besides."""
    return len(value) + 3 * (len(_REDIS_PREFIX) + len(key.encode())) + ENTRY_OVERHEAD_BYTES


class RedisTier:
    """The answers shared by routers through Redis."""

    def __init__(self, redis: Redis, *, timeout_s: float, ttl_s: int, max_bytes: int) -> None:
        self._redis = redis
        self._timeout_s = timeout_s
        self._ttl_s = ttl_s
        self._max_bytes = max_bytes
        self._keep = redis.register_script(_KEEP)
        self._forget = redis.register_script(_FORGET)
        self.evicted = 0  # answers this router's writes deleted for room
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending = 0
        self._pending_lock = threading.Lock()  # up on the server's thread, down on the loop's
        self._warned_at = -_WARN_EVERY_S
        self._rest_until = 0.0  # monotonic: Redis is not asked before then
        self.failures = 0
        # Set once the shared finality epochs were read (router/shared_epochs.py): answers are
        # neither read nor written before.
        self.epochs_known = False

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop Redis is reached on (the router's)."""
        self._loop = loop

    def lookup(self, key: str) -> concurrent.futures.Future[bytes | None] | None:
        """A future of the answer under `key` (None when Redis has none, is slow or away);
        None when no loop is bound yet."""
        loop = self._asking() if self.epochs_known else None
        if loop is None:
            return None
        return asyncio.run_coroutine_threadsafe(self._get(key), loop)

    def store(self, key: str, value: bytes) -> None:
        loop = self._loop
        if not self.epochs_known:
            return
        if loop is None or loop.is_closed() or self._pending >= _MAX_PENDING_WRITES:
            return
        if len(value) > REDIS_MAX_VALUE_BYTES:
            return
        if time.monotonic() < self._rest_until:
            return
        with self._pending_lock:
            self._pending += 1
        asyncio.run_coroutine_threadsafe(self._set(key, value), loop)

    def drop_chain(self, chain_id: int) -> None:
        """Delete the chain's answers from Redis, in the background: after a purge or a finality
        regress, so that no router (one started later included) reads them again."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._drop_chain(chain_id), loop)

    def read_epochs(self) -> concurrent.futures.Future[dict[int, int] | None] | None:
        """A future of the shared finality epochs, chain -> epoch (None: Redis failed, or
        answered something else); None when Redis is not asked now."""
        loop = self._asking()
        if loop is None:
            return None
        return asyncio.run_coroutine_threadsafe(self.epochs(), loop)

    def raise_epoch(
        self, chain_id: int, floor: int, *, past: bool
    ) -> concurrent.futures.Future[int | None] | None:
        """A future of the chain's shared epoch once raised to `floor` at least and, `past`,
        beyond what it was (None: Redis failed); None when Redis is not asked now."""
        loop = self._asking()
        if loop is None:
            return None
        return asyncio.run_coroutine_threadsafe(self._raise(chain_id, floor, past), loop)

    async def close(self) -> None:
        await self._redis.aclose()

    def _asking(self) -> asyncio.AbstractEventLoop | None:
        """The loop to ask Redis on, unless none is bound yet or Redis is resting."""
        loop = self._loop
        if loop is None or loop.is_closed() or time.monotonic() < self._rest_until:
            return None
        return loop

    async def epochs(self) -> dict[int, int] | None:
        """The shared finality epochs, read on this loop (`read_epochs` from another thread)."""
        found = await self._guarded(self._redis.hgetall(EPOCHS_KEY))  # type: ignore[arg-type]
        if not isinstance(found, dict):
            return None
        epochs: dict[int, int] = {}
        for chain, epoch in found.items():
            try:
                epochs[int(chain)] = int(epoch)
            except ValueError:  # not a router's: the next raise of that chain writes over it
                now = time.monotonic()
                if now - self._warned_at >= _WARN_EVERY_S:
                    self._warned_at = now
                    log.warning(
                        "response cache: %s holds %r: %r, not an epoch", EPOCHS_KEY, chain, epoch
                    )
        return epochs

    async def _raise(self, chain_id: int, floor: int, past: bool) -> int | None:
        command = self._redis.eval(_RAISE_EPOCH, 1, EPOCHS_KEY, chain_id, floor, int(past))
        raised = await self._guarded(command)  # type: ignore[arg-type]
        return raised if isinstance(raised, int) else None

    async def _drop_chain(self, chain_id: int) -> None:
        try:
            batch: list[bytes] = []
            async for key in self._redis.scan_iter(match=f"{_REDIS_PREFIX}{chain_id}:*", count=500):
                batch.append(key)
                if len(batch) >= 500:
                    await self._forget(keys=[INDEX_KEY, SIZES_KEY, TOTAL_KEY, *batch])
                    batch = []
            if batch:
                await self._forget(keys=[INDEX_KEY, SIZES_KEY, TOTAL_KEY, *batch])
        except Exception as exc:  # the keys then expire with their TTL
            log.warning(
                "response cache: could not delete chain %d's answers in Redis (%s)", chain_id, exc
            )

    async def _get(self, key: str) -> bytes | None:
        value = await self._guarded(self._redis.get(_REDIS_PREFIX + key))
        return value if isinstance(value, bytes) else None

    async def _set(self, key: str, value: bytes) -> None:
        try:
            keys = [_REDIS_PREFIX + key, INDEX_KEY, SIZES_KEY, TOTAL_KEY]
            size = counted_bytes(key, value)
            args: list[bytes | int] = [value, self._ttl_s, self._max_bytes, size, EVICT_MAX]
            evicted = await self._guarded(self._keep(keys=keys, args=args))
            if isinstance(evicted, int) and evicted > 0:
                self.evicted += evicted
        finally:
            with self._pending_lock:
                self._pending -= 1

    async def _guarded(self, command: Awaitable[Any]) -> Any:
        try:
            async with asyncio.timeout(self._timeout_s):
                return await command
        except Exception as exc:  # any Redis trouble is a miss, never an error
            self.failures += 1
            now = time.monotonic()
            # One call paid the time-out: the next ones go without Redis for a while, so that a
            # Redis that hangs costs a call its time-out every few seconds, not every call.
            self._rest_until = now + REDIS_REST_S
            if now - self._warned_at >= _WARN_EVERY_S:
                self._warned_at = now
                log.warning("response cache: Redis unavailable, serving without it (%s)", exc)
            return None


class ResponseCache:
    """The two tiers as the pipeline sees them."""

    def __init__(
        self, memory: MemoryCache, redis: RedisTier | None = None, epoch_store: Epochs | None = None
    ) -> None:
        self.memory = memory
        self.redis = redis
        # Raised at every purge: decisions that read the chain's cache stand no more.
        self._epochs = epoch_store if epoch_store is not None else Epochs()

    def lookup(
        self, key: str, *, shared: bool = True
    ) -> bytes | concurrent.futures.Future[bytes | None] | None:
        """The answer in process; else (unless `shared` is False) a future of Redis's (None:
        Redis is not used)."""
        found = self.memory.get(key)
        if found is not None or self.redis is None or not shared:
            return found
        return self.redis.lookup(key)

    def keep(self, key: str, value: bytes, *, shared: bool = True) -> None:
        """Keep `value` in process and (unless it came from there: `shared` False) in Redis."""
        self.memory.put(key, value)
        if shared and self.redis is not None:
            self.redis.store(key, value)

    def purge(self, chain_id: int) -> int:
        """Drop the chain's answers held in process, and have Redis's deleted (the chain's purge
        generation and finality epoch, in every key, already keep them from being read here)."""
        if self.redis is not None:
            self.redis.drop_chain(chain_id)
        return self.forget(chain_id)

    def forget(self, chain_id: int) -> int:
        """Drop the chain's answers held in process only (another router's regress: it has
        Redis's deleted). How many."""
        dropped = self.memory.purge(chain_id)
        self._epochs.bump(epochs.chain_cache(chain_id))
        return dropped


def redis_tier(
    url: str | None, *, timeout_s: float, ttl_s: int, max_bytes: int
) -> RedisTier | None:
    if not url:
        return None
    client = Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    return RedisTier(client, timeout_s=timeout_s, ttl_s=ttl_s, max_bytes=max_bytes)


def cache_counts(
    cache: ResponseCache | None,
    coalesced: dict[CacheStat, int] | None,
    replayed: dict[CacheStat, int] | None = None,
) -> dict[tuple[str, int, str], int]:
    """The cache's counts for the metrics: (series, chain, method) -> n."""
    counts: dict[tuple[str, int, str], int] = {}
    series: list[tuple[str, dict[CacheStat, int]]] = []
    if cache is not None:
        memory = cache.memory
        series += [
            ("hits", memory.hits),
            ("misses", memory.misses),
            ("evictions", memory.evictions),
            ("bytes", memory.bytes_by),
        ]
    if coalesced is not None:
        series.append(("coalesced", coalesced))
    if replayed is not None:
        series.append(("replayed", replayed))
    for name, by_stat in series:
        for (chain_id, method), n in list(by_stat.items()):
            counts[(name, chain_id, method)] = n
    return counts
