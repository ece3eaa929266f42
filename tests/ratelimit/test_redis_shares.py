"""Limits across routers while their Redis is away (ratelimit/shared.py): each process, having
counted the processes that share the limits, admits its share of each limit, so that together
they admit no more than the limit; when Redis is back, the limits are shared again."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from chainrouter.ratelimit.shared import MEMBERS_KEY, RedisLimiter
from chainrouter.ratelimit.window import Bucket
from tests.redis_servers import PrivateRedis

LIMIT = 10


async def _admitted(limiter: RedisLimiter, bucket: Bucket, tries: int) -> int:
    waits = [await limiter.acquire([bucket]) for _ in range(tries)]
    return sum(wait == 0 for wait in waits)


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_two_routers_without_their_redis_admit_the_limit_between_them_not_each() -> None:
    redis = PrivateRedis()
    routers = [RedisLimiter(redis.url, timeout_s=0.2, rest_s=0.3, beat_s=0) for _ in range(2)]
    bucket = Bucket(f"plan:{uuid.uuid4().hex}", limit=LIMIT, interval_s=60)
    probe = Bucket(f"node:{uuid.uuid4().hex}", limit=1000, interval_s=60)
    try:
        for _ in range(2):  # each names itself, then counts both
            for router in routers:
                assert await router.acquire([probe]) == 0
        assert [router.processes for router in routers] == [2, 2]
        assert len(redis.cli("ZRANGE", f"{MEMBERS_KEY}:rpc", "0", "-1").split()) == 2
        redis.stop()
        admitted = [await _admitted(router, bucket, 3 * LIMIT) for router in routers]
        assert admitted == [LIMIT // 2, LIMIT // 2]
        # Back: the buckets are Redis's again, whole, and the processes counted afresh.
        redis = PrivateRedis(redis.port)
        await asyncio.sleep(0.35)
        fresh = Bucket(f"plan:{uuid.uuid4().hex}", limit=LIMIT, interval_s=60)
        assert await _admitted(routers[0], fresh, 3 * LIMIT) == LIMIT
        assert await _admitted(routers[1], fresh, 3) == 0
        # The restarted Redis forgot the members: each counts again as it names itself.
        assert await routers[0].acquire([probe]) == 0
        assert [router.processes for router in routers] == [2, 2]
    finally:
        for router in routers:
            await router.close()
        redis.stop()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_router_that_never_reached_redis_keeps_the_whole_limit() -> None:
    redis = PrivateRedis()
    redis.stop()  # the port answers nothing
    alone = RedisLimiter(redis.url, timeout_s=0.2, rest_s=60)
    try:
        bucket = Bucket(f"plan:{uuid.uuid4().hex}", limit=LIMIT, interval_s=60)
        assert await _admitted(alone, bucket, 2 * LIMIT) == LIMIT
        assert alone.processes == 1
    finally:
        await alone.close()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_only_live_processes_of_the_same_role_count() -> None:
    redis = PrivateRedis()
    try:
        # A router that stopped 20 s ago (Redis time), and one that beats now.
        now = int(redis.cli("TIME").split()[0])
        redis.cli("ZADD", f"{MEMBERS_KEY}:rpc", str(now - 20), "gone")
        live = RedisLimiter(redis.url, timeout_s=0.5, beat_s=0)
        assert await live.acquire([Bucket("node:x", 5, 60)]) == 0
        assert live.processes == 1
        # The API's processes take other buckets: they are not counted among the routers.
        api = RedisLimiter(redis.url, timeout_s=0.5, beat_s=0, role="api")
        assert await api.acquire([Bucket("ip:x", 5, 60)]) == 0
        assert await live.acquire([Bucket("node:x", 5, 60)]) == 0
        assert (live.processes, api.processes) == (1, 1)
        await api.close()
        await live.close()
    finally:
        redis.stop()
