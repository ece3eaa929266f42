"""Routers that share answers through Redis share the chains' finality epochs too
(router/shared_epochs.py): a regress one router sees reaches the others within a round, a router
started later starts at the shared epochs, and nothing is read from or written to Redis before
they are known. Each "router" here is its own finality, response cache and Redis tier, on one
real Redis, its rounds run by the Python executor."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest

from chainrouter.ratelimit import create_limiter
from chainrouter.router import epochs, response_cache
from chainrouter.router.epochs import Epochs
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.finality import Finality
from chainrouter.router.memory_cache import MemoryCache
from chainrouter.router.response_cache import EPOCHS_KEY, RedisTier, ResponseCache, redis_tier
from chainrouter.router.shared_epochs import SharedEpochs
from chainrouter.testing.scripted import answering
from tests.redis_servers import PrivateRedis
from tests.router.scripted_world import CHAIN as SCRIPTED_CHAIN
from tests.router.scripted_world import rpc, scripted_world

pytestmark = pytest.mark.anyio

CHAIN, OTHER = 1, 2


def _answer_key(chain: int, epoch: int, block: int) -> str:
    return f"{chain}:0.{epoch}:eth_getBlockByNumber:{block:040x}"


@dataclass
class _Router:
    finality: Finality
    cache: ResponseCache
    tier: RedisTier
    shared: SharedEpochs
    epochs: Epochs = field(default_factory=Epochs)  # raised at each purge of a chain

    @property
    def dropped_here(self) -> list[int]:
        """The chains whose cached answers were dropped here (each once, in these tests)."""
        return [c for c in (CHAIN, OTHER) if self.epochs.read(epochs.chain_cache(c))]


@pytest.fixture
def redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis()
    yield server
    server.stop()


@pytest.fixture
async def executor() -> AsyncIterator[PythonExecutor]:
    limiter = create_limiter(None, redis_timeout_s=1.0)
    running = PythonExecutor(limiter, max_response_bytes=1 << 20, connect_timeout_s=1.0)
    yield running
    await running.close()


@pytest.fixture
async def routers(redis: PrivateRedis) -> AsyncIterator[list[_Router]]:
    made: list[_Router] = []
    for _ in range(3):
        tier = redis_tier(redis.url, timeout_s=1.0, ttl_s=60, max_bytes=16 << 20)
        assert tier is not None
        tier.bind(asyncio.get_running_loop())
        raised = Epochs()
        cache = ResponseCache(MemoryCache(1 << 20), tier, raised)
        finality = Finality({CHAIN: 1000, OTHER: 1000}.get, depth=64, on_regress=cache.purge)
        shared = SharedEpochs(finality, cache, interval_s=1)
        made.append(_Router(finality, cache, tier, shared, raised))
    yield made
    for router in made:
        await router.tier.close()


def _shared(redis: PrivateRedis) -> dict[bytes, bytes]:
    fields = redis.cli("HGETALL", EPOCHS_KEY).split()
    return dict(zip(fields[::2], fields[1::2], strict=True))


def _regress(finality: Finality, chain: int = CHAIN) -> None:
    finality.report(chain, 7, 950)
    finality.report(chain, 7, 940)  # its node's finalized block went backwards


def test_an_adopted_epoch_leaves_the_chain_unfinalized_until_its_nodes_reported_again() -> None:
    finality = Finality({CHAIN: 1000, OTHER: 1000}.get, depth=64)
    finality.report(CHAIN, 7, 950)
    finality.report(CHAIN, 8, 950)
    assert not finality.adopt(CHAIN, 0)  # not past its own: nothing changes
    assert finality.finalized(CHAIN) == 950
    assert finality.adopt(CHAIN, 3)
    assert (finality.epoch(CHAIN), finality.finalized(CHAIN)) == (3, None)
    assert finality.unpublished() == {}  # another router's regress: not this one's to tell
    finality.report(CHAIN, 8, 400)  # one node alone decides nothing, though it is fresh
    assert finality.finalized(CHAIN) is None
    finality.report(CHAIN, 7, 420)
    assert finality.finalized(CHAIN) == 400  # both fresh: the median of what they say now
    finality.report(CHAIN, 7, 430)  # and the new baseline is no regress of its own
    assert (finality.epoch(CHAIN), finality.unpublished()) == (3, {})


def test_a_chain_without_the_tag_waits_for_every_node_not_the_heads_it_held() -> None:
    """Its finality is the head less a depth, and the head is the highest its nodes had: one
    node checked again cannot tell what the others' heads are now."""
    finality = Finality({OTHER: 1000}.get, depth=64)
    for node in (7, 8):
        finality.report(OTHER, node, None)
    assert finality.finalized(OTHER) == 936
    assert finality.adopt(OTHER, 1)
    finality.report(OTHER, 7, None)
    assert finality.finalized(OTHER) is None
    finality.forget(OTHER, 8)  # the other node left the chain: nothing more to wait for
    assert finality.finalized(OTHER) == 936


def test_a_regress_keeps_the_chains_answers_out_of_redis_until_a_raise_sent_after_it_is_back() -> (
    None
):
    finality = Finality({CHAIN: 1000}.get, depth=64)
    assert finality.shared(CHAIN)
    _regress(finality)
    assert (finality.unpublished(), finality.shared(CHAIN)) == ({CHAIN: 1}, False)
    finality.report(CHAIN, 7, 930)  # another regress while the raise of epoch 1 is in flight
    finality.published(CHAIN, 1)
    assert (finality.unpublished(), finality.shared(CHAIN)) == ({CHAIN: 2}, False)
    finality.published(CHAIN, 2)
    assert (finality.unpublished(), finality.shared(CHAIN)) == ({}, True)


async def test_a_regress_one_router_sees_is_adopted_by_the_others_at_their_next_round(
    redis: PrivateRedis, routers: list[_Router], executor: PythonExecutor
) -> None:
    seer, other, _ = routers
    for router in (seer, other):
        await router.shared.first()
    other.finality.report(CHAIN, 7, 950)
    other.cache.keep(_answer_key(CHAIN, 0, 20), b"{}", shared=False)
    other.cache.keep(_answer_key(OTHER, 0, 20), b"{}", shared=False)
    _regress(seer.finality)
    assert seer.dropped_here == [CHAIN]
    await executor.run(seer.shared.share())
    assert _shared(redis) == {b"1": b"1"}
    assert seer.finality.unpublished() == {}
    await executor.run(other.shared.share())
    assert (other.finality.epoch(CHAIN), other.finality.epoch(OTHER)) == (1, 0)
    assert other.finality.finalized(CHAIN) is None  # judged afresh from its next check
    assert other.cache.memory.keys() == [_answer_key(OTHER, 0, 20)]
    assert other.dropped_here == [CHAIN]
    assert other.shared.counts() == {("read", 0): 1, ("adopted", CHAIN): 1}
    await executor.run(seer.shared.share())  # its own epoch, read back: nothing to adopt
    assert seer.finality.epoch(CHAIN) == 1
    assert seer.shared.counts() == {("read", 0): 1, ("published", CHAIN): 1}


async def test_two_routers_that_see_a_regress_at_once_move_the_epoch_past_both(
    redis: PrivateRedis, routers: list[_Router], executor: PythonExecutor
) -> None:
    """Each regress gets an epoch no router kept answers under: the second one to publish
    cannot land on the first one's epoch, or answers the first kept after its own regress
    would be read by a router that saw another one."""
    first, second, _ = routers
    _regress(first.finality)
    _regress(second.finality)
    await executor.run(first.shared.share())
    await executor.run(second.shared.share())
    assert _shared(redis) == {b"1": b"2"}
    assert second.finality.epoch(CHAIN) == 2
    await executor.run(first.shared.share())
    assert first.finality.epoch(CHAIN) == 2
    assert first.shared.counts() == {("read", 0): 1, ("published", CHAIN): 1, ("adopted", CHAIN): 1}


async def test_a_router_started_after_a_regress_starts_at_the_shared_epoch(
    redis: PrivateRedis, routers: list[_Router], executor: PythonExecutor
) -> None:
    seer, _, late = routers
    _regress(seer.finality)
    _regress(seer.finality, OTHER)
    seer.finality.report(OTHER, 7, 930)
    await executor.run(seer.shared.share())
    assert _shared(redis) == {b"1": b"1", b"2": b"2"}
    await late.shared.first()
    assert (late.finality.epoch(CHAIN), late.finality.epoch(OTHER)) == (1, 2)
    assert late.tier.epochs_known


async def test_a_redis_that_lost_the_epochs_is_given_them_again(
    redis: PrivateRedis, routers: list[_Router], executor: PythonExecutor
) -> None:
    seer, other, _ = routers
    _regress(seer.finality)
    await executor.run(seer.shared.share())
    redis.cli("DEL", EPOCHS_KEY)  # restarted without persistence, or evicted
    await executor.run(other.shared.share())
    await executor.run(seer.shared.share())
    assert _shared(redis) == {b"1": b"1"}  # raised back to its epoch
    assert seer.finality.epoch(CHAIN) == 1


async def test_an_epoch_field_that_is_not_a_number_is_skipped_and_written_over(
    redis: PrivateRedis, routers: list[_Router], executor: PythonExecutor
) -> None:
    seer, other, _ = routers
    redis.cli("HSET", EPOCHS_KEY, "1", "soon", "x", "2")
    await other.shared.first()
    assert other.tier.epochs_known  # the rest of the hash is good: Redis is used
    _regress(seer.finality)
    await executor.run(seer.shared.share())
    assert _shared(redis)[b"1"] == b"1"


async def test_no_answer_is_read_or_written_in_redis_before_the_epochs_are_known(
    redis: PrivateRedis, routers: list[_Router]
) -> None:
    router = routers[0]
    key = _answer_key(CHAIN, 0, 20)
    redis.cli("SET", f"chainrouter:cache:{key}", "{}")  # kept before a regress it did not see
    assert router.cache.lookup(key) is None
    router.cache.keep(_answer_key(CHAIN, 0, 21), b"{}")
    assert router.tier._pending == 0  # not even sent
    await router.shared.first()
    found = router.cache.lookup(_answer_key(CHAIN, 0, 20))
    assert found is not None
    assert not isinstance(found, bytes)
    assert await asyncio.wrap_future(found) == b"{}"
    router.cache.keep(_answer_key(CHAIN, 0, 21), b"{}")
    deadline = time.monotonic() + 10
    while len(redis.keys()) != 2:
        assert time.monotonic() < deadline, redis.keys()
        await asyncio.sleep(0.02)


async def test_a_failed_first_read_leaves_redis_unused_until_a_round_reads_the_epochs(
    routers: list[_Router],
    executor: PythonExecutor,
    redis: PrivateRedis,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(response_cache, "REDIS_REST_S", 0.0)  # asked again at once
    router = routers[0]
    redis.stop()
    await router.shared.first()
    assert not router.tier.epochs_known
    assert router.cache.lookup(_answer_key(CHAIN, 0, 20)) is None
    restarted = PrivateRedis(redis.port)
    try:
        await executor.run(router.shared.share())
        assert router.tier.epochs_known
    finally:
        restarted.stop()


def test_a_chain_whose_regress_is_unpublished_is_neither_read_nor_written_in_redis(
    redis: PrivateRedis,
) -> None:
    """Told as a story of the pipeline (scripted executor: it refuses a `Join` on a future
    nothing in the script ends, which is what a look-up in Redis would be)."""
    block = {"number": hex(70), "hash": "0x" + "cd" * 32}
    world = scripted_world(
        [("http://a.node", 1_000, answering(block))],
        methods=("eth_getBlockByNumber",),
        heads={"http://a.node": 100},
        cache_bytes=1 << 20,
    )
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    tier = redis_tier(redis.url, timeout_s=1.0, ttl_s=60, max_bytes=16 << 20)
    assert tier is not None
    tier.bind(loop)
    tier.epochs_known = True
    cache, finality = world.deps.cache, world.deps.finality
    assert cache is not None
    assert finality is not None
    cache.redis = tier
    try:
        finality.report(SCRIPTED_CHAIN, 1, 95)
        finality.report(SCRIPTED_CHAIN, 1, 80)  # a regress: blocks up to 80 final from now on
        assert not finality.shared(SCRIPTED_CHAIN)
        reply = world.call(rpc("eth_getBlockByNumber", [hex(70), False]))
        assert json.loads(reply.body)["result"] == block
        assert dict(reply.headers)["x-cache"] == "MISS"
        assert world.urls_called() == ["http://a.node"]
        again = world.call(rpc("eth_getBlockByNumber", [hex(70), False], 2))
        assert dict(again.headers)["x-cache"] == "HIT"  # kept in process
        time.sleep(0.3)  # a write to Redis is not waited for: none was sent
        assert redis.keys() == []
    finally:
        asyncio.run_coroutine_threadsafe(tier.close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
