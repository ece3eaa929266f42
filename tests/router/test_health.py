"""The health checker: heads, chain head, in-sync flags and latency from real nodes; failures cool
a node down and a passing check brings it back; a node serving another chain gets no traffic; the
load it puts on nodes is bounded."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.domain.routing import NodeInfo
from chainrouter.router.contract import Wait
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.executors import Executor
from chainrouter.router.finality import Finality
from chainrouter.router.health import HealthMonitor, parse_quantity
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import ScriptedExecutor, answering
from tests.router.conftest import CHAIN_A, CHAIN_B, AnvilNodes, make_executor

pytestmark = pytest.mark.anyio
_ids = iter(range(10_000, 10**6))


def _node(url: str, chain_id: int = CHAIN_A, provider_id: int = 0) -> NodeInfo:
    return NodeInfo(next(_ids), 1, chain_id, url, provider_id=provider_id)


@pytest.fixture(params=["python", "native"])
async def executor(request: pytest.FixtureRequest) -> AsyncIterator[Executor]:
    """The checker runs on each executor, as the router runs it there."""
    made = make_executor(request.param == "native", max_response_bytes=1 << 16)
    yield made
    await made.close()


def _monitor(**overrides: float) -> HealthMonitor:
    options: dict[str, float] = {
        "interval_s": 10.0,
        "max_per_s": 1000.0,
        "concurrency": 8,
        "timeout_s": 0.5,
        "max_block_lag": 10,
        **overrides,
    }
    return HealthMonitor(MemoryCooldowns(), **options)  # type: ignore[arg-type]


async def test_real_nodes_report_heads_and_latency(executor: Executor, anvil: AnvilNodes) -> None:
    monitor = _monitor()
    nodes = [_node(anvil.urls["a1"]), _node(anvil.urls["a2"]), _node(anvil.urls["b1"], 31338)]
    for node in nodes:
        await executor.run(monitor.check(node))
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


async def test_a_node_more_than_its_lag_behind_the_chain_head_when_it_tells_its_head_lags(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    """Lagging: it serves no read of the head (router/stages/heads.py), not out of sync."""
    monitor = _monitor(max_block_lag=10)
    head, close, behind = (
        _node(upstream.url("/block/200/lag"), provider_id=1),
        _node(upstream.url("/block/195/lag"), provider_id=2),
        _node(upstream.url("/block/100/lag"), provider_id=3),
    )
    for node in (head, close, behind):
        await executor.run(monitor.check(node))
    assert monitor.chain_head(CHAIN_A) == 195  # the highest two providers reached
    assert behind.node_id in monitor.lagging
    assert behind.node_id not in monitor.out_of_sync
    assert not monitor.health(behind.node_id).in_sync
    assert monitor.health(close.node_id).in_sync
    assert monitor.health(head.node_id).in_sync


async def test_a_node_is_never_found_behind_only_for_telling_its_head_before_the_others(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    """Its lag is less the blocks the chain made since it told its head (at the chain's block
    time, learned from its head's progress)."""
    now = [1000.0]
    monitor = HealthMonitor(
        MemoryCooldowns(),
        interval_s=10.0,
        max_per_s=1000.0,
        concurrency=8,
        timeout_s=0.5,
        max_block_lag=2,
        clock=lambda: now[0],
    )
    early = _node(upstream.url("/block/100/early"), provider_id=1)
    for node in (early, _node(upstream.url("/block/100/peer"), provider_id=2)):
        await executor.run(monitor.check(node))
    now[0] += 10  # ten blocks of one second each: the chain's head tells the block time
    for provider in (2, 3):
        await executor.run(
            monitor.check(_node(upstream.url("/block/110/later"), provider_id=provider))
        )
    assert monitor.chain_head(CHAIN_A) == 110
    assert early.node_id not in monitor.lagging  # it told 100 ten blocks ago
    await executor.run(monitor.check(early))  # still at 100 now: ten blocks behind
    assert early.node_id in monitor.lagging
    now[0] += 4
    await executor.run(monitor.check(_node(upstream.url("/block/114/on"), provider_id=3)))
    assert early.node_id in monitor.lagging


async def test_the_chain_head_is_what_nodes_of_two_providers_reached(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    """One provider cannot move it alone, however many nodes it has; with one provider, its
    highest."""
    monitor = _monitor()
    alone = [_node(upstream.url(f"/block/{n}/one"), provider_id=1) for n in (300, 299)]
    for node in alone:
        await executor.run(monitor.check(node))
    assert monitor.chain_head(CHAIN_A) == 300
    for node in (
        _node(upstream.url("/block/250/two"), provider_id=2),
        _node(upstream.url("/block/240/three"), provider_id=3),
    ):
        await executor.run(monitor.check(node))
    assert monitor.chain_head(CHAIN_A) == 250


async def test_a_chain_may_allow_its_own_lag(executor: Executor, upstream: FaultyUpstream) -> None:
    monitor = HealthMonitor(
        MemoryCooldowns(),
        interval_s=10.0,
        max_per_s=1000.0,
        concurrency=8,
        timeout_s=0.5,
        max_block_lag=2,
        chain_max_block_lag={CHAIN_A: 20},
    )
    nodes = [
        _node(upstream.url("/block/200/own"), provider_id=1),
        _node(upstream.url("/block/200/own-b"), provider_id=2),
        _node(upstream.url("/block/185/own"), provider_id=3),
    ]
    for node in nodes:
        await executor.run(monitor.check(node))
    assert monitor.max_lag(CHAIN_A) == 20
    assert monitor.max_lag(CHAIN_B) == 2
    assert not monitor.lagging


async def test_one_node_claiming_an_absurd_head_does_not_desync_the_others(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    monitor = _monitor()
    honest = [_node(upstream.url(f"/block/{n}/liar")) for n in (500, 501)]
    liar = _node(upstream.url("/block/999999999/liar"))
    for node in [*honest, liar]:
        await executor.run(monitor.check(node))
    assert monitor.chain_head(CHAIN_A) == 501
    assert all(monitor.health(node.node_id).in_sync for node in honest)
    assert not monitor.health(liar.node_id).in_sync


@pytest.mark.parametrize(
    "path", ["/status/500/hc", "/garbage/hc", "/reset/hc", "/sleep/2000/hc", "/rpc-error/hc"]
)
async def test_a_failed_check_cools_the_node_down_and_a_passing_one_lifts_it(
    executor: Executor, upstream: FaultyUpstream, path: str
) -> None:
    monitor = _monitor(timeout_s=0.2)
    cooldowns = monitor.cooldowns
    sick = _node(upstream.url(path))
    await executor.run(monitor.check(sick))
    assert not cooldowns.available(sick.node_id)
    state = monitor.state(sick.node_id)
    assert state is not None
    assert state.failures == 1
    assert state.last_error
    cured = NodeInfo(sick.node_id, 1, CHAIN_A, upstream.url("/ok/hc-cured"))
    await executor.run(monitor.check(cured))
    assert cooldowns.available(sick.node_id)


async def test_a_node_answering_another_chains_id_gets_no_traffic_until_it_answers_right(
    executor: Executor, anvil: AnvilNodes
) -> None:
    monitor = _monitor()
    honest = _node(anvil.urls["b1"], CHAIN_B)
    astray = _node(anvil.urls["a1"], CHAIN_B)  # registered for chain B, serves chain A
    for node in (honest, astray, honest):
        await executor.run(monitor.check(node))
    state = monitor.state(astray.node_id)
    assert state is not None
    assert state.failures == 1
    assert state.last_error == f"answers chain ID {CHAIN_A}, but is registered for chain {CHAIN_B}"
    # Out of sync, not merely cooling down: the exclusion outlasts any cooldown.
    assert astray.node_id in monitor.out_of_sync
    assert not monitor.cooldowns.available(astray.node_id)
    assert monitor.health(honest.node_id).in_sync
    [report] = [r for r in monitor.take_reports() if r.node_id == astray.node_id]
    assert not report.in_sync
    assert report.consecutive_failures == 1

    repointed = NodeInfo(astray.node_id, 1, CHAIN_B, anvil.urls["b1"])
    await executor.run(monitor.check(repointed))
    assert astray.node_id not in monitor.out_of_sync
    assert monitor.cooldowns.available(astray.node_id)


def test_the_chain_id_is_asked_first_then_after_a_failure_a_new_url_or_20_checks() -> None:
    url, moved_url = "http://node.test/asked", "http://node.test/moved"
    scripted = ScriptedExecutor({url: answering(hex(CHAIN_A)), moved_url: answering(hex(CHAIN_A))})
    monitor = _monitor()
    node = _node(url)
    for _ in range(21):
        scripted.run(monitor.check(node))
    methods = scripted.methods_sent
    assert methods.count("eth_chainId") == 2  # the first check and the 21st
    assert methods.count("eth_blockNumber") == 21
    methods.clear()
    scripted.down.add(url)
    scripted.run(monitor.check(node))
    scripted.down.clear()
    scripted.run(monitor.check(node))
    moved = NodeInfo(node.node_id, 1, CHAIN_A, moved_url)
    scripted.run(monitor.check(moved))
    scripted.run(monitor.check(moved))
    assert methods == [
        "eth_blockNumber",  # fails: the node is down
        "eth_chainId",  # after a failure
        "eth_blockNumber",
        "eth_chainId",  # a new URL
        "eth_blockNumber",
        "eth_blockNumber",
    ]


def test_a_node_found_serving_another_chain_has_its_chains_cached_answers_dropped() -> None:
    """Its answers may have been kept under the chain it is registered for: that chain's cache
    is dropped (its finality epoch moves on, so Redis's copies are never read), once."""
    url = "http://node.test/astray"
    scripted = ScriptedExecutor({url: answering(hex(CHAIN_A))})
    monitor = _monitor()
    dropped: list[int] = []
    monitor.finality = Finality(monitor.chain_head, depth=64, on_regress=dropped.append)
    astray = _node(url, CHAIN_B)
    monitor.finality.report(CHAIN_B, astray.node_id, 900)
    for _ in range(3):
        scripted.run(monitor.check(astray))
    assert dropped == [CHAIN_B]
    assert monitor.finality.epoch(CHAIN_B) == 1
    assert monitor.finality.finalized(CHAIN_B) is None  # its finalized block is forgotten


async def _wait(seconds: float) -> None:
    await Wait(seconds)


async def _run_for(
    executor: Executor, monitor: HealthMonitor, nodes: list[NodeInfo], seconds: float
) -> float:
    """Run `monitor` over `nodes` for about `seconds` on `executor`, as the router runs it
    (spawned); how long it ran. The executor is kept running meanwhile, as a server keeps it."""
    started = time.monotonic()
    executor.spawn(monitor.run(lambda: nodes))
    await executor.run(_wait(seconds))
    monitor.stop()
    elapsed = time.monotonic() - started
    await executor.run(_wait(0.3))  # checks in flight end; the checker ends before its next
    return elapsed


async def test_checks_are_paced_and_bounded(executor: Executor, upstream: FaultyUpstream) -> None:
    monitor = _monitor(interval_s=0.01, max_per_s=40, concurrency=3)
    nodes = [_node(upstream.url(f"/sleep/100/pace-{i}")) for i in range(200)]
    paths = [f"/sleep/100/pace-{i}" for i in range(200)]
    elapsed = await _run_for(executor, monitor, nodes, 1.0)
    checked = sum(1 for p in paths if upstream.requests[p])  # each node once a round at most
    # At most 40 starts a second, and with 3 in flight of 100 ms each, at most ~30 a second.
    assert 5 <= checked <= min(40, 30) * elapsed + 3


async def test_a_round_over_few_nodes_lasts_the_interval(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    monitor = _monitor(interval_s=1.0, max_per_s=1000, concurrency=8)
    paths = [f"/block/{CHAIN_A}/round-{i}" for i in range(2)]
    await _run_for(executor, monitor, [_node(upstream.url(path)) for path in paths], 2.25)
    # Rounds start at 0, 1 and 2 s; the first node is checked at their starts, the second at
    # once in the first round, then half way through (1.5 s, not 2.5). Each is asked its chain
    # ID too at its first check.
    assert [upstream.requests[path] for path in paths] == [3 + 1, 2 + 1]


async def test_the_first_round_checks_every_node_as_fast_as_the_bound_allows(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    """A router that has just started knows nothing of its nodes: it does not spread its first
    checks over the interval (here 10 s, 2 s apart) but starts them at once."""
    monitor = _monitor(interval_s=10.0, max_per_s=1000, concurrency=8)
    nodes = [_node(upstream.url(f"/block/{CHAIN_A}/first-{i}")) for i in range(5)]
    await _run_for(executor, monitor, nodes, 0.5)
    assert all(monitor.state(node.node_id) is not None for node in nodes)
    assert all(node.node_id in monitor.latency_ms for node in nodes)
    assert not monitor.first_check_out


async def test_a_node_whose_first_check_is_out_is_known_as_such_until_it_ends(
    executor: Executor, upstream: FaultyUpstream
) -> None:
    monitor = _monitor(interval_s=10.0, timeout_s=0.3)
    hung, answering = _node(upstream.url("/hang/first-out")), _node(upstream.url("/ok/first-in"))
    executor.spawn(monitor.run(lambda: [hung, answering]))
    await executor.run(_wait(0.15))
    assert set(monitor.first_check_out) == {hung.node_id}
    await executor.run(_wait(0.4))  # its check timed out: it is heard from, as failing
    monitor.stop()
    assert not monitor.first_check_out
    assert not monitor.cooldowns.available(hung.node_id)


async def test_the_running_checker_updates_what_the_request_path_reads(
    executor: Executor, anvil: AnvilNodes, upstream: FaultyUpstream
) -> None:
    monitor = _monitor(interval_s=0.05)
    good, bad = _node(anvil.urls["a1"]), _node(upstream.url("/status/503"))
    await _run_for(executor, monitor, [good, bad], 0.5)
    state = monitor.state(good.node_id)
    assert state is not None
    assert state.head is not None
    assert state.failures == 0
    assert monitor.latency_ms[good.node_id] > 0
    assert monitor.chain_head(CHAIN_A) == state.head
    bad_state = monitor.state(bad.node_id)
    assert bad_state is not None
    assert bad_state.failures >= 1
    assert not monitor.cooldowns.available(bad.node_id)


@given(st.binary(max_size=200))
def test_the_block_number_parser_rejects_anything_but_a_quantity(body: bytes) -> None:
    try:
        value = parse_quantity(body)
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
    assert parse_quantity(body) == value


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
        parse_quantity(body)
