"""The response cache and coalescing in served routers, on both executors: identical calls that
arrive together reach a slow node once; routers share answers through Redis, and when Redis stops,
answers garbage or hangs they serve on, from their nodes and their own memory (only the hit ratio
changes)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainrouter.domain.verification import Verified
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.router.memory_cache import MemoryCache
from chainrouter.router.response_cache import (
    EPOCHS_KEY,
    REDIS_REST_S,
    ResponseCache,
    entry,
    read_entry,
    redis_tier,
)
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes, node_result, start_anvil_nodes
from tests.redis_servers import PrivateRedis, SilentRedis
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

pytestmark = pytest.mark.anyio

METHODS = ("eth_getBlockByNumber", "eth_blockNumber", "eth_chainId")
QUIET = {
    # One health check at the start (heads and the finalized block), none during a test: each
    # test counts what its node path received.
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "0.5",
    # One provider, so nothing could be agreed or proven, and nothing would be kept: these are
    # the cache's own rules (what verification adds to them: test_verified_answers.py).
    "CHAINROUTER_VERIFY": "off",
}


def _body(method: str, params: list[Any], call_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}


def _routers(
    tmp: Path,
    node_path: str,
    servers: list[str],
    *,
    each: list[dict[str, str]] | None = None,
    **settings: str,
) -> tuple[list[Served], str]:
    """Routers sharing one database whose only node is `node_path` of the upstream; `each`:
    settings of each router beside `settings`."""
    database_url = f"sqlite:///{tmp / 'cache.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    key = api_key("main")
    prices = dict.fromkeys(METHODS, "0.000001")
    apply_config(
        engine,
        validate_document(world_config([provider("p", prices, [(node_path, CHAIN_A)])], [key])),
    )
    engine.dispose()
    routers = [
        launch_router(
            tmp / f"router-{index}",
            server,
            "127.0.0.1",
            database_url,
            key["secret"],
            key["secret"],
            {**QUIET, **settings, **(each[index] if each else {})},
        )
        for index, server in enumerate(servers)
    ]
    return routers, database_url


def _router_of(
    node: AnvilNodes, upstream: FaultyUpstream, tmp: Path, server: str, **settings: str
) -> Served:
    """One router whose node is `node` through the upstream's relay, on a path of its own."""
    port = node.urls["node"].rsplit(":", 1)[1]
    path = f"/relay/{port}/full/{tmp.name}-{server}"
    [router], _ = _routers(tmp, upstream.url(path), [server], each=[settings])
    return router


def _stop(routers: list[Served]) -> None:
    for router in routers:
        router.process.terminate()
    for router in routers:
        router.process.wait(30)


@pytest.mark.parametrize("server", ["python", "native"])
async def test_identical_calls_that_arrive_together_reach_a_slow_node_once(
    server: str, final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> None:
    port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
    # The node answers 1.5 s late: every call of the 24 arrives while the first is in flight,
    # even on a loaded machine (at 400 ms, one CI run on a machine shared with another saw a
    # late call decided again).
    path = f"/relay/{port}/slow/1500/served-{server}"
    [router], _ = _routers(tmp_path, upstream_server.url(path), [server])
    try:
        asked = upstream_server.requests[path]
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=64)) as client:
            replies = await asyncio.gather(
                *(
                    client.post(router.url(), json=_body("eth_blockNumber", [], n), timeout=30)
                    for n in range(24)
                )
            )
        assert [reply.json()["id"] for reply in replies] == list(range(24))
        assert len({reply.json()["result"] for reply in replies}) == 1
        assert upstream_server.requests[path] == asked + 1
        assert sorted(reply.headers["x-cache"] for reply in replies) == ["HIT"] * 23 + ["MISS"]
    finally:
        _stop([router])


async def test_routers_share_answers_through_redis_serve_on_when_it_stops_and_share_when_back(
    final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> None:
    port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
    path = f"/relay/{port}/full/shared-cache"
    redis = PrivateRedis()
    routers, _ = _routers(
        tmp_path, upstream_server.url(path), ["native", "python"], CHAINROUTER_REDIS_URL=redis.url
    )
    one, other = routers

    def ask(router: Served, block: int, call_id: int) -> httpx.Response:
        body = _body("eth_getBlockByNumber", [hex(block), False], call_id)
        return httpx.post(router.url(), json=body, timeout=30)

    def node_answer(block: int, call_id: int) -> bytes:
        body = _body("eth_getBlockByNumber", [hex(block), False], call_id)
        return httpx.post(final_blocks_node.urls["node"], json=body).content

    try:
        asked = upstream_server.requests[path]
        assert ask(one, 5, 1).headers["x-cache"] == "MISS"
        redis.wait_for_keys(1)  # the write to Redis is not waited for by the call
        shared = ask(other, 5, 2)
        assert shared.headers["x-cache"] == "HIT"
        assert shared.content == node_answer(5, 2)
        assert upstream_server.requests[path] == asked + 1
        # Garbage in Redis is a miss, never an answer.
        assert ask(one, 7, 7).headers["x-cache"] == "MISS"
        redis.wait_for_keys(2)
        redis.spoil_every_key()
        spoiled = ask(other, 7, 8)
        assert spoiled.headers["x-cache"] == "MISS"
        assert spoiled.content == node_answer(7, 8)
        redis.stop()
        asked = upstream_server.requests[path]
        replies = [ask(one, 6, 3), ask(other, 6, 4), ask(one, 6, 5), ask(other, 5, 6)]
        assert [r.status_code for r in replies] == [200] * 4
        assert [r.headers["x-cache"] for r in replies] == ["MISS", "MISS", "HIT", "HIT"]
        assert [r.content for r in replies] == [
            node_answer(6, 3),
            node_answer(6, 4),
            node_answer(6, 5),
            node_answer(5, 6),
        ]
        assert upstream_server.requests[path] == asked + 2  # each router asked once for block 6
        # Redis back (empty): answers are shared through it again once each router asks it.
        redis = PrivateRedis(redis.port)
        time.sleep(REDIS_REST_S + 0.5)
        assert ask(one, 9, 9).headers["x-cache"] == "MISS"
        redis.wait_for_keys(1)
        healed = ask(other, 9, 10)
        assert healed.headers["x-cache"] == "HIT"
        assert healed.content == node_answer(9, 10)
    finally:
        _stop(routers)
        redis.stop()


def test_a_regress_one_router_sees_reaches_a_router_that_checks_no_more_within_a_round(
    upstream_server: FaultyUpstream, tmp_path: Path
) -> None:
    """The chain is rewound below its finalized block and mined again: the block the second
    router kept is another block now. Only the first router checks the node again; the second
    learns of the regress from the epochs they share, and answers the new block."""
    started = start_anvil_nodes((("rewound", CHAIN_A),))
    node = next(started)
    url = node.urls["rewound"]
    node_result(url, "anvil_mine", ["0xa"])
    at_ten = node_result(url, "evm_snapshot", [])
    node_result(url, "anvil_mine", ["0x5a"])  # head 100: blocks up to 36 final
    redis = PrivateRedis()
    port = url.rsplit(":", 1)[1]
    routers, _ = _routers(
        tmp_path,
        upstream_server.url(f"/relay/{port}/full/rewound"),
        ["python", "native"],
        each=[
            {"CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "0.2"},  # sees the regress
            {"CHAINROUTER_CACHE_EPOCH_SHARE_INTERVAL_S": "0.2"},  # one check, at its start
        ],
        CHAINROUTER_CACHE_REDIS_URL=redis.url,
        CHAINROUTER_METRICS_NETWORKS='["127.0.0.0/8"]',
    )
    seer, other = routers
    assert [_epochs_metrics(router) for router in routers] == [{"read": 1.0}] * 2
    body = _body("eth_getBlockByNumber", [hex(20), False], 1)
    try:
        kept = httpx.post(other.url(), json=body, timeout=30)
        again = httpx.post(other.url(), json=body, timeout=30)
        assert (kept.headers["x-cache"], again.headers["x-cache"]) == ("MISS", "HIT")
        assert node_result(url, "evm_revert", [at_ten])  # its finalized block: 0
        deadline = time.monotonic() + 20
        while not redis.cli("HGET", EPOCHS_KEY, str(CHAIN_A)).strip():
            assert time.monotonic() < deadline, "the first router never published the regress"
            time.sleep(0.05)
        node_result(url, "anvil_mine", ["0x5a", "0xc"])  # 12 s apart: other blocks
        fresh = node_result(url, "eth_getBlockByNumber", [hex(20), False])
        assert fresh["hash"] != kept.json()["result"]["hash"]
        deadline = time.monotonic() + 5
        while (reply := httpx.post(other.url(), json=body, timeout=30)).headers["x-cache"] == "HIT":
            assert reply.content == again.content
            assert time.monotonic() < deadline, "the second router kept the old block"
            time.sleep(0.05)
        assert reply.json()["result"] == fresh
        assert seer.process.poll() is None
        chain = f'{{chain="{CHAIN_A}"}}'
        assert _epochs_metrics(seer) == {"read": 1.0, f"published_total{chain}": 1.0}
        assert _epochs_metrics(other) == {"read": 1.0, f"adopted_total{chain}": 1.0}
    finally:
        _stop(routers)
        redis.stop()
        started.close()


def _epochs_metrics(router: Served) -> dict[str, float]:
    """The shared epochs' samples in the router's /metrics, without their common prefix."""
    prefix = "chainrouter_cache_epochs_"
    text = httpx.get(router.base + "/metrics", timeout=30).text
    samples = [line.split(" ") for line in text.splitlines() if line.startswith(prefix)]
    return {name.removeprefix(prefix): float(value) for name, value in samples}


@pytest.mark.parametrize("server", ["python", "native"])
def test_a_redis_that_hangs_later_costs_one_call_its_time_out_and_the_next_none(
    server: str, final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> None:
    redis = PrivateRedis()
    router = _router_of(
        final_blocks_node,
        upstream_server,
        tmp_path,
        server,
        CHAINROUTER_CACHE_REDIS_URL=redis.url,
        CHAINROUTER_CACHE_REDIS_TIMEOUT_S="1",
        # No round of the shared epochs during the test: the time-out is a call's to pay.
        CHAINROUTER_CACHE_EPOCH_SHARE_INTERVAL_S="60",
    )
    try:
        redis.cli("CLIENT", "PAUSE", "8000", "ALL")  # from now on, every command waits
        body = _body("eth_getBlockByNumber", [hex(9), False], 1)
        started = time.monotonic()
        first = httpx.post(router.url(), json=body, timeout=30)
        took = time.monotonic() - started
        second = httpx.post(router.url(), json=body, timeout=30)
        assert (first.status_code, first.headers["x-cache"]) == (200, "MISS")
        assert 1.0 <= took < 5.0  # the look-up's time-out, then the node
        assert (second.status_code, second.headers["x-cache"]) == (200, "HIT")  # in process
        assert second.content == first.content
        # Redis is left alone for a while: the next miss does not wait for it.
        started = time.monotonic()
        other = httpx.post(router.url(), json=_body("eth_getBlockByNumber", ["0xa", False], 2))
        assert (other.status_code, other.headers["x-cache"]) == (200, "MISS")
        assert time.monotonic() - started < 0.9
    finally:
        _stop([router])
        redis.stop()


@pytest.mark.parametrize("server", ["python", "native"])
def test_a_redis_that_hangs_from_the_start_costs_no_call_its_time_out(
    server: str, final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> None:
    """The router's first read of the shared finality epochs pays the time-out, before it
    serves; the calls then find Redis resting, and later ones find the epochs unknown, so that
    no answer is looked up there (the gate itself: test_shared_epochs.py)."""
    silent = SilentRedis()
    router = _router_of(
        final_blocks_node,
        upstream_server,
        tmp_path,
        server,
        CHAINROUTER_REDIS_URL=f"redis://127.0.0.1:{silent.port}/0",
        CHAINROUTER_CACHE_REDIS_TIMEOUT_S="1",
    )
    try:
        for block in (9, 10, 11):
            body = _body("eth_getBlockByNumber", [hex(block), False], block)
            started = time.monotonic()
            reply = httpx.post(router.url(), json=body, timeout=30)
            assert (reply.status_code, reply.headers["x-cache"]) == (200, "MISS")
            assert time.monotonic() - started < 0.9
        again = httpx.post(router.url(), json=_body("eth_getBlockByNumber", ["0x9", False], 1))
        assert (again.status_code, again.headers["x-cache"]) == (200, "HIT")  # in process
    finally:
        _stop([router])
        silent.close()


async def test_a_purged_chains_answers_are_deleted_from_redis_and_no_other_chains() -> None:
    redis = PrivateRedis()
    tier = redis_tier(redis.url, timeout_s=1.0, ttl_s=60, max_bytes=16 << 20)
    assert tier is not None
    tier.bind(asyncio.get_running_loop())
    tier.epochs_known = True  # as the shared epochs' first read has it (router/shared_epochs.py)
    cache = ResponseCache(MemoryCache(1 << 20), tier)
    try:
        for chain in (1, 11, 2):
            cache.keep(f"{chain}:0.0:eth_chainId:{chain:040x}", b'"0x1"')
        await asyncio.sleep(0.3)  # the writes are not waited for
        redis.wait_for_keys(3)
        assert cache.purge(1) == 1
        deadline = time.monotonic() + 10
        while len(redis.keys()) != 2:
            assert time.monotonic() < deadline, redis.keys()
            await asyncio.sleep(0.05)
        assert sorted(redis.keys()) == [
            f"chainrouter:cache:11:0.0:eth_chainId:{11:040x}".encode(),
            f"chainrouter:cache:2:0.0:eth_chainId:{2:040x}".encode(),
        ]
    finally:
        await tier.close()
        redis.stop()


async def test_an_answer_over_a_mebibyte_is_kept_in_process_and_not_in_redis() -> None:
    """Answers may be up to CHAINROUTER_MAX_RESPONSE_BYTES (32 MiB); one that large took Redis
    longer than the look-up's time-out to write, and that failure left Redis unused for every
    call a while. Over 1 MiB, an answer stays in the process."""
    redis = PrivateRedis()
    tier = redis_tier(redis.url, timeout_s=1.0, ttl_s=60, max_bytes=16 << 20)
    assert tier is not None
    tier.bind(asyncio.get_running_loop())
    tier.epochs_known = True  # as the shared epochs' first read has it (router/shared_epochs.py)
    cache = ResponseCache(MemoryCache(16 << 20), tier)
    at_cap = b'"' + b"a" * ((1 << 20) - 2) + b'"'
    over = b'"' + b"a" * ((1 << 20) - 1) + b'"'
    try:
        cache.keep(f"1:0.0:eth_getBlockByNumber:{1:040x}", over)
        cache.keep(f"1:0.0:eth_getBlockByNumber:{2:040x}", at_cap)
        deadline = time.monotonic() + 10
        while tier._pending:  # the writes are not waited for
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert redis.keys() == [f"chainrouter:cache:1:0.0:eth_getBlockByNumber:{2:040x}".encode()]
        assert cache.memory.get(f"1:0.0:eth_getBlockByNumber:{1:040x}") == over
        assert tier.failures == 0
    finally:
        await tier.close()
        redis.stop()


async def test_with_a_redis_for_the_cache_answers_stay_out_of_the_limits_redis(
    final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> None:
    """Answers in the Redis of the rate limits would evict limit buckets or fill it
    (docs/cache.md): CHAINROUTER_CACHE_REDIS_URL gives them one of their own."""
    port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
    limits, answers = PrivateRedis(), PrivateRedis()
    routers: list[Served] = []
    try:
        routers, _ = _routers(
            tmp_path,
            upstream_server.url(f"/relay/{port}/full/cache-redis"),
            ["native", "python"],
            CHAINROUTER_REDIS_URL=limits.url,
            CHAINROUTER_CACHE_REDIS_URL=answers.url,
        )
        one, other = routers
        body = _body("eth_getBlockByNumber", [hex(5), False], 1)
        assert httpx.post(one.url(), json=body, timeout=30).headers["x-cache"] == "MISS"
        answers.wait_for_keys(1)
        assert httpx.post(other.url(), json=body, timeout=30).headers["x-cache"] == "HIT"
        assert limits.keys() == []
        free = httpx.post(f"{one.base}/rpc/evm/{CHAIN_A}", json=_body("eth_chainId", [], 2))
        assert free.status_code == 200
        assert limits.keys("chainrouter:rl:free:*") != []  # the limits are still shared there
    finally:
        _stop(routers)
        limits.stop()
        answers.stop()


async def test_how_an_answer_was_verified_is_shared_through_redis_with_it() -> None:
    """A router that finds an entry in Redis reads how its answer was verified as the router
    that kept it wrote it (docs/cache.md); an entry without the mark, as routers before it
    wrote, reads as unverified."""
    redis = PrivateRedis()
    tiers = [redis_tier(redis.url, timeout_s=1.0, ttl_s=60, max_bytes=16 << 20) for _ in range(2)]
    caches = []
    for tier in tiers:
        assert tier is not None
        tier.bind(asyncio.get_running_loop())
        tier.epochs_known = True
        caches.append(ResponseCache(MemoryCache(1 << 20), tier))
    keeping, finding = caches
    kept = {
        f"1:0.0:eth_getBalance:{1:040x}": (b'"0x2a"', Verified.PROOF),
        f"1:0.0:eth_call:{2:040x}": (b'"0x01"', Verified.AGREEMENT),
        f"1:0.0:eth_getBlockByNumber:{3:040x}": (b'{"number":"0x3"}', None),
    }
    try:
        for key, (result, verified) in kept.items():
            keeping.keep(key, entry(result, verified))
        deadline = time.monotonic() + 10
        while tiers[0] is not None and tiers[0]._pending:  # the writes are not waited for
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert len(redis.keys()) == 3
        for key, found in kept.items():
            future = finding.lookup(key)
            assert future is not None
            assert not isinstance(future, bytes)
            stored = await asyncio.wrap_future(future)
            assert stored is not None
            assert read_entry(stored) == found
    finally:
        for tier in tiers:
            assert tier is not None
            await tier.close()
        redis.stop()
