"""The response cache's answers in Redis are bounded by the routers themselves: a budget of bytes
they keep together, oldest answers out first, whichever Redis the answers share, the limits' one
included, whose keys are never deleted for room (issue 52; docs/cache.md)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.ratelimit.shared import RedisLimiter
from chainrouter.ratelimit.window import Bucket
from chainrouter.router.memory_cache import MemoryCache
from chainrouter.router.response_cache import (
    INDEX_KEY,
    SIZES_KEY,
    TOTAL_KEY,
    RedisTier,
    ResponseCache,
    counted_bytes,
    redis_tier,
)
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes
from tests.redis_servers import PrivateRedis
from tests.router.test_cache_served import _body, _routers, _stop

pytestmark = pytest.mark.anyio

BUDGET = 64 * 1024


@pytest.fixture
def redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    yield server
    server.stop()


def _answers(redis: PrivateRedis) -> dict[str, int]:
    """Each answer in Redis and what it counts against the budget."""
    found = {}
    for key in redis.keys("chainrouter:cache:*"):
        size = int(redis.cli("STRLEN", key.decode()))
        name = key.decode()
        found[name] = size + counted_bytes(name.removeprefix("chainrouter:cache:"), b"")
    return found


def _accounts_agree(redis: PrivateRedis) -> int:
    """The index, the sizes and the counter agree with the answers in Redis; the counter."""
    answers = _answers(redis)
    sizes = redis.cli("HGETALL", SIZES_KEY).split()
    counted = {sizes[i].decode(): int(sizes[i + 1]) for i in range(0, len(sizes), 2)}
    indexed = {key.decode() for key in redis.cli("ZRANGE", INDEX_KEY, "0", "-1").split()}
    total = int(redis.cli("GET", TOTAL_KEY))
    assert counted == answers
    assert indexed == set(answers)
    assert total == sum(answers.values())
    return total


def _limits(redis: PrivateRedis) -> dict[bytes, bytes]:
    """The limits' buckets that outlive a test (a window of a minute or more), as Redis holds
    them: those of shorter windows expire by themselves meanwhile."""
    return {
        key: redis.cli("DUMP", key.decode())
        for key in redis.keys("chainrouter:rl:*")
        if int(redis.cli("PTTL", key.decode())) > 30_000
    }


def _tier(redis: PrivateRedis) -> RedisTier:
    tier = redis_tier(redis.url, timeout_s=1.0, ttl_s=600, max_bytes=BUDGET)
    assert tier is not None
    tier.bind(asyncio.get_running_loop())
    tier.epochs_known = True  # as the shared epochs' first read has it (router/shared_epochs.py)
    return tier


async def _settled(*tiers: RedisTier) -> None:
    deadline = time.monotonic() + 10
    while any(tier._pending for tier in tiers):  # the writes are not waited for
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


async def test_routers_writing_at_once_keep_the_answers_within_the_budget_oldest_out_first(
    redis: PrivateRedis,
) -> None:
    limiter = RedisLimiter(redis.url, timeout_s=1.0)
    tiers = [_tier(redis), _tier(redis)]
    caches = [ResponseCache(MemoryCache(16 << 20), tier) for tier in tiers]
    try:
        # The limits share this Redis: a bucket taken before and one during the writes.
        assert await limiter.acquire([Bucket("ip:203.0.113.7", 10, 60.0)]) == 0
        limits = _limits(redis)
        assert limits
        answer = b'"' + b"a" * 998 + b'"'

        def keep(n: int) -> None:
            caches[n % 2].keep(f"1:0.0:eth_getBlockByNumber:{n:040x}", answer)

        for n in range(40):  # within the budget: all kept
            keep(n)
        await _settled(*tiers)
        assert len(_answers(redis)) == 40
        for n in range(40, 300):  # about 260 KiB more, from two routers at once
            keep(n)
        await _settled(*tiers)
        assert _limits(redis) == limits  # untouched
        total = _accounts_agree(redis)
        assert BUDGET - counted_bytes(f"1:0.0:eth_getBlockByNumber:{0:040x}", answer) < total
        assert total <= BUDGET
        kept = sorted(int(key.rsplit(":", 1)[1], 16) for key in _answers(redis))
        assert kept[0] >= 40  # the first ones, the oldest, went first
        assert sum(tier.evicted for tier in tiers) == 300 - len(kept)
        # The same answer again replaces itself: counted once.
        caches[0].keep(f"1:0.0:eth_getBlockByNumber:{299:040x}", answer)
        await _settled(*tiers)
        assert _accounts_agree(redis) == total
        # A purge takes the chain's answers out of the count as well.
        assert await limiter.acquire([Bucket("ip:203.0.113.8", 10, 60.0)]) == 0
        limits = _limits(redis)
        caches[1].purge(1)
        deadline = time.monotonic() + 10
        while redis.keys():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert _accounts_agree(redis) == 0
        assert _limits(redis) == limits
    finally:
        for tier in tiers:
            await tier.close()
        await limiter.close()


async def test_an_answer_counted_past_the_budget_alone_is_not_kept_in_redis(
    redis: PrivateRedis,
) -> None:
    tier = _tier(redis)
    cache = ResponseCache(MemoryCache(16 << 20), tier)
    try:
        small, large = b'"0x1"', b'"' + b"a" * BUDGET + b'"'
        cache.keep("1:0.0:eth_chainId:a", small)
        cache.keep("1:0.0:eth_getBlockByNumber:b", large)
        await _settled(tier)
        assert list(_answers(redis)) == ["chainrouter:cache:1:0.0:eth_chainId:a"]
        assert _accounts_agree(redis) == counted_bytes("1:0.0:eth_chainId:a", small)
        assert cache.memory.get("1:0.0:eth_getBlockByNumber:b") == large  # in process all the same
    finally:
        await tier.close()


def test_served_routers_sharing_the_limits_redis_keep_their_answers_within_the_budget(
    final_blocks_node: AnvilNodes,
    upstream_server: FaultyUpstream,
    tmp_path: Path,
    redis: PrivateRedis,
) -> None:
    """Both executors, one Redis for the limits and the answers (no CHAINROUTER_CACHE_REDIS_URL):
    final blocks asked of both routers fill the answers past a 64 KiB budget; the answers kept
    stay within it, and the free tier's limits in the same Redis are untouched."""
    port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
    routers, _ = _routers(
        tmp_path,
        upstream_server.url(f"/relay/{port}/full/redis-budget"),
        ["native", "python"],
        CHAINROUTER_REDIS_URL=redis.url,
        CHAINROUTER_CACHE_REDIS_MAX_BYTES=str(BUDGET),
        # A write slower than the time-out leaves Redis unused for 5 s: on a loaded machine at
        # 0.05 s, the answers might then never reach the budget.
        CHAINROUTER_CACHE_REDIS_TIMEOUT_S="2",
    )
    try:
        free = httpx.post(f"{routers[0].base}/rpc/evm/{CHAIN_A}", json=_body("eth_chainId", [], 1))
        assert free.status_code == 200
        limits = _limits(redis)
        assert any(key.startswith(b"chainrouter:rl:free:") for key in limits)
        asked = 0
        for block in range(37):  # blocks 0 to 36 are final
            for full in (False, True):
                body = _body("eth_getBlockByNumber", [hex(block), full], asked)
                reply = httpx.post(routers[asked % 2].url(), json=body, timeout=30)
                assert (reply.status_code, reply.headers["x-cache"]) == (200, "MISS")
                asked += 1
        # The writes are not waited for: until the answers in Redis stop changing.
        seen, stable_since = _answers(redis), time.monotonic()
        while time.monotonic() - stable_since < 1.0:
            time.sleep(0.1)
            now = _answers(redis)
            if now != seen:
                seen, stable_since = now, time.monotonic()
        total = _accounts_agree(redis)
        assert BUDGET - 4096 < total <= BUDGET  # full: an answer counts under 2 KiB
        assert len(_answers(redis)) < asked  # some were deleted for room
        assert _limits(redis) == limits
    finally:
        _stop(routers)


# A write (key number, answer bytes), or another cause deleting an answer (None, key number):
# its TTL, a Redis that evicts, someone's DEL.
_Step = tuple[int | None, int]
_steps = st.lists(
    st.one_of(
        st.tuples(st.integers(0, 30), st.integers(0, 6000)),
        st.tuples(st.none(), st.integers(0, 30)),
    ),
    max_size=60,
)


def _key(n: int) -> str:
    return f"1:0.0:eth_getBlockByNumber:{n:040x}"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps, budget=st.integers(2_000, 20_000))
def test_any_sequence_of_writes_keeps_what_a_model_of_oldest_out_first_keeps(
    redis: PrivateRedis, steps: list[_Step], budget: int
) -> None:
    """The script against a model: answers in the order written (one written again moves to the
    end and counts once), the oldest deleted while the sum passes the budget, one counted past
    the budget alone not written; one deleted by another cause counts until it is reached."""
    redis.cli("FLUSHALL")
    order: list[tuple[str, int]] = []  # (key, what it counts), oldest first
    gone: set[str] = set()  # deleted by another cause, still counted

    async def run() -> None:
        tier = redis_tier(redis.url, timeout_s=5.0, ttl_s=600, max_bytes=budget)
        assert tier is not None
        try:
            for first, second in steps:
                if first is None:
                    redis.cli("DEL", "chainrouter:cache:" + _key(second))
                    if any(key == _key(second) for key, _ in order):
                        gone.add(_key(second))
                    continue
                key, value = _key(first), b"a" * second
                size = counted_bytes(key, value)
                await tier._set(key, value)
                if size > budget:
                    continue
                order[:] = [(k, s) for k, s in order if k != key]
                gone.discard(key)
                while order and sum(s for _, s in order) + size > budget:
                    evicted, _ = order.pop(0)
                    gone.discard(evicted)
                order.append((key, size))
        finally:
            await tier.close()

    asyncio.run(run())
    kept = {key for key, _ in order} - gone
    assert set(_answers(redis)) == {"chainrouter:cache:" + key for key in kept}
    total = int(redis.cli("GET", TOTAL_KEY).strip() or b"0")
    assert total == sum(size for _, size in order) <= budget
    indexed = [key.decode() for key in redis.cli("ZRANGE", INDEX_KEY, "0", "-1").split()]
    assert indexed == ["chainrouter:cache:" + key for key, _ in order]
