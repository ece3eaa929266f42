"""The health checker: heads, chain head, in-sync flags and latency from real nodes; failures cool
a node down and a passing check brings it back; the load it puts on nodes is bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.routing import NodeInfo
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.health import HealthMonitor, parse_block_number
from chainrouter.router.http1 import Http1Upstream
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import CHAIN_A, AnvilNodes

pytestmark = pytest.mark.anyio
_ids = iter(range(10_000, 10**6))


def _node(url: str, chain_id: int = CHAIN_A) -> NodeInfo:
    return NodeInfo(next(_ids), 1, chain_id, url)


@pytest.fixture
async def client() -> AsyncIterator[Http1Upstream]:
    upstream_client = Http1Upstream(max_response_bytes=1 << 16)
    yield upstream_client
    await upstream_client.close()


def _monitor(client: Http1Upstream, **overrides: float) -> HealthMonitor:
    options: dict[str, float] = {
        "interval_s": 10.0,
        "max_per_s": 1000.0,
        "concurrency": 8,
        "timeout_s": 0.5,
        "max_block_lag": 10,
        **overrides,
    }
    return HealthMonitor(client, MemoryCooldowns(), **options)  # type: ignore[arg-type]


async def test_real_nodes_report_heads_and_latency(
    client: Http1Upstream, anvil: AnvilNodes
) -> None:
    monitor = _monitor(client)
    nodes = [_node(anvil.urls["a1"]), _node(anvil.urls["a2"]), _node(anvil.urls["b1"], 31338)]
    for node in nodes:
        await monitor.check(node)
    for node in nodes:
        state = monitor.state(node.node_id)
        assert state is not None
        assert state.head is not None
        assert state.failures == 0
        health = monitor.health(node.node_id)
        assert health.in_sync
        assert health.latency_ms is not None
        assert health.latency_ms > 0
    assert monitor.chain_head(CHAIN_A) is not None


async def test_a_node_behind_the_chain_head_is_out_of_sync(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    monitor = _monitor(client, max_block_lag=10)
    behind, close, head = (
        _node(upstream.url("/block/100/lag")),
        _node(upstream.url("/block/195/lag")),
        _node(upstream.url("/block/200/lag")),
    )
    for node in (behind, close, head):
        await monitor.check(node)
    assert monitor.chain_head(CHAIN_A) == 200
    assert not monitor.health(behind.node_id).in_sync
    assert monitor.health(close.node_id).in_sync
    assert monitor.health(head.node_id).in_sync


async def test_one_node_claiming_an_absurd_head_does_not_desync_the_others(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    monitor = _monitor(client)
    honest = [_node(upstream.url(f"/block/{n}/liar")) for n in (500, 501)]
    liar = _node(upstream.url("/block/999999999/liar"))
    for node in [*honest, liar]:
        await monitor.check(node)
    assert monitor.chain_head(CHAIN_A) == 501
    assert all(monitor.health(node.node_id).in_sync for node in honest)
    assert not monitor.health(liar.node_id).in_sync


@pytest.mark.parametrize(
    "path", ["/status/500/hc", "/garbage/hc", "/reset/hc", "/sleep/2000/hc", "/rpc-error/hc"]
)
async def test_a_failed_check_cools_the_node_down_and_a_passing_one_lifts_it(
    client: Http1Upstream, upstream: FaultyUpstream, path: str
) -> None:
    monitor = _monitor(client, timeout_s=0.2)
    cooldowns = monitor.cooldowns
    sick = _node(upstream.url(path))
    await monitor.check(sick)
    assert not cooldowns.available(sick.node_id)
    state = monitor.state(sick.node_id)
    assert state is not None
    assert state.failures == 1
    assert state.last_error
    cured = NodeInfo(sick.node_id, 1, CHAIN_A, upstream.url("/ok/hc-cured"))
    await monitor.check(cured)
    assert cooldowns.available(sick.node_id)


async def test_checks_are_paced_and_bounded(
    client: Http1Upstream, upstream: FaultyUpstream
) -> None:
    monitor = _monitor(client, interval_s=0.01, max_per_s=40, concurrency=3)
    nodes = [_node(upstream.url(f"/sleep/100/pace-{i}")) for i in range(200)]
    paths = [f"/sleep/100/pace-{i}" for i in range(200)]
    task = asyncio.create_task(monitor.run(lambda: nodes))
    started = time.monotonic()
    await asyncio.sleep(1.0)
    task.cancel()
    elapsed = time.monotonic() - started
    with pytest.raises(asyncio.CancelledError):
        await task
    checked = sum(upstream.requests[p] for p in paths)
    # At most 40 starts a second, and with 3 in flight of 100 ms each, at most ~30 a second.
    assert 5 <= checked <= min(40, 30) * elapsed + 3


@given(st.binary(max_size=200))
def test_the_block_number_parser_rejects_anything_but_a_quantity(body: bytes) -> None:
    try:
        value = parse_block_number(body)
    except ValueError:
        return
    assert value >= 0


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":"0x0"}', 0),
        (b'{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}', 68943),
    ],
)
def test_the_block_number_parser_reads_quantities(body: bytes, value: int) -> None:
    assert parse_block_number(body) == value


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"result":12}',
        b'{"result":"12"}',
        b'{"result":"0x"}',
        b'{"result":"0xzz"}',
        b'{"error":{}}',
    ],
)
def test_the_block_number_parser_refuses_non_quantities(body: bytes) -> None:
    with pytest.raises(ValueError, match=r"not a block number|not JSON"):
        parse_block_number(body)
