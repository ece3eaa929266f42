"""Rate limits (GCRA): a full interval's budget may arrive at once, then it refills evenly; a call
takes all its buckets or none; through Redis, every router shares the same buckets."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.ratelimit.gcra import Bucket, MemoryLimiter
from chainrouter.ratelimit.shared import RedisLimiter

REDIS_URL = "redis://127.0.0.1:6379/0"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_full_budget_may_burst_then_refills_evenly() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("node:1", limit=4, interval_s=2.0)
    assert [limiter.try_acquire([bucket]) for _ in range(5)] == [True] * 4 + [False]
    clock.now += 0.5  # one unit refills every 0.5 s
    assert limiter.try_acquire([bucket])
    assert not limiter.try_acquire([bucket])


def test_a_call_takes_all_its_buckets_or_none() -> None:
    limiter = MemoryLimiter(clock=Clock())
    roomy = Bucket("plan:1", limit=10, interval_s=1.0)
    tight = Bucket("node:1", limit=1, interval_s=1.0)
    assert limiter.try_acquire([roomy, tight])
    for _ in range(5):
        assert not limiter.try_acquire([roomy, tight])
    # The refusals by `tight` did not spend `roomy`: 9 units are left.
    assert [limiter.try_acquire([roomy]) for _ in range(10)] == [True] * 9 + [False]


def test_amounts_count_against_credit_budgets() -> None:
    limiter = MemoryLimiter(clock=Clock())
    credits = Bucket("plan-credits:1", limit=10_000, interval_s=60, amount=3_000)
    assert [limiter.try_acquire([credits]) for _ in range(4)] == [True, True, True, False]


def test_full_buckets_are_forgotten() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    for ip in range(100):
        limiter.try_acquire([Bucket(f"free:ip:{ip}", 5, 60)])
    assert len(limiter) == 100
    clock.now += 61
    limiter.sweep()
    assert len(limiter) == 0


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(1, 50),
    interval=st.sampled_from([0.5, 1.0, 7.0, 60.0]),
    gaps=st.lists(st.floats(0, 3, allow_nan=False), min_size=1, max_size=200),
)
def test_admissions_never_exceed_the_burst_plus_the_refill(
    limit: int, interval: float, gaps: list[float]
) -> None:
    """Over any span of time, at most `limit` (the burst) plus what refills during the span."""
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("k", limit, interval)
    admitted: list[float] = []
    for gap in gaps:
        clock.now += gap
        if limiter.try_acquire([bucket]):
            admitted.append(clock.now)
    for i, start in enumerate(admitted):
        for j in range(i, len(admitted)):
            span = admitted[j] - start
            assert j - i + 1 <= limit + span * limit / interval + 1e-6


def test_a_steady_caller_gets_the_whole_rate() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("k", 10, 1.0)
    admitted = 0
    for _ in range(1000):  # 10 s at 100 calls a second
        clock.now += 0.01
        admitted += limiter.try_acquire([bucket])
    assert 100 <= admitted <= 110  # 10 a second, plus the initial burst


@pytest.fixture
async def redis_limiters() -> AsyncIterator[tuple[RedisLimiter, RedisLimiter]]:
    first, second = RedisLimiter(REDIS_URL), RedisLimiter(REDIS_URL)
    yield first, second
    await first.close()
    await second.close()


@pytest.mark.anyio
async def test_routers_share_limits_through_redis(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, second = redis_limiters
    bucket = Bucket(f"node:{uuid.uuid4().hex}", limit=5, interval_s=30)
    results = await asyncio.gather(*(router.acquire([bucket]) for router in [first, second] * 4))
    assert sorted(results) == [False] * 3 + [True] * 5


@pytest.mark.anyio
async def test_redis_takes_all_buckets_or_none(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, _ = redis_limiters
    tag = uuid.uuid4().hex
    roomy, tight = Bucket(f"plan:{tag}", 3, 30), Bucket(f"node:{tag}", 1, 30)
    assert await first.acquire([roomy, tight])
    assert not await first.acquire([roomy, tight])
    assert await first.acquire([roomy])
    assert await first.acquire([roomy])
    assert not await first.acquire([roomy])


@pytest.mark.anyio
async def test_redis_buckets_expire_once_full_again(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    from redis.asyncio import Redis

    first, _ = redis_limiters
    key = f"free:ip:{uuid.uuid4().hex}"
    assert await first.acquire([Bucket(key, 10, 2.0)])
    client = Redis.from_url(REDIS_URL)
    try:
        ttl_ms = await client.pttl(f"chainrouter:rl:{key}")
    finally:
        await client.aclose()
    assert 0 < ttl_ms <= 2_000


@pytest.mark.anyio
async def test_without_redis_the_router_keeps_limiting_on_its_own() -> None:
    unreachable = RedisLimiter("redis://127.0.0.1:1/0")
    try:
        bucket = Bucket("node:fallback", 2, 30)
        assert [await unreachable.acquire([bucket]) for _ in range(3)] == [True, True, False]
    finally:
        await unreachable.close()
