"""Rate limits shared by all routers through Redis: the sliding window of `window.py`, run
atomically there.

One script call per admission takes all of a call's buckets or none, using Redis's clock so that
routers with skewed clocks agree. A bucket is a hash of slot number -> units; slots that left the
window are deleted as the bucket is read, and the key expires once its newest slot has left too,
so per-IP buckets of the free tier do not accumulate. (Redis Cluster would need the keys of one
call in one hash slot; a single Redis or a primary with replicas is what this is built for.)

When Redis cannot be reached, fails or is slow the router keeps serving: it falls back to its
own in-process limits and logs it, at most once a minute. Each process then takes its share of
every limit, so that together they still admit no more than the limit: each one names itself in
Redis (`MEMBERS_KEY`, one set per role: the routers' buckets are theirs, the API's its own)
every `BEAT_S` while Redis answers, and counts the processes that did in the last
`MEMBER_TTL_S`; away from Redis, it enforces `limit // processes` (at least 1) of each
bucket. A process that never reached Redis counts itself alone.

Redis gets `timeout_s` a call, connecting and waiting for one of the pool's
`MAX_CONNECTIONS` included: a Redis that hangs must not hold requests, nor gather a connection
for each of them. After a failure Redis is left alone for `REST_S`, so that a hung Redis costs
one call its time-out every `REST_S`, not every call.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import replace

from redis.asyncio import BlockingConnectionPool, Redis
from redis.exceptions import RedisError

from chainrouter.ratelimit.window import SLOTS, Bucket, MemoryLimiter

log = logging.getLogger(__name__)
_WARN_EVERY_S = 60.0
REST_S = 1.0  # after Redis failed or was slow, limits are per process this long
MAX_CONNECTIONS = 32  # per process; calls beyond them wait for one, within the time-out

_PREFIX = "chainrouter:rl:"
MEMBERS_KEY = "chainrouter:rl-members"  # + ":role", sorted set: process -> when it said so
BEAT_S = 5.0  # a process names itself this often, within a call that goes to Redis anyway
MEMBER_TTL_S = 15  # one not heard of for this long no longer counts

# KEYS[1]: the members' set. ARGV: this process's name, how long a name counts (seconds).
# Returns how many processes named themselves within that time, this one included.
_BEAT = """
local now = tonumber(redis.call('TIME')[1])
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('EXPIRE', KEYS[1], ttl * 2)
return redis.call('ZCARD', KEYS[1])
"""

# ARGV: slots per interval, then per bucket: slot width (microseconds), limit, amount, and for a
# negative amount (units given back) how long ago they were taken (microseconds): they go back
# to that slot, at most what it holds, and not at all once it has left the window.
# Returns 0 when every bucket took its amount, else the microseconds until each refusing
# bucket would have room (the longest).
_WINDOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local slots = tonumber(ARGV[1])
local current, totals = {}, {}
local wait = 0
for i = 1, #KEYS do
  local width = tonumber(ARGV[i * 4 - 2])
  local limit = tonumber(ARGV[i * 4 - 1])
  local amount = tonumber(ARGV[i * 4])
  local slot = math.floor(now / width)
  local raw = redis.call('HGETALL', KEYS[i])
  local kept = {}
  local total = 0
  for j = 1, #raw, 2 do
    local s = tonumber(raw[j])
    if s < slot - slots then
      redis.call('HDEL', KEYS[i], raw[j])
    else
      total = total + tonumber(raw[j + 1])
      kept[#kept + 1] = {s, tonumber(raw[j + 1])}
    end
  end
  current[i], totals[i] = slot, total
  if total + amount > limit then
    local w = width * slots
    if amount <= limit then
      table.sort(kept, function(a, b) return a[1] < b[1] end)
      local excess = total + amount - limit
      for _, held in ipairs(kept) do
        excess = excess - held[2]
        if excess <= 0 then
          w = (held[1] + slots + 1) * width - now
          break
        end
      end
    end
    if w > wait then wait = w end
  end
end
if wait > 0 then return math.max(1, math.ceil(wait)) end
for i = 1, #KEYS do
  local width = tonumber(ARGV[i * 4 - 2])
  local amount = tonumber(ARGV[i * 4])
  if amount >= 0 then
    redis.call('HINCRBY', KEYS[i], string.format('%d', current[i]), string.format('%d', amount))
    redis.call('PEXPIREAT', KEYS[i], math.ceil((current[i] + slots + 1) * width / 1000) + 1)
  else
    local taken = math.floor((now - tonumber(ARGV[i * 4 + 1])) / width)
    local field = string.format('%d', taken)
    local held = tonumber(redis.call('HGET', KEYS[i], field) or '0')
    if taken >= current[i] - slots and held > 0 then
      redis.call('HINCRBY', KEYS[i], field, string.format('%d', -math.min(-amount, held)))
    end
  end
end
return 0
"""


class RedisLimiter:
    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        rest_s: float = REST_S,
        beat_s: float = BEAT_S,
        role: str = "rpc",
    ) -> None:
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=MAX_CONNECTIONS,
            timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
        )
        self._redis: Redis = Redis.from_pool(pool)
        self._script = self._redis.register_script(_WINDOW)
        self._beat = self._redis.register_script(_BEAT)
        self._name = secrets.token_hex(8)
        self._beat_s = beat_s
        self.members_key = f"{MEMBERS_KEY}:{role}"
        self._beaten_at = float("-inf")  # monotonic
        self.processes = 1  # sharing the limits, as last counted in Redis
        self._fallback = MemoryLimiter()
        self._timeout_s = timeout_s
        self._rest_s = rest_s
        self._rest_until = 0.0  # monotonic: Redis is not asked before then
        self._warned_at = float("-inf")

    async def acquire(self, buckets: Sequence[Bucket]) -> float:
        if buckets and all(bucket.amount < 0 for bucket in buckets):
            # Units go back to the limiter that took them: those this process took on its own
            # while Redis was away back here, not to Redis, where they would cancel units other
            # routers took. (A slot may hold this process's units in both: those here are given
            # back first, so Redis gets back at most what this process took there.)
            buckets = self._fallback.give_back_held(buckets)
            if not buckets:
                return 0.0
        if time.monotonic() < self._rest_until:
            return self._fallback.try_acquire(self._shares(buckets))
        # The slot width is part of the key: a limit whose interval changes starts afresh.
        keys = [f"{_PREFIX}{bucket.key}:{bucket.slot_s:g}" for bucket in buckets]
        args: list[float] = [SLOTS]
        for bucket in buckets:
            args += [
                bucket.slot_s * 1_000_000,
                bucket.limit,
                bucket.amount,
                bucket.taken_s_ago * 1_000_000,
            ]
        try:
            # The socket time-outs bound each step; this, the whole call (a connection awaited,
            # connecting, the script loaded again after a restart of Redis, running it).
            async with asyncio.timeout(self._timeout_s):
                if time.monotonic() - self._beaten_at >= self._beat_s:
                    counted = await self._beat(
                        keys=[self.members_key], args=[self._name, MEMBER_TTL_S]
                    )
                    self.processes, self._beaten_at = max(1, int(counted)), time.monotonic()
                wait_us = await self._script(keys=keys, args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            self._rest_until = time.monotonic() + self._rest_s
            self._warn(exc)
            return self._fallback.try_acquire(self._shares(buckets))
        return int(wait_us) / 1_000_000

    def _shares(self, buckets: Sequence[Bucket]) -> Sequence[Bucket]:
        """This process's share of each bucket while Redis is away (give-backs as they are)."""
        processes = self.processes
        if processes == 1:
            return buckets
        return [
            replace(bucket, limit=max(1, bucket.limit // processes))
            if bucket.amount > 0
            else bucket
            for bucket in buckets
        ]

    def _warn(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY_S:
            self._warned_at = now
            log.warning(
                "Redis unavailable, rate limits are per process for now (each 1/%d of the "
                "limit): %s",
                self.processes,
                str(exc) or type(exc).__name__,  # a time-out's message is empty
            )

    async def close(self) -> None:
        await self._redis.aclose()
