"""Rate limits: no window of the interval ever holds more than the limit, which may all arrive at
once; a refusal says when the request fits; a call takes all its buckets or none; through Redis,
every router shares the same buckets."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.ratelimit.shared import RedisLimiter
from chainrouter.ratelimit.window import Bucket, MemoryLimiter

REDIS_URL = "redis://127.0.0.1:6379/0"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_whole_limit_may_arrive_at_once_and_no_more_within_the_interval() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("node:1", limit=4, interval_s=2.0)
    assert [limiter.try_acquire([bucket]) == 0 for _ in range(5)] == [True] * 4 + [False]
    clock.now += 1.9  # the same window: nothing refills along the way, unlike a token bucket
    assert limiter.try_acquire([bucket]) > 0
    clock.now += 0.3  # the burst's slot has left the window
    assert [limiter.try_acquire([bucket]) == 0 for _ in range(5)] == [True] * 4 + [False]


def test_a_refusal_says_when_the_request_would_fit() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("node:1", limit=2, interval_s=1.0)
    assert limiter.try_acquire([bucket]) == 0
    clock.now += 0.55
    assert limiter.try_acquire([bucket]) == 0
    wait = limiter.try_acquire([bucket])
    assert wait == pytest.approx(
        1.1 - 0.55, abs=1e-5
    )  # when the first admission's slot leaves the window
    clock.now += wait
    assert limiter.try_acquire([bucket]) == 0


def test_an_amount_over_the_limit_never_fits_and_waits_the_interval() -> None:
    limiter = MemoryLimiter(clock=Clock())
    assert limiter.try_acquire([Bucket("plan-credits:1", 10, 60.0, amount=11)]) == 60.0


def test_a_call_takes_all_its_buckets_or_none() -> None:
    limiter = MemoryLimiter(clock=Clock())
    roomy = Bucket("plan:1", limit=10, interval_s=1.0)
    tight = Bucket("node:1", limit=1, interval_s=1.0)
    assert limiter.try_acquire([roomy, tight]) == 0
    for _ in range(5):
        assert limiter.try_acquire([roomy, tight]) > 0
    # The refusals by `tight` did not spend `roomy`: 9 units are left.
    assert [limiter.try_acquire([roomy]) == 0 for _ in range(10)] == [True] * 9 + [False]


def test_amounts_count_against_credit_budgets() -> None:
    limiter = MemoryLimiter(clock=Clock())
    credits = Bucket("plan-credits:1", limit=10_000, interval_s=60, amount=3_000)
    assert [limiter.try_acquire([credits]) == 0 for _ in range(4)] == [True, True, True, False]


def test_a_negative_amount_gives_units_back_but_never_more_than_were_taken() -> None:
    limiter = MemoryLimiter(clock=Clock())
    assert limiter.try_acquire([Bucket("k", 10, 60, amount=8)]) == 0
    assert limiter.try_acquire([Bucket("k", 10, 60, amount=-3)]) == 0
    assert limiter.try_acquire([Bucket("k", 10, 60, amount=5)]) == 0  # 8 - 3 + 5 = 10
    assert limiter.try_acquire([Bucket("k", 10, 60, amount=-25)]) == 0  # back to empty, not below
    taken = [limiter.try_acquire([Bucket("k", 10, 60, amount=5)]) == 0 for _ in range(3)]
    assert taken == [True, True, False]


def test_units_go_back_to_the_slot_they_were_taken_in_and_not_once_it_has_left() -> None:
    """A failed attempt gives its price back to its plan's credits. Given back into the current
    slot, the units would outlive their own take and cancel other calls' units once it left the
    window; given back after it left, they would cancel others' at once. 1,000 per second."""
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    take = Bucket("plan-credits:1", 1000, 1.0, 100)
    assert limiter.try_acquire([take]) == 0  # a call at 100.0 that will fail
    clock.now += 0.5
    assert limiter.try_acquire([Bucket("plan-credits:1", 1000, 1.0, -100, 0.5)]) == 0
    clock.now += 0.65  # the take's slot has left the window; the give-back's would not have
    assert sum(limiter.try_acquire([take]) == 0 for _ in range(11)) == 10
    clock.now += 10
    assert limiter.try_acquire([take]) == 0  # a slow call at 111.15 ...
    clock.now += 9.5
    assert sum(limiter.try_acquire([take]) == 0 for _ in range(10)) == 10
    clock.now += 0.5  # ... gives back 10 s later: its take has long left the window
    assert limiter.try_acquire([Bucket("plan-credits:1", 1000, 1.0, -100, 10.0)]) == 0
    assert limiter.try_acquire([take]) > 0  # 1,000 taken in the last half second: full


def test_a_limit_whose_interval_changes_starts_afresh() -> None:
    limiter = MemoryLimiter(clock=Clock())
    assert limiter.try_acquire([Bucket("node:1", 1, 60.0)]) == 0
    assert limiter.try_acquire([Bucket("node:1", 1, 60.0)]) > 0
    assert limiter.try_acquire([Bucket("node:1", 1, 1.0)]) == 0


def test_empty_buckets_are_forgotten() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    for ip in range(100):
        limiter.try_acquire([Bucket(f"free:ip:{ip}", 5, 60)])
    assert len(limiter) == 100
    clock.now += 61
    limiter.sweep()
    assert len(limiter) > 0  # the last slot is still inside the window (60 s + one slot)
    clock.now += 6
    limiter.sweep()
    assert len(limiter) == 0


def test_refused_requests_leave_no_bucket_behind() -> None:
    """A bucket is kept once it holds units: refusals from ever new IPs (a batch over the
    per-IP limit, each from another IPv6 /64; calls beyond the free tier's capacity) must not
    grow the limiter until some later admission sweeps it."""
    limiter = MemoryLimiter(clock=Clock())
    for n in range(10_000):
        assert limiter.try_acquire([Bucket(f"free:ip:2001:db8:{n:x}::/64", 60, 60.0, 61)]) > 0
    capacity = Bucket("free:capacity", 1, 1.0)
    assert limiter.try_acquire([capacity]) == 0
    for n in range(10_000):
        assert (
            limiter.try_acquire(
                [Bucket(f"free:ip:198.51.{n // 256}.{n % 256}", 60, 60.0), capacity]
            )
            > 0
        )
    assert len(limiter) == 1  # the capacity's bucket


@settings(max_examples=300, deadline=None)
@given(
    limit=st.integers(1, 50),
    interval=st.sampled_from([0.5, 1.0, 7.0, 60.0]),
    steps=st.lists(
        st.tuples(st.floats(0, 3, allow_nan=False), st.integers(1, 5)), min_size=1, max_size=200
    ),
)
def test_no_window_of_the_interval_ever_holds_more_than_the_limit(
    limit: int, interval: float, steps: list[tuple[float, int]]
) -> None:
    """Wherever a window of `interval` seconds starts, what was admitted inside it is at most
    `limit`, whatever the arrivals and amounts."""
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    admitted: list[tuple[float, int]] = []
    for gap, amount in steps:
        clock.now += gap
        if limiter.try_acquire([Bucket("k", limit, interval, amount)]) == 0:
            admitted.append((clock.now, amount))
    for i, (start, _) in enumerate(admitted):
        inside = sum(units for at, units in admitted[i:] if at < start + interval)
        assert inside <= limit


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(1, 20),
    gaps=st.lists(st.floats(0, 0.5, allow_nan=False), min_size=1, max_size=100),
)
def test_a_refused_request_fits_once_its_wait_is_over(limit: int, gaps: list[float]) -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("k", limit, 1.0)
    for gap in gaps:
        clock.now += gap
        wait = limiter.try_acquire([bucket])
        if wait > 0:
            assert wait <= 1.0 + bucket.slot_s + 2e-6
            clock.now += wait
            assert limiter.try_acquire([bucket]) == 0


def test_a_steady_caller_gets_ten_elevenths_of_the_rate_at_least() -> None:
    clock = Clock()
    limiter = MemoryLimiter(clock=clock)
    bucket = Bucket("k", 10, 1.0)
    admitted = 0
    for _ in range(10_000):  # 100 s at 100 calls a second
        clock.now += 0.01
        admitted += limiter.try_acquire([bucket]) == 0
    assert 1000 * 10 / 11 - 10 <= admitted <= 1000


@pytest.fixture
async def redis_limiters() -> AsyncIterator[tuple[RedisLimiter, RedisLimiter]]:
    # A generous time-out: these tests share a Redis with others, and a slow call falling back to
    # per-process limits would fail them.
    first = RedisLimiter(REDIS_URL, timeout_s=2.0)
    second = RedisLimiter(REDIS_URL, timeout_s=2.0)
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
    assert sorted(wait == 0 for wait in results) == [False] * 3 + [True] * 5
    assert all(0 < wait <= 33 for wait in results if wait)


@pytest.mark.anyio
async def test_redis_takes_all_buckets_or_none(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, _ = redis_limiters
    tag = uuid.uuid4().hex
    roomy, tight = Bucket(f"plan:{tag}", 3, 30), Bucket(f"node:{tag}", 1, 30)
    assert await first.acquire([roomy, tight]) == 0
    assert await first.acquire([roomy, tight]) > 0
    assert await first.acquire([roomy]) == 0
    assert await first.acquire([roomy]) == 0
    assert await first.acquire([roomy]) > 0


@pytest.mark.anyio
async def test_redis_refuses_until_the_window_moves_on_and_says_how_long(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, second = redis_limiters
    bucket = Bucket(f"node:{uuid.uuid4().hex}", limit=2, interval_s=0.5)
    assert [await first.acquire([bucket]), await second.acquire([bucket])] == [0, 0]
    wait = await first.acquire([bucket])
    assert 0 < wait <= 0.55
    await asyncio.sleep(wait + 0.01)
    assert await second.acquire([bucket]) == 0


@pytest.mark.anyio
async def test_redis_gives_units_back_but_never_more_than_were_taken(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, _ = redis_limiters
    key = f"plan-credits:{uuid.uuid4().hex}"
    assert await first.acquire([Bucket(key, 10, 60, amount=8)]) == 0
    assert await first.acquire([Bucket(key, 10, 60, amount=-25)]) == 0
    taken = [await first.acquire([Bucket(key, 10, 60, amount=5)]) == 0 for _ in range(3)]
    assert taken == [True, True, False]


@pytest.mark.anyio
async def test_redis_gives_units_back_to_the_slot_they_were_taken_in_only(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, _ = redis_limiters
    key = f"plan-credits:{uuid.uuid4().hex}"
    assert await first.acquire([Bucket(key, 1000, 60, amount=1000)]) == 0
    assert await first.acquire([Bucket(key, 1000, 60, amount=-400, taken_s_ago=0.0)]) == 0
    assert await first.acquire([Bucket(key, 1000, 60, amount=400)]) == 0
    # Taken 120 s ago: that slot left the window long since; nothing is given back.
    assert await first.acquire([Bucket(key, 1000, 60, amount=-400, taken_s_ago=120.0)]) == 0
    assert await first.acquire([Bucket(key, 1000, 60, amount=1)]) > 0


@pytest.mark.anyio
async def test_redis_buckets_expire_once_their_window_has_passed(
    redis_limiters: tuple[RedisLimiter, RedisLimiter],
) -> None:
    from redis.asyncio import Redis

    first, _ = redis_limiters
    key = f"free:ip:{uuid.uuid4().hex}"
    assert await first.acquire([Bucket(key, 10, 2.0)]) == 0
    client = Redis.from_url(REDIS_URL)
    try:
        ttl_ms = await client.pttl(f"chainrouter:rl:{key}:0.2")
    finally:
        await client.aclose()
    assert 0 < ttl_ms <= 2_200 + 1


@pytest.mark.anyio
async def test_without_redis_the_router_keeps_limiting_on_its_own() -> None:
    unreachable = RedisLimiter("redis://127.0.0.1:1/0", timeout_s=0.1)
    try:
        bucket = Bucket("node:fallback", 2, 30)
        taken = [await unreachable.acquire([bucket]) == 0 for _ in range(3)]
        assert taken == [True, True, False]
    finally:
        await unreachable.close()
