"""Metrics (issue 33, item 3): `GET /metrics` in Prometheus's format on the router, for the
networks the operator named: requests, calls by chain, kind of work and scenario, credits
billed, attempts and answer times per node, node health and head lag, usage flush lag; labels
from bounded sets only (no key, no IP, no method a caller chose); with several workers, any of
them answers for all."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from chainrouter.api.metrics import ApiMetrics
from chainrouter.router.contract import HttpRequest
from chainrouter.router.metrics import LATENCY_BOUNDS_S, MetricsShare, RouterMetrics
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import REPO_ROOT
from tests.router.conftest import CHAIN_A, World, WorldFactory, provider, rpc, world_config

pytestmark = pytest.mark.anyio


async def _scrape(world: World, peer: str = "127.0.0.1") -> tuple[int, str]:
    face = world.runtime.face([], world.executor)
    answer = await world.executor.run(
        face.respond(HttpRequest("GET", "/metrics", None, None, None, None, peer, b""))
    )
    return answer.status, answer.body.decode()


async def _post(world: World, path: str, payload: object) -> int:
    """A request through the router's HTTP face, as a server hands it over."""
    face = world.runtime.face([], world.executor)
    body = json.dumps(payload).encode()
    request = HttpRequest("POST", path, None, None, None, "application/json", "127.0.0.1", body)
    return (await world.executor.run(face.respond(request))).status


def _samples(text: str) -> list[Sample]:
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _value(samples: list[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and labels.items() <= s.labels.items()]
    assert found, f"no {name} {labels}"
    return sum(found)


async def test_calls_credits_attempts_and_node_health_are_exposed(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [
                provider(
                    "bad",
                    {"eth_blockNumber": "0.000001"},
                    [(upstream.url("/status/503/m"), CHAIN_A)],
                ),
                provider(
                    "good", {"eth_blockNumber": "0.000002"}, [(upstream.url("/ok/m"), CHAIN_A)]
                ),
            ]
        )
    )
    good = next(n for n in world.runtime.current_nodes() if n.url.endswith("/ok/m"))
    await world.check_health(good)
    # The cheap node fails the first call and cools down: the call fails over. The key has then
    # seen the good node's head, which the cheap node is not known to have: the second call
    # goes to the good node first (router/stages/consistent_head.py).
    keyed = f"/rpc/{CHAIN_A}/{world.secrets['main']}"
    assert await _post(world, keyed, rpc("eth_blockNumber")) == 200
    assert await _post(world, keyed, rpc("eth_blockNumber")) == 200
    assert await _post(world, keyed, rpc("no_such_method")) == 422
    status, text = await _scrape(world)
    assert status == 200
    samples = _samples(text)
    chain = str(CHAIN_A)
    failover = {"chain": chain, "tier": "keyed", "work": "quick", "scenario": "failover"}
    assert _value(samples, "chainrouter_calls_total", **failover) == 1
    first = {**failover, "scenario": "first_choice"}
    assert _value(samples, "chainrouter_calls_total", **first) == 1
    assert _value(samples, "chainrouter_calls_total", scenario="unsupported_method") == 1
    assert _value(samples, "chainrouter_credits_billed_total", chain=chain) == pytest.approx(
        0.000004
    )
    assert _value(samples, "chainrouter_upstream_attempts_total", outcome="failed") == 1
    assert _value(samples, "chainrouter_upstream_attempts_total", outcome="answered") == 2
    assert _value(samples, "chainrouter_upstream_latency_seconds_count") == 2
    buckets = [s for s in samples if s.name == "chainrouter_upstream_latency_seconds_bucket"]
    assert {s.labels["le"] for s in buckets} >= {str(LATENCY_BOUNDS_S[0]), "+Inf"}
    assert _value(samples, "chainrouter_node_up") == 1  # the good one; the bad one failed
    assert _value(samples, "chainrouter_node_head_lag_blocks") == 0
    assert _value(samples, "chainrouter_requests_total", route="keyed", status="200") == 2
    assert _value(samples, "chainrouter_requests_total", route="keyed", status="422") == 1
    assert _value(samples, "chainrouter_usage_unwritten_batches") == 0
    assert _value(samples, "process_resident_memory_bytes") > 0
    # Bounded labels: nothing a caller chose, no key, no address.
    assert "no_such_method" not in text
    assert world.secrets["main"] not in text
    names = {name for s in samples for name in s.labels}
    assert names <= {
        "chain",
        "tier",
        "work",
        "scenario",
        "node",
        "outcome",
        "route",
        "status",
        "le",
    }
    # Keyed calls are read from the usage meter: written to storage, they are still counted.
    assert await world.runtime.sync.flush()
    assert await _post(world, f"/rpc/evm/{CHAIN_A}", rpc("eth_blockNumber")) == 200
    samples = _samples((await _scrape(world))[1])
    assert _value(samples, "chainrouter_calls_total", **failover) == 1
    first = {**failover, "scenario": "first_choice"}
    assert _value(samples, "chainrouter_calls_total", **first) == 1
    free = {"chain": chain, "tier": "free", "work": "quick", "scenario": "failover"}
    assert _value(samples, "chainrouter_calls_total", **free) == 1
    assert _value(samples, "chainrouter_requests_total", route="free", status="200") == 1


async def test_the_response_caches_hits_misses_evictions_and_bytes_are_exposed(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    """A node at block 200 (`/block/200` answers every call with 0xc8): blocks up to 72 are
    final at the default depth of 128, and the cache holds one answer at most."""
    world = await make_world(
        world_config(
            [provider("p", {"eth_getBalance": "0.1"}, [(upstream.url("/block/200/c"), CHAIN_A)])]
        ),
        cache_max_bytes=1500,  # room for one entry: its index takes a quarter
        verify="off",  # one provider: nothing could be proven, and nothing would be kept
    )
    for node in world.runtime.current_nodes():
        await world.check_health(node)
    keyed = f"/rpc/{CHAIN_A}/{world.secrets['main']}"
    for block in ("0x1", "0x1", "0x2"):  # a miss, a hit, a miss that evicts the first
        call = rpc("eth_getBalance", ["0x" + "11" * 20, block])
        assert await _post(world, keyed, call) == 200
    samples = _samples((await _scrape(world))[1])
    labels = {"chain": str(CHAIN_A), "method": "eth_getBalance"}
    assert _value(samples, "chainrouter_cache_hits_total", **labels) == 1
    assert _value(samples, "chainrouter_cache_misses_total", **labels) == 2
    assert _value(samples, "chainrouter_cache_evictions_total", **labels) == 1
    cache = world.runtime.service.deps.cache
    assert cache is not None
    assert _value(samples, "chainrouter_cache_bytes", **labels) == cache.memory.size_bytes > 0


async def test_the_usage_flush_lag_is_exposed_once_usage_is_written(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config([provider("p", {"eth_blockNumber": "0"}, [(upstream.url("/ok/f"), CHAIN_A)])])
    )
    assert "chainrouter_usage_flush_age_seconds" not in (await _scrape(world))[1]
    await world.call(rpc("eth_blockNumber"))
    assert await world.runtime.sync.flush()
    samples = _samples((await _scrape(world))[1])
    assert 0 <= _value(samples, "chainrouter_usage_flush_age_seconds") < 5


async def test_only_the_named_networks_may_scrape(make_world: WorldFactory) -> None:
    world = await make_world(world_config([]), metrics_networks=["10.1.0.0/16"])
    assert (await _scrape(world, "127.0.0.1"))[0] == 404
    assert (await _scrape(world, "10.1.2.3"))[0] == 200
    closed = await make_world(world_config([]), metrics_networks=[])
    assert (await _scrape(closed, "127.0.0.1"))[0] == 404


def test_any_worker_answers_for_all_and_a_gone_worker_is_dropped(tmp_path: Path) -> None:
    mine, other = RouterMetrics(), RouterMetrics()
    mine.call(1, "keyed", "quick", "first_choice", 5)
    other.call(1, "keyed", "quick", "first_choice", 7)
    other.attempt(3, True, 0.002)
    other.notifications[(1, "newHeads")] = 4
    mine.websocket, other.websocket = {"connections": 2, "feeds": 1}, {"connections": 3, "feeds": 1}
    mine.epochs = {("read", 0): 1, ("adopted", 1): 2}
    other.epochs = {("read", 0): 1, ("adopted", 1): 1, ("published", 1): 1}
    mine.seen_heads, other.seen_heads = {"published": 2, "adopted": 1}, {"adopted": 4}
    MetricsShare(tmp_path, pid=os.getpid() + 0).export(mine)  # its own file: not read twice
    # Another live worker (a real process) and a worker that is gone.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        MetricsShare(tmp_path, pid=sleeper.pid).export(other)
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        MetricsShare(tmp_path, pid=dead.pid).export(other)
        merged = MetricsShare(tmp_path).merged(mine)
        assert merged.calls[(1, "keyed", "quick", "first_choice")] == 2
        assert merged.credits_nano[1] == 12
        assert merged.attempts()[(3, "answered")] == 1
        assert merged.notifications == {(1, "newHeads"): 4}
        # Each worker holds its own sockets: the WebSocket gauges add up.
        assert merged.websocket == {"connections": 5, "feeds": 2}
        # Each worker shares the epochs on its own: the workers that read them, and the
        # regresses each adopted or published, add up.
        assert merged.epochs == {("read", 0): 2, ("adopted", 1): 3, ("published", 1): 1}
        assert merged.seen_heads == {"published": 2, "adopted": 5}
        assert not (tmp_path / f"{dead.pid}.metrics.json").exists()
        assert json.loads((tmp_path / f"{sleeper.pid}.metrics.json").read_text())["calls"]
    finally:
        sleeper.kill()
        sleeper.wait()


async def test_the_example_grafana_dashboard_asks_only_for_series_that_exist(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [provider("p", {"eth_blockNumber": "0.1"}, [(upstream.url("/ok/g"), CHAIN_A)])]
        )
    )
    for node in world.runtime.current_nodes():
        await world.check_health(node)
    assert await _post(world, f"/rpc/{CHAIN_A}/{world.secrets['main']}", rpc("eth_blockNumber"))
    assert await world.runtime.sync.flush()
    text = (await _scrape(world))[1]
    # A family declared with no sample yet (no WebSocket client here) is a series that exists.
    declared = set(re.findall(r"^# TYPE (chainrouter_[a-z_]+) ", text, re.MULTILINE))
    served = {sample.name for sample in _samples(text)}
    families = ApiMetrics(_no_app, networks=[]).registry.collect()
    suffixes = ("", "_total", "_bucket", "_count", "_sum")
    served |= {family.name + suffix for family in families for suffix in suffixes}
    served |= {name + suffix for name in declared for suffix in suffixes}
    dashboard = json.loads((REPO_ROOT / "docs" / "grafana-dashboard.json").read_text())
    asked = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"chainrouter_[a-z_]+", target["expr"])
    }
    assert asked
    assert asked <= served


async def _no_app(scope: object, receive: object, send: object) -> None:
    raise AssertionError("not called")
