"""Rate limits shared by all routers through Redis: the GCRA of `gcra.py`, run atomically there.

One script call per admission takes all of a call's buckets or none, using Redis's clock so that
routers with skewed clocks agree. Each bucket's key expires once it is full again, so per-IP
buckets of the free tier do not accumulate. (Redis Cluster would need the keys of one call in one
hash slot; a single Redis or a primary with replicas is what this is built for.)

When Redis cannot be reached the router keeps serving: it falls back to its own in-process
limits (each router then enforces every limit on its own) and logs it, at most once a minute.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from redis.asyncio import Redis
from redis.exceptions import RedisError

from chainrouter.ratelimit.gcra import Bucket, MemoryLimiter

log = logging.getLogger(__name__)
_WARN_EVERY_S = 60.0

_PREFIX = "chainrouter:rl:"

# ARGV per bucket: emission interval, burst interval (both microseconds), amount.
_GCRA = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local arrivals = {}
for i = 1, #KEYS do
  local emission = tonumber(ARGV[i * 3 - 2])
  local burst = tonumber(ARGV[i * 3 - 1])
  local amount = tonumber(ARGV[i * 3])
  local tat = tonumber(redis.call('GET', KEYS[i])) or now
  if tat < now then tat = now end
  local next_tat = tat + emission * amount
  if next_tat - now > burst then return 0 end
  arrivals[i] = next_tat
end
for i = 1, #KEYS do
  local ttl_ms = math.ceil((arrivals[i] - now) / 1000) + 1
  redis.call('SET', KEYS[i], string.format('%.17g', arrivals[i]), 'PX', ttl_ms)
end
return 1
"""


# One bucket; returns 0 when admitted, else the microseconds until it would be.
_GCRA_WAIT = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local emission = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local amount = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local next_tat = tat + emission * amount
if next_tat - now > burst then return math.ceil(next_tat - now - burst) end
local ttl_ms = math.ceil((next_tat - now) / 1000) + 1
redis.call('SET', KEYS[1], string.format('%.17g', next_tat), 'PX', ttl_ms)
return 0
"""


class RedisLimiter:
    def __init__(self, url: str) -> None:
        self._redis: Redis = Redis.from_url(url)
        self._script = self._redis.register_script(_GCRA)
        self._wait_script = self._redis.register_script(_GCRA_WAIT)
        self._fallback = MemoryLimiter()
        self._warned_at = float("-inf")

    async def acquire(self, buckets: Sequence[Bucket]) -> bool:
        keys = [_PREFIX + bucket.key for bucket in buckets]
        args: list[float] = []
        for bucket in buckets:
            interval_us = bucket.interval_s * 1_000_000
            args += [interval_us / bucket.limit, interval_us, bucket.amount]
        try:
            return bool(await self._script(keys=keys, args=args))
        except (RedisError, OSError) as exc:
            self._warn(exc)
            return self._fallback.try_acquire(buckets)

    async def admit_or_wait(self, bucket: Bucket) -> float:
        interval_us = bucket.interval_s * 1_000_000
        args = [interval_us / bucket.limit, interval_us, bucket.amount]
        try:
            wait_us = await self._wait_script(keys=[_PREFIX + bucket.key], args=args)
        except (RedisError, OSError) as exc:
            self._warn(exc)
            return self._fallback.try_admit_or_wait(bucket)
        return int(wait_us) / 1_000_000

    def _warn(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning("Redis unavailable, rate limits are per process for now: %s", exc)

    async def close(self) -> None:
        await self._redis.aclose()
