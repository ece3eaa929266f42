"""The Redis limiter when Redis hangs, fails or comes back: a call never waits on Redis longer
than its time-out, the router then limits on its own for a while, and the limits are shared
again once Redis answers (ratelimit/shared.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import httpx
import pytest

from chainrouter.ratelimit.shared import MAX_CONNECTIONS, RedisLimiter
from chainrouter.ratelimit.window import Bucket
from tests.anvil import AnvilNodes
from tests.redis_servers import PrivateRedis, SilentRedis
from tests.router.test_server import start_router


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_redis_that_hangs_costs_a_call_its_time_out_then_limits_are_per_process() -> None:
    silent = SilentRedis()
    limiter = RedisLimiter(silent.url, timeout_s=0.5, rest_s=60)
    bucket = Bucket("node:hung", limit=2, interval_s=30)
    try:
        started = time.monotonic()
        calls = asyncio.gather(*(limiter.acquire([bucket]) for _ in range(200)))
        await asyncio.sleep(0.3)
        assert 0 < silent.open_connections() <= MAX_CONNECTIONS  # not one for each call
        waits = await calls
        assert time.monotonic() - started < 1.5  # each within the time-out, not forever
        assert sorted(wait == 0 for wait in waits) == [False] * 198 + [True] * 2
        # Redis is left alone for a while: the next calls do not wait for it.
        started = time.monotonic()
        assert await limiter.acquire([Bucket("node:other", 1, 30)]) == 0
        assert time.monotonic() - started < 0.05
    finally:
        await limiter.close()
        silent.close()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_the_limits_are_shared_again_once_redis_answers() -> None:
    silent = SilentRedis()
    limiter = RedisLimiter(silent.url, timeout_s=0.1, rest_s=0.2)
    key = f"node:{uuid.uuid4().hex}"
    bucket = Bucket(key, limit=3, interval_s=30)
    redis = None
    try:
        assert await limiter.acquire([bucket]) == 0  # taken in this process: Redis hangs
        silent.close()
        redis = PrivateRedis(silent.port)  # the same address answers again
        await asyncio.sleep(0.2)  # the rest is over
        assert await limiter.acquire([bucket]) == 0
        assert redis.keys("chainrouter:rl:*") == [f"chainrouter:rl:{key}:3".encode()]
    finally:
        await limiter.close()
        silent.close()
        if redis is not None:
            redis.stop()


@pytest.mark.parametrize("server", ["python", "native"])
@pytest.mark.timeout(60)
def test_a_served_router_whose_redis_hangs_answers_within_the_time_out(
    tmp_path: Path, anvil: AnvilNodes, server: str
) -> None:
    """Free-tier calls take Redis limits on both executors (the native one awaits them on its
    event loop): with Redis hung, each is answered, limited per process."""
    silent = SilentRedis()
    routed = start_router(
        tmp_path,
        anvil,
        server,
        CHAINROUTER_REDIS_URL=silent.url,
        CHAINROUTER_FREE_TIER_IP_REQUESTS="3",
    )
    try:
        body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        started = time.monotonic()
        codes = [
            httpx.post(f"{routed.base}/rpc/evm/31337", json=body, timeout=10).status_code
            for _ in range(4)
        ]
        assert codes == [200, 200, 200, 429]
        assert time.monotonic() - started < 3.0
    finally:
        routed.process.terminate()
        routed.process.wait(30)
        silent.close()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_units_taken_while_redis_failed_are_given_back_here_not_to_redis() -> None:
    """A router takes a plan's credits on its own while Redis refuses writes (out of memory);
    its attempt fails once Redis is back and gives the credits back. Given back to Redis, they
    would cancel what another router took there meanwhile."""
    redis = PrivateRedis()
    one = RedisLimiter(redis.url, timeout_s=2.0, rest_s=0)
    other = RedisLimiter(redis.url, timeout_s=2.0, rest_s=0)
    credits = Bucket("plan-credits:7", limit=100, interval_s=60, amount=100)
    try:
        redis.cli("CONFIG", "SET", "maxmemory", "1")
        taken_at = time.monotonic()
        assert await one.acquire([credits]) == 0  # in its own limits: Redis refused
        redis.cli("CONFIG", "SET", "maxmemory", "0")
        assert await other.acquire([credits]) == 0  # in Redis
        given_back = Bucket(credits.key, 100, 60, -100, time.monotonic() - taken_at)
        assert await one.acquire([given_back]) == 0
        assert await other.acquire([credits]) > 0  # Redis still holds the other's 100
        # And the router's own limits hold none of it any more.
        redis.stop()
        assert await one.acquire([credits]) == 0
    finally:
        await one.close()
        await other.close()
        redis.stop()
