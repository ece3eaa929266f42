"""The keys' seen heads across routers (router/shared_heads.py): a block one router served a key
as the head is what every router on the same Redis holds the key to, within Redis's round trip;
never lowered, its decisions dropped; a router started later catches up; Redis away and back,
the sharing goes on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import pytest

from chainrouter.router import epochs
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.epochs import Epochs
from chainrouter.router.health import HealthMonitor
from chainrouter.router.seen_heads import SeenHeads
from chainrouter.router.shared_heads import SharedHeads
from tests.redis_servers import PrivateRedis

KEY, CHAIN = 7, 1


class Router:
    """What one router process has of it: its seen heads, its epochs, the sharing."""

    def __init__(self, url: str, name: str, database: str = "one") -> None:
        self.epochs = Epochs()
        health = HealthMonitor(
            MemoryCooldowns(),
            interval_s=15,
            max_per_s=100,
            concurrency=8,
            timeout_s=5,
            max_block_lag=2,
            epoch_store=self.epochs,
        )
        self.seen = SeenHeads(health)
        self.shared = SharedHeads(self.seen, url, timeout_s=0.5, name=name, scope=database)
        self.following: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.shared.start(asyncio.get_running_loop())
        self.following = asyncio.create_task(self.shared.follow())

    async def close(self) -> None:
        self.shared.stop()
        if self.following is not None:
            self.following.cancel()
        await self.shared.close()


async def _until(check: Callable[[], bool], within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "not within the bound"
        await asyncio.sleep(0.01)


@pytest.fixture
async def redis() -> AsyncIterator[PrivateRedis]:
    server = PrivateRedis()
    yield server
    server.stop()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_head_served_on_one_router_is_the_floor_on_the_other(redis: PrivateRedis) -> None:
    a, b = Router(redis.url, "a"), Router(redis.url, "b")
    a.start()
    b.start()
    try:
        await asyncio.sleep(0.1)  # both follow the stream
        decided = b.epochs.read(epochs.seen(KEY))
        a.seen.saw(KEY, CHAIN, 100, None)
        await _until(lambda: b.seen.seen(KEY, CHAIN) == 100)
        assert b.epochs.read(epochs.seen(KEY)) > decided  # b's decisions for the key dropped
        # An older block from b is not a step back for a.
        b.seen.saw(KEY, CHAIN, 90, None)
        b.seen.saw(KEY, CHAIN, 120, None)
        await _until(lambda: a.seen.seen(KEY, CHAIN) == 120)
        assert b.seen.adopt(KEY, CHAIN, 110) is False
        assert (a.seen.seen(KEY, CHAIN), b.seen.seen(KEY, CHAIN)) == (120, 120)
        assert a.seen.seen(KEY, 2) is None  # another chain's head is its own
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_a_router_started_later_adopts_the_last_minute(redis: PrivateRedis) -> None:
    a = Router(redis.url, "a")
    a.start()
    try:
        a.seen.saw(KEY, CHAIN, 55, None)
        await _until(lambda: redis.cli("XLEN", a.shared.stream).strip() == b"1")
        late = Router(redis.url, "late")
        late.start()
        try:
            await _until(lambda: late.seen.seen(KEY, CHAIN) == 55)
        finally:
            await late.close()
    finally:
        await a.close()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_sharing_goes_on_after_redis_was_away(redis: PrivateRedis) -> None:
    a, b = Router(redis.url, "a"), Router(redis.url, "b")
    a.start()
    b.start()
    try:
        redis.stop()
        a.seen.saw(KEY, CHAIN, 10, None)  # lost: each router keeps its own meanwhile
        assert a.seen.seen(KEY, CHAIN) == 10
        await asyncio.sleep(0.5)
        back = PrivateRedis(redis.port)
        try:
            await asyncio.sleep(1.5)  # the followers' retry
            a.seen.saw(KEY, CHAIN, 11, None)
            await _until(lambda: b.seen.seen(KEY, CHAIN) == 11)
        finally:
            back.stop()
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_routers_of_another_database_on_the_same_redis_share_nothing(
    redis: PrivateRedis,
) -> None:
    """Key ids are a database's own: key 7 of staging is not key 7 of production."""
    production = Router(redis.url, "a", database="production")
    same = Router(redis.url, "b", database="production")
    staging = Router(redis.url, "c", database="staging")
    routers = (production, same, staging)
    for router in routers:
        router.start()
    try:
        await asyncio.sleep(0.1)
        production.seen.saw(KEY, CHAIN, 300, None)
        await _until(lambda: same.seen.seen(KEY, CHAIN) == 300)
        await asyncio.sleep(0.2)
        assert staging.seen.seen(KEY, CHAIN) is None
    finally:
        for router in routers:
            await router.close()
