"""Hedged attempts and adaptive time-outs (docs/router.md, "Tail latency"), told as stories on the
scripted executor, in simulated time: a read whose node is slower than usual is tried on the next
route too, the first answer wins and alone is billed; writes are never sent twice; a quick call's
time-out follows its node's latency; a node that keeps being overtaken is cooled down, unless the
call was slow everywhere."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx
import pytest

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.router.contract import FailureKind
from chainrouter.router.latency import (
    MIN_SAMPLES,
    OVERTAKEN_STRIKES,
    WINDOW,
    RecentLatency,
    TailPolicies,
    TailPolicy,
)
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import Script, answering, failing, hanging, slow
from tests.router.conftest import CHAIN_A, CHAIN_B, WorldFactory, api_key, world_config
from tests.router.conftest import provider as served_provider
from tests.router.conftest import rpc as served_rpc
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world
from tests.router.test_server import launch_router

A, B, C = "http://a.node", "http://b.node", "http://c.node"
OK = answering("0x10")


def world_of(
    nodes: list[tuple[str, int, Script]], method: str = "eth_blockNumber", **options: object
) -> ScriptedWorld:
    return scripted_world(nodes, methods=(method,), **options)  # type: ignore[arg-type]


def usually(
    world: ScriptedWorld, url: str, seconds: float, work: Work = Work.QUICK, times: int = 20
) -> None:
    """The node at `url` has recently answered `times` calls of this work in `seconds` each."""
    node_id = next(node.node_id for node in world.nodes if node.url == url)
    for _ in range(times):
        world.deps.health.recent.observe(node_id, work, seconds)


def timed_call(world: ScriptedWorld, method: str = "eth_blockNumber") -> tuple[int, float]:
    started = world.clock.now
    reply = world.call(rpc(method, []))
    return reply.status, world.clock.now - started


def answered_after(world: ScriptedWorld, method: str = "eth_blockNumber") -> float:
    """Seconds until the call was answered (200)."""
    status, elapsed = timed_call(world, method)
    assert status == 200
    return elapsed


def test_a_slow_first_attempt_is_hedged_on_the_next_route_at_its_nodes_p95() -> None:
    world = world_of([(A, 100, slow(5.0, OK)), (B, 200, slow(0.010, OK))])
    usually(world, A, 0.020)
    usually(world, B, 0.010)
    assert answered_after(world) == pytest.approx(0.020 + 0.010)
    assert world.urls_called() == [A, B]
    assert [command.url for command in world.executor.cancelled] == [A]


def test_only_the_winner_is_billed_under_the_hedged_scenario() -> None:
    world = world_of([(A, 100, slow(5.0, OK)), (B, 200, OK)])
    usually(world, A, 0.020)
    timed_call(world)
    assert world.metered() == {Scenario.HEDGED: (1, 200)}
    assert world.balance() == 10**9 - 200


def test_a_hedge_to_a_dearer_node_the_balance_cannot_cover_is_not_sent() -> None:
    # 150 covers A's 100, not B's 200: the first attempt is left to answer alone.
    world = world_of([(A, 100, slow(0.050, OK)), (B, 200, OK)], balance_nano=150)
    usually(world, A, 0.020)
    assert answered_after(world) == pytest.approx(0.050)
    assert world.urls_called() == [A]
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}
    assert world.balance() == 50


def test_the_time_a_repeat_waited_on_the_first_node_counts_toward_one_hedge_delay() -> None:
    # A's hedge delay is 20 ms; a repeat of the call waited 15 ms on A before the handover: the
    # hedge to B goes 5 ms after the pipeline's own attempt at A. One that waited longer than
    # the delay sends it at once, and the hedge to C still one delay later.
    for waited_s, hedged_after_s, answered_by in [(0.015, 0.005, B), (0.050, 0.0, C)]:
        b_s = 0.010 if answered_by == B else 5.0
        nodes: list[tuple[str, int, Script]] = [
            (A, 100, slow(5.0, OK)),
            (B, 200, slow(b_s, OK)),
            (C, 300, slow(0.001, OK)),
        ]
        world = world_of(nodes)
        usually(world, A, 0.020)
        started = world.clock.now
        assert world.call(rpc("eth_blockNumber", []), waited_s=waited_s).status == 200
        took = 0.010 if answered_by == B else 0.020 + 0.001
        assert world.clock.now - started == pytest.approx(hedged_after_s + took)
        assert world.urls_called() == ([A, B] if answered_by == B else [A, B, C])


def test_an_attempt_that_answers_within_its_hedge_delay_is_not_hedged() -> None:
    world = world_of([(A, 100, slow(0.015, OK)), (B, 200, OK)])
    usually(world, A, 0.020)
    assert answered_after(world) == pytest.approx(0.015)
    assert world.urls_called() == [A]
    assert world.executor.cancelled == []
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}


@pytest.mark.parametrize(
    ("usual_s", "expected_delay_s"),
    [(0.001, 0.005), (0.5, 0.050), (None, 0.005)],  # below the floor, above the ceiling, unknown
)
def test_the_hedge_delay_is_bounded_by_floor_and_ceiling_and_is_the_floor_when_nothing_is_known(
    usual_s: float | None, expected_delay_s: float
) -> None:
    policy = TailPolicy(hedge_floor_s=0.005, hedge_ceiling_s=0.050)
    world = world_of([(A, 100, hanging()), (B, 200, OK)], tail=policy)
    if usual_s is not None:
        usually(world, A, usual_s)
    assert answered_after(world) == pytest.approx(expected_delay_s)


def test_a_node_of_unknown_latency_is_hedged_as_soon_as_the_quickest_known_one_would_be() -> None:
    """A hung node never answers, so its latency stays unknown: waiting the ceiling for it on
    every call would make the hang everyone's."""
    world = world_of([(A, 100, hanging()), (B, 200, slow(0.001, OK))])
    usually(world, B, 0.004)
    assert answered_after(world) == pytest.approx(0.004 + 0.001)


def test_with_no_answer_known_the_hedge_waits_the_floor_whatever_health_checks_measured() -> None:
    """The first health check's latency carries a new connection: a poor guide to a hedge."""
    world = world_of([(A, 100, hanging()), (B, 200, OK)], tail=TailPolicy(hedge_floor_s=0.003))
    world.deps.health.observe_latency(1, 40.0)  # as health checks measured A and B, in ms
    world.deps.health.observe_latency(2, 40.0)
    assert answered_after(world) == pytest.approx(0.003)


def test_a_quick_calls_time_out_falls_back_on_the_smoothed_latency_of_health_checks() -> None:
    world = world_of([(A, 100, OK)])
    world.deps.health.observe_latency(1, 500.0)  # ms: 10 x 0.5 s
    world.call(rpc("eth_blockNumber", []))
    assert [command.timeout_s for command in world.executor.forwarded] == [5.0]


# eth_sendRawTransaction is not hedged either: it goes to two providers at once from the start
# (tests/router/test_writes.py), its body checked first.
@pytest.mark.parametrize("method", ["eth_sendBundle", "custom_lookup"])
def test_writes_and_methods_the_router_does_not_know_are_never_hedged(method: str) -> None:
    world = world_of([(A, 100, slow(2.0, OK)), (B, 200, OK)], method)
    usually(world, A, 0.010, Work.WRITE)
    usually(world, A, 0.010, Work.UNKNOWN)
    assert answered_after(world, method) == pytest.approx(2.0)
    assert world.urls_called() == [A]


def test_a_failing_first_route_fails_over_at_once_without_waiting_for_the_hedge() -> None:
    world = world_of([(A, 100, failing(FailureKind.HTTP_STATUS, 503)), (B, 200, slow(0.001, OK))])
    usually(world, A, 0.020)
    assert answered_after(world) == pytest.approx(0.001)
    assert world.metered() == {Scenario.FAILOVER: (1, 200)}


def test_when_every_route_fails_at_once_the_call_ends_without_waiting_for_a_hedge() -> None:
    failure = failing(FailureKind.HTTP_STATUS, 503)
    world = world_of([(A, 100, failure), (B, 200, failure), (C, 300, failure)])
    status, elapsed = timed_call(world)
    assert (status, elapsed) == (424, 0.0)
    assert world.urls_called() == [A, B, C]


def test_with_two_nodes_hung_the_third_answers_two_hedge_delays_later() -> None:
    """The hedges are one delay apart, the first route's: one look-up on the request path."""
    world = world_of([(A, 100, hanging()), (B, 200, hanging()), (C, 300, slow(0.003, OK))])
    usually(world, A, 0.010)
    usually(world, B, 0.020)
    assert answered_after(world) == pytest.approx(0.010 + 0.010 + 0.003)
    assert [command.url for command in world.executor.cancelled] == [A, B]
    assert world.metered() == {Scenario.HEDGED: (1, 300)}


def test_hedge_max_bounds_the_attempts_in_flight_and_a_timed_out_node_is_cooled_down() -> None:
    policy = TailPolicy(hedge_max=1, timeout_floor_s=1.0)
    world = world_of([(A, 100, hanging()), (B, 200, hanging()), (C, 300, OK)], tail=policy)
    usually(world, A, 0.010)
    usually(world, B, 0.010)
    # A and B in flight; C only once A's time-out (its floor: 10 x 10 ms is less) has passed.
    assert answered_after(world) == pytest.approx(1.0)
    assert world.urls_called() == [A, B, C]
    assert world.cooling() == [A]


@pytest.mark.parametrize(
    ("method", "usual_s", "timeout_s"),
    [
        ("eth_blockNumber", 0.2, 2.0),  # ten times the node's p99
        ("eth_blockNumber", 0.01, 1.0),  # the floor
        ("eth_blockNumber", 5.0, 10.0),  # the ceiling
        ("eth_getBalance", None, 10.0),  # latency unknown: the ceiling
        ("eth_call", 0.01, 10.0),  # its time is the call's: the ceiling
        ("eth_getLogs", 0.01, 10.0),
    ],
)
def test_a_quick_calls_time_out_follows_its_nodes_latency_and_others_get_the_ceiling(
    method: str, usual_s: float | None, timeout_s: float
) -> None:
    world = world_of([(A, 100, OK)], method)
    if usual_s is not None:
        usually(world, A, usual_s)
        usually(world, A, usual_s, Work.EXECUTES)
        usually(world, A, usual_s, Work.RANGE)
    params = [{"fromBlock": "0x1", "toBlock": "0x2"}] if method == "eth_getLogs" else []
    world.call(rpc(method, params))
    assert [command.timeout_s for command in world.executor.forwarded] == [timeout_s]


def test_a_node_overtaken_three_times_in_a_row_is_cooled_down() -> None:
    world = world_of([(A, 100, slow(5.0, OK)), (B, 200, slow(0.005, OK))])
    usually(world, A, 0.010)
    usually(world, B, 0.005)
    for _ in range(OVERTAKEN_STRIKES - 1):
        timed_call(world)
        assert world.cooling() == []
    timed_call(world)
    assert world.cooling() == [A]


def test_an_answer_between_overtakings_starts_the_count_again() -> None:
    world = world_of(
        [
            (A, 100, [slow(5.0, OK), slow(5.0, OK), slow(0.001, OK), slow(5.0, OK), slow(5.0, OK)]),
            (B, 200, slow(0.005, OK)),
        ]
    )
    usually(world, A, 0.010)
    usually(world, B, 0.005)
    for _ in range(5):
        timed_call(world)
    assert world.cooling() == []


def test_a_call_slow_on_every_node_counts_against_none() -> None:
    """An eth_call heavy everywhere (the caller's doing): the hedge that wins did so in more than
    its usual time, and a hedge cancelled because the first attempt answered was not overtaken
    (it started later)."""
    heavy = [slow(5.0, OK)] + [slow(3.0, OK)] * (OVERTAKEN_STRIKES + 2)
    world = world_of([(A, 100, heavy), (B, 200, slow(3.0, OK))], "eth_call")
    usually(world, A, 0.010, Work.EXECUTES)
    usually(world, B, 0.010, Work.EXECUTES)
    assert answered_after(world, "eth_call") == pytest.approx(0.010 + 3.0)  # B overtook A
    for _ in range(OVERTAKEN_STRIKES + 2):
        assert answered_after(world, "eth_call") == pytest.approx(3.0)  # A answers, B cancelled
    assert [command.url for command in world.executor.cancelled] == [A] + [B] * 5
    assert world.cooling() == []


def test_hedging_off_sends_one_attempt_at_a_time() -> None:
    world = world_of([(A, 100, slow(0.5, OK)), (B, 200, OK)], tail=TailPolicy(hedge_max=0))
    usually(world, A, 0.010)
    assert answered_after(world) == pytest.approx(0.5)
    assert world.urls_called() == [A]


def test_each_chain_may_have_its_own_policy() -> None:
    default, own = TailPolicy(), TailPolicy(hedge_max=0)
    policies = TailPolicies(default, {10: own})
    assert policies.policy(10) is own
    assert policies.policy(1) is default


# -- the record of recent latency ----------------------------------------------------------


def test_a_quantile_needs_enough_answers_and_reads_the_recent_ones_only() -> None:
    recent = RecentLatency()
    for _ in range(MIN_SAMPLES - 1):
        recent.observe(1, Work.QUICK, 0.001)
    assert recent.quantile(1, Work.QUICK, 0.5) is None
    recent.observe(1, Work.QUICK, 0.001)
    assert recent.quantile(1, Work.QUICK, 0.5) == 0.001
    for _ in range(WINDOW):  # a full window later, the old answers are gone
        recent.observe(1, Work.QUICK, 0.2)
    assert recent.quantile(1, Work.QUICK, 0.0) == 0.2


def test_each_kind_of_call_has_its_own_record() -> None:
    recent = RecentLatency()
    for _ in range(WINDOW):
        recent.observe(1, Work.QUICK, 0.001)
        recent.observe(1, Work.EXECUTES, 0.3)
    assert recent.quantile(1, Work.QUICK, 0.95) == 0.001
    assert recent.quantile(1, Work.EXECUTES, 0.95) == 0.3
    assert recent.quantile(2, Work.QUICK, 0.95) is None


def test_quantiles_follow_new_answers_within_a_few_calls() -> None:
    recent = RecentLatency()
    for _ in range(WINDOW):
        recent.observe(1, Work.QUICK, 0.001)
    assert recent.quantile(1, Work.QUICK, 0.99) == 0.001
    for _ in range(WINDOW // 4):
        recent.observe(1, Work.QUICK, 0.5)
    assert recent.quantile(1, Work.QUICK, 0.99) == 0.5


def test_nodes_no_longer_configured_are_forgotten() -> None:
    recent = RecentLatency()
    for _ in range(WINDOW):
        recent.observe(1, Work.QUICK, 0.001)
        recent.observe(2, Work.QUICK, 0.001)
    recent.overtaken(2)
    recent.forget_except({1})
    assert recent.quantile(2, Work.QUICK, 0.5) is None
    assert recent.quantile(1, Work.QUICK, 0.5) == 0.001


# -- on both executors, against the fault-injecting upstream ---------------------------------


@pytest.mark.anyio
async def test_a_hung_node_is_overtaken_and_its_attempt_abandoned_on_every_executor(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    hung, healthy = "/hang/hedge", "/ok/hedge"
    config = world_config(
        [
            served_provider(
                "cheap", {"eth_blockNumber": "0.0000001"}, [(upstream.url(hung), CHAIN_A)]
            ),
            served_provider(
                "dear", {"eth_blockNumber": "0.0000005"}, [(upstream.url(healthy), CHAIN_A)]
            ),
        ]
    )
    # Nothing known yet (no health check has run): the hedge waits the floor, here 50 ms.
    world = await make_world(config, hedge_max=2, hedge_delay_floor_ms=50.0)
    balance, before = world.stored_balance(), upstream.open_connections
    started = time.monotonic()
    reply = await world.call(served_rpc("eth_blockNumber", [], 1))
    assert reply.status == 200
    assert 0.05 <= time.monotonic() - started < 2
    assert (upstream.requests[hung], upstream.requests[healthy]) == (1, 1)
    assert await world.runtime.sync.flush()
    assert world.stored_usage_by_scenario() == {"hedged": (1, 500)}
    assert balance - world.stored_balance() == 500
    for _ in range(300):  # the abandoned attempt's connection is closed, not kept
        if upstream.open_connections <= before + 1:
            break
        await asyncio.sleep(0.01)
    assert upstream.open_connections <= before + 1  # at most the healthy node's kept one


def test_a_request_dropped_in_the_middle_of_a_race_closes_every_program_of_it(
    tmp_path: Path, upstream: FaultyUpstream
) -> None:
    """A client that gives up while its call's race waits (the first attempt hung, the hedges
    not started): the native server drops the request, and the race's programs, the unstarted
    ones too, are closed rather than left for Python to find never awaited."""
    database_url = f"sqlite:///{tmp_path / 'race.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    key = api_key("main")
    # Both of the chain's nodes hang (one that had answered its first health check would be
    # tried first); a node of another chain answers, so that the router becomes ready.
    hung, other = upstream.url("/hang/dropped"), upstream.url("/hang/dropped-too")
    elsewhere = upstream.url(f"/chain/{CHAIN_B}/dropped")
    config = world_config(
        [
            served_provider("cheap", {"eth_blockNumber": "0.0000001"}, [(hung, CHAIN_A)]),
            served_provider("dear", {"eth_blockNumber": "0.0000005"}, [(other, CHAIN_A)]),
            served_provider("other", {"eth_blockNumber": "0.0000005"}, [(elsewhere, CHAIN_B)]),
        ],
        [key],
    )
    apply_config(engine, validate_document(config))
    engine.dispose()
    hedge_late = {"CHAINROUTER_HEDGE_DELAY_FLOOR_MS": "20000"}
    hedge_late["CHAINROUTER_HEDGE_DELAY_CEILING_MS"] = "20000"
    router = launch_router(
        tmp_path, "native", "127.0.0.1", database_url, key["secret"], key["secret"], hedge_late
    )
    try:
        for _ in range(3):
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(router.url(), json=served_rpc("eth_blockNumber", [], 1), timeout=0.3)
        time.sleep(0.5)
    finally:
        router.process.send_signal(signal.SIGTERM)
        assert router.process.wait(40) == 0
    log = (tmp_path / "router.log").read_text()
    assert upstream.requests["/hang/dropped"] >= 1
    assert "never awaited" not in log
