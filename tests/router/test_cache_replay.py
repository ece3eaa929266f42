"""Replays (docs/cache.md, "Replays"): a request the pipeline answered wholly from the cache, free
of charge, is answered again by the native server alone, under the caller's ids, metered as the
cache calls it is; anything that could change the pipeline's answer ends it.

Which replies the pipeline hands over is told with the scripted executor; the replays themselves
with a served native router in front of a real anvil node. The memo's parsing and keying:
test_replay_memo.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from chainrouter.management.admin import purge_chain_cache
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.router.contract import HttpRequest
from chainrouter.router.executors.native import load_native_module
from chainrouter.router.http_face import RouterFace
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.replay import Replays
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import answering
from tests.anvil import CHAIN_A, AnvilNodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.scripted_world import CHAIN, ScriptedWorld, rpc, scripted_world
from tests.router.test_server import Served, launch_router

A = "http://a.node"
BLOCK = "eth_getBlockByNumber"
FINAL = hex(90)  # the scripted nodes' head is 100 and the finality depth 10
JSON = "application/json"


def _world(**options: Any) -> ScriptedWorld:
    return scripted_world(
        [(A, 1_000, answering({"number": FINAL}))],
        methods=(BLOCK, "eth_blockNumber"),
        heads={A: 100},
        cache_bytes=1 << 20,
        **options,
    )


def test_a_free_hit_of_a_final_answer_is_handed_to_the_server_to_give_again() -> None:
    world = _world()
    miss = world.call(rpc(BLOCK, [FINAL, False], 1))
    hit = world.call(rpc(BLOCK, [FINAL, False], 2))
    assert miss.replayable is None  # a node answered it
    assert hit.replayable is not None
    assert hit.replayable.methods == (BLOCK,)
    assert hit.replayable.chain_id == CHAIN


def test_a_batch_is_handed_over_only_when_every_call_was_a_free_hit() -> None:
    world = _world()
    world.call(rpc(BLOCK, [FINAL, False], 1))
    partial = world.call([rpc(BLOCK, [FINAL, False], 1), rpc("eth_blockNumber", [], 2)])
    whole = world.call([rpc(BLOCK, [FINAL, False], 1), rpc(BLOCK, [FINAL, False], 2)])
    assert partial.replayable is None
    assert whole.replayable is not None
    assert whole.replayable.methods == (BLOCK, BLOCK)


def test_a_hit_that_costs_something_is_never_handed_over() -> None:
    world = _world(cache_prices={"*": 7})
    world.call(rpc(BLOCK, [FINAL, False], 1))
    assert world.call(rpc(BLOCK, [FINAL, False], 2)).replayable is None


def test_a_key_with_a_rate_limit_of_its_own_is_never_handed_over() -> None:
    world = _world(key_rate_limit=100)
    world.call(rpc(BLOCK, [FINAL, False], 1))
    assert world.call(rpc(BLOCK, [FINAL, False], 2)).replayable is None


def test_an_answer_joined_from_a_call_in_flight_is_never_handed_over() -> None:
    world = _world(coalesce=True)
    # The second call of the batch joins the first one's attempt: no cache hit, nothing final.
    reply = world.call([rpc("eth_blockNumber", [], 1), rpc("eth_blockNumber", [], 2)])
    assert reply.replayable is None


def _replaying(world: ScriptedWorld) -> tuple[RouterFace, Replays]:
    """`world` behind a face that hands answers to a native replay memo, as a native worker's."""
    deps = world.service.deps
    memo = Replays.new_memo(load_native_module(), 1 << 20, 60.0)
    replays = Replays(memo, deps.meter, RouterMetrics(), deps.cache)
    world.service.replays = replays
    unused: Any = None  # storage sync and readiness: only /health reads them
    return RouterFace(world.service, unused, [], "native", unused, replays=replays), replays


def _http(world: ScriptedWorld, call_id: int) -> HttpRequest:
    body = json.dumps(rpc(BLOCK, [FINAL, False], call_id)).encode()
    return HttpRequest("POST", f"/rpc/{CHAIN}/{world.key}", None, None, None, JSON, "::1", body)


def test_a_free_hit_served_through_the_face_is_held_by_the_memo() -> None:
    world = _world()
    face, replays = _replaying(world)
    world.executor.run(face.respond(_http(world, 1)))  # the node's answer, now cached
    assert replays.held() == (0, 0)
    world.executor.run(face.respond(_http(world, 2)))
    assert replays.held()[0] == 1


def test_installing_a_snapshot_or_purging_the_chain_clears_the_memo() -> None:
    world = _world()
    face, replays = _replaying(world)
    cache = world.service.deps.cache
    assert cache is not None
    for clear in (
        lambda: world.service.install(world.service.snapshot),
        lambda: cache.purge(CHAIN),
    ):
        for call_id in (1, 2):
            world.executor.run(face.respond(_http(world, call_id)))
        assert replays.held()[0] == 1
        clear()
        assert replays.held() == (0, 0)


def test_an_answer_decided_under_the_snapshot_before_is_not_handed_over_after_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sync installs snapshots on its own thread: one may come after a request read its
    snapshot and before its answer is handed over. That answer is not kept (the memo's
    generation is read before the request reads its snapshot)."""
    world = _world()
    face, replays = _replaying(world)
    world.executor.run(face.respond(_http(world, 1)))
    keyed = world.service.keyed
    serve = keyed.serve

    def sync_meanwhile(request: Any) -> Any:
        world.service.install(world.service.snapshot)  # after the request took its snapshot
        return serve(request)

    monkeypatch.setattr(keyed, "serve", sync_meanwhile)
    answer = world.executor.run(face.respond(_http(world, 2)))
    assert answer.status == 200
    assert dict(answer.headers)["x-cache"] == "HIT"
    assert replays.held() == (0, 0)


# A served native router in front of a real node.

FIRST_BLOCKS = range(1, 6)  # final: anvil's finalized block is 64 behind its head of 100
QUICK = {
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_SYNC_INTERVAL_S": "0.2",
    # Long enough that only a clear ends an entry within a test.
    "CHAINROUTER_CACHE_REPLAY_MAX_AGE_S": "60",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',  # replays are told apart by their count
}


def _body(method: str, params: list[Any], call_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}


def _block(number: int, call_id: Any) -> dict[str, Any]:
    return _body(BLOCK, [hex(number), False], call_id)


class _Setup:
    def __init__(
        self, tmp: Path, node_url: str, node_path: str, key: dict[str, Any], **settings: str
    ) -> None:
        self.node_path = node_path  # the upstream's, which counts the requests it relays
        self.database_url = f"sqlite:///{tmp / 'replay.db'}"
        self.key = key
        self.node_url = node_url
        self.engine = create_database_engine(self.database_url)
        migrate.upgrade(self.engine)
        self.apply()
        self.router: Served = launch_router(
            tmp / "router",
            "native",
            "127.0.0.1",
            self.database_url,
            key["secret"],
            key["secret"],
            {**QUICK, **settings},
        )

    def apply(self) -> None:
        prices = {BLOCK: "0.000001", "eth_chainId": "0.000001"}
        config = world_config([provider("p", prices, [(self.node_url, CHAIN_A)])], [self.key])
        apply_config(self.engine, validate_document(config))

    def post(self, body: Any, **headers: str) -> httpx.Response:
        return httpx.post(self.router.url(), json=body, headers=headers, timeout=30)

    def replays(self) -> int:
        """Calls the server has answered itself so far (`chainrouter_cache_replayed_total`),
        once the last request's count is drained."""
        time.sleep(0.1)  # drained every 20 ms
        metrics = httpx.get(self.router.base + "/metrics", timeout=30).text
        lines = [line for line in metrics.splitlines() if line.startswith(_REPLAYED)]
        return sum(int(float(line.rsplit(" ", 1)[1])) for line in lines)

    def replayed(self, body: Any, **headers: str) -> tuple[httpx.Response, int]:
        """The answer to `body`, and how many of its calls the server answered itself."""
        before = self.replays()
        reply = self.post(body, **headers)
        return reply, self.replays() - before

    def stop(self) -> None:
        self.router.process.terminate()
        self.router.process.wait(30)

    def metered(self) -> dict[str, int]:
        """Calls in storage by scenario (after `stop`: its flush wrote them)."""
        usage = t.usage_aggregates
        query = select(usage.c.scenario, func.sum(usage.c.request_count)).group_by(usage.c.scenario)
        with self.engine.connect() as connection:
            return {scenario: int(count) for scenario, count in connection.execute(query)}


_REPLAYED = "chainrouter_cache_replayed_total{"


@pytest.fixture
def setup_of(
    final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream, tmp_path: Path
) -> Iterator[Any]:
    made: list[_Setup] = []

    def make(name: str, key: dict[str, Any], **settings: str) -> _Setup:
        port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
        path = f"/relay/{port}/full/{name}"
        setup = _Setup(tmp_path, upstream_server.url(path), path, key, **settings)
        made.append(setup)
        return setup

    yield make
    for setup in made:
        if setup.router.process.poll() is None:
            setup.stop()
        setup.engine.dispose()


def test_a_repeated_free_hit_is_answered_by_the_server_and_metered_as_a_cache_call(
    setup_of: Any, final_blocks_node: AnvilNodes, upstream_server: FaultyUpstream
) -> None:
    setup = setup_of("replayed", api_key("main"))
    asked = upstream_server.requests[setup.node_path]
    first = setup.post(_block(3, 1))
    second, replayed = setup.replayed(_block(3, 2))
    assert (first.headers["x-cache"], second.headers["x-cache"]) == ("MISS", "HIT")
    assert replayed == 0  # the pipeline's hit: it hands the answer over
    ids: list[Any] = [3, "three", None, -17, 123456789012345678, "a b:c"]
    before = setup.replays()
    replies = [setup.post(_block(3, call_id)) for call_id in ids]
    assert setup.replays() == before + len(ids)
    for call_id, reply in zip(ids, replies, strict=True):
        assert reply.status_code == 200
        assert reply.headers["x-cache"] == "HIT"
        assert (
            reply.content
            == httpx.post(final_blocks_node.urls["node"], json=_block(3, call_id)).content
        )
    assert len({reply.headers["x-batch-id"] for reply in replies}) == len(ids)
    assert upstream_server.requests[setup.node_path] == asked + 1  # the node, once
    # An id the server does not echo itself (a string past 64 characters) goes to the pipeline.
    assert setup.replayed(_block(3, "x" * 65))[1] == 0
    setup.stop()
    assert setup.metered() == {"first_choice": 1, "cache": 1 + len(ids) + 1}


def test_a_batch_is_replayed_with_each_callers_id_in_its_place(
    setup_of: Any, final_blocks_node: AnvilNodes
) -> None:
    setup = setup_of("batch", api_key("main"))
    batch = [_block(n, n) for n in FIRST_BLOCKS]
    setup.post(batch)
    assert setup.post(batch).headers["x-cache"] == "HIT"
    again = [_block(n, f"id-{n}") for n in FIRST_BLOCKS]
    reply, replayed = setup.replayed(again)
    assert replayed == len(again)
    assert reply.json() == httpx.post(final_blocks_node.urls["node"], json=again).json()
    setup.stop()
    assert setup.metered() == {"first_choice": 5, "cache": 10}


def test_replays_end_when_the_keys_domains_change(setup_of: Any) -> None:
    key = api_key("main", allowed_domains=["app.example.com"])
    setup = setup_of("domains", key)
    page = {"Origin": "https://app.example.com"}
    setup.post(_block(4, 1), **page)
    setup.post(_block(4, 2), **page)
    assert setup.replayed(_block(4, 3), **page)[1] == 1
    key["allowed_domains"] = ["other.example.com"]
    setup.apply()
    deadline = time.monotonic() + 10
    while (reply := setup.post(_block(4, 4), **page)).status_code == 200:
        assert time.monotonic() < deadline, "the new domains were never applied"
        time.sleep(0.05)
    assert reply.status_code == 403
    refused, replayed = setup.replayed(_block(4, 5), **page)
    assert (refused.status_code, replayed) == (403, 0)  # and it stays refused


def test_a_purge_of_the_chain_ends_its_replays(
    setup_of: Any, upstream_server: FaultyUpstream
) -> None:
    setup = setup_of("purged", api_key("main"))
    setup.post(_block(2, 1))
    setup.post(_block(2, 2))
    assert setup.replayed(_block(2, 3))[1] == 1
    purge_chain_cache(setup.engine, CHAIN_A)
    deadline = time.monotonic() + 10
    while (reply := setup.post(_block(2, 4))).headers["x-cache"] == "HIT":
        assert time.monotonic() < deadline, "the purge was never applied"
        time.sleep(0.05)
    assert reply.headers["x-cache"] == "MISS"  # asked of the node again


def test_a_key_with_a_rate_limit_of_its_own_always_goes_through_the_pipeline(
    setup_of: Any,
) -> None:
    limited = setup_of("limited", api_key("main", rate_limit=4, rate_limit_interval_sec=60))
    replies = [limited.post(_block(5, n)) for n in range(6)]
    assert [r.status_code for r in replies] == [200, 200, 200, 200, 429, 429]
    assert limited.replays() == 0
    limited.stop()


def test_a_hit_with_a_cache_price_is_billed_every_time(setup_of: Any) -> None:
    priced = setup_of(
        "priced",
        api_key("main"),
        CHAINROUTER_CACHE_PRICES=json.dumps({f"*:{BLOCK}": "0.000000007"}),
    )
    replies = [priced.post(_block(5, n)) for n in range(5)]
    assert [r.headers["x-cache"] for r in replies] == ["MISS"] + ["HIT"] * 4
    assert priced.replays() == 0
    priced.stop()
    assert priced.metered() == {"first_choice": 1, "cache": 4}
