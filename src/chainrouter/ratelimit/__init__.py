"""Rate limits (a sliding window of time slots), in process or shared through Redis; used by the
router and the API."""

from __future__ import annotations

from chainrouter.ratelimit.window import Limiter, MemoryLimiter


def create_limiter(redis_url: str | None, *, redis_timeout_s: float, role: str = "rpc") -> Limiter:
    """Limits shared through Redis when a URL is configured, else kept in this process; a Redis
    call slower than `redis_timeout_s` falls back to this process's share of the limits, among
    the processes of its `role` (they take the same buckets)."""
    if redis_url:
        from chainrouter.ratelimit.shared import RedisLimiter

        return RedisLimiter(redis_url, timeout_s=redis_timeout_s, role=role)
    return MemoryLimiter()
