"""Routing (design notes, "Routing and billing"): economy takes the cheapest route, performance the
fastest in-sync one; both fail over on every kind of upstream failure; routes at a rate limit are
skipped, not hammered; a failing node cools down and comes back."""

from __future__ import annotations

import json

import pytest

from chainrouter.router.contract import Wait
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import (
    CHAIN_A,
    CHAIN_B,
    AnvilNodes,
    World,
    WorldFactory,
    api_key,
    provider,
    rpc,
    world_config,
)

pytestmark = pytest.mark.anyio


async def _pause(seconds: float) -> None:
    await Wait(seconds)


async def _served_by(world: World, upstream: FaultyUpstream, paths: list[str], **kw: object) -> str:
    before = {p: upstream.requests[p] for p in paths}
    reply = await world.call(rpc("eth_blockNumber"), **kw)  # type: ignore[arg-type]
    assert reply.status == 200, reply.body
    served = [p for p in paths if upstream.requests[p] > before[p]]
    return served[-1]


async def test_economy_goes_to_the_cheapest_route_first(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    dear, cheap = "/ok/econ-dear", "/ok/econ-cheap"
    world = await make_world(
        world_config(
            [
                provider("dear", {"eth_blockNumber": "0.000003"}, [(upstream.url(dear), CHAIN_A)]),
                provider(
                    "cheap", {"eth_blockNumber": "0.000001"}, [(upstream.url(cheap), CHAIN_A)]
                ),
            ]
        )
    )
    for _ in range(3):
        assert await _served_by(world, upstream, [dear, cheap]) == cheap
    assert upstream.requests[dear] == 0


async def test_a_chain_specific_price_wins_over_the_all_chains_price(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    a, b = "/ok/specific-a", "/ok/specific-b"
    special = provider("a", {"eth_blockNumber": "0.000005"}, [(upstream.url(a), CHAIN_A)])
    special["plans"][0]["methods"].append(
        {"method": "eth_blockNumber", "cost": "0.0000001", "chain_id": CHAIN_A}
    )
    world = await make_world(
        world_config(
            [special, provider("b", {"eth_blockNumber": "0.000001"}, [(upstream.url(b), CHAIN_A)])]
        )
    )
    assert await _served_by(world, upstream, [a, b]) == a


async def test_performance_goes_to_the_fastest_route(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    slow, fast = "/sleep/150/perf", "/ok/perf-fast"
    world = await make_world(
        world_config(
            [
                provider("slow", {"eth_blockNumber": "0.000001"}, [(upstream.url(slow), CHAIN_A)]),
                provider("fast", {"eth_blockNumber": "0.000009"}, [(upstream.url(fast), CHAIN_A)]),
            ],
            [api_key("main", routing_strategy="performance")],
        )
    )
    for node in world.service.snapshot.routes.nodes_by_chain[CHAIN_A]:
        await world.check_health(node)
    assert await _served_by(world, upstream, [slow, fast]) == fast


async def test_performance_skips_a_node_that_is_out_of_sync(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    """Behind the head that nodes of two other providers reached (router/health.py)."""
    behind, ahead, also = "/block/100/perf-behind", "/block/200/perf-ahead", "/block/200/also"
    world = await make_world(
        world_config(
            [
                provider("b", {"eth_blockNumber": "0.000001"}, [(upstream.url(behind), CHAIN_A)]),
                provider("a", {"eth_blockNumber": "0.000002"}, [(upstream.url(ahead), CHAIN_A)]),
                provider("c", {"eth_blockNumber": "0.000009"}, [(upstream.url(also), CHAIN_A)]),
            ],
            [api_key("main", routing_strategy="performance"), api_key("eco")],
        )
    )
    for node in world.service.snapshot.routes.nodes_by_chain[CHAIN_A]:
        await world.check_health(node)
    assert await _served_by(world, upstream, [behind, ahead, also]) != behind
    # Being in sync is part of eligibility for every strategy, not only performance.
    assert await _served_by(world, upstream, [behind, ahead, also], key="eco") == ahead


@pytest.mark.parametrize(
    "failing",
    [
        "/status/500",
        "/status/503",
        "/status/429",
        "/garbage",
        "/wrong-id",
        "/reset",
        "/sleep/2000",
        "/drip/300",
    ],
)
async def test_a_failing_first_choice_fails_over_to_the_next_route(
    make_world: WorldFactory, upstream: FaultyUpstream, failing: str
) -> None:
    first, second = f"{failing}/fo-first", "/ok/fo-second" + failing.replace("/", "-")
    world = await make_world(
        world_config(
            [
                provider(
                    "first", {"eth_blockNumber": "0.000001"}, [(upstream.url(first), CHAIN_A)]
                ),
                provider(
                    "second", {"eth_blockNumber": "0.000002"}, [(upstream.url(second), CHAIN_A)]
                ),
            ]
        ),
        upstream_timeout_s=0.3,
    )
    reply = await world.call(rpc("eth_blockNumber", [], "fo"))
    assert reply.status == 200
    assert json.loads(reply.body) == {"jsonrpc": "2.0", "id": "fo", "result": "0x10d4f"}
    assert upstream.requests[first] == 1
    assert upstream.requests[second] == 1


async def test_a_json_rpc_error_from_the_node_is_an_answer_not_a_failure(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [
                provider(
                    "first", {"eth_call": "0.000001"}, [(upstream.url("/rpc-error/x"), CHAIN_A)]
                ),
                provider(
                    "second", {"eth_call": "0.000002"}, [(upstream.url("/ok/never"), CHAIN_A)]
                ),
            ]
        )
    )
    reply = await world.call(rpc("eth_call", [{}, "latest"], 3))
    assert reply.status == 200
    assert json.loads(reply.body)["error"]["message"] == "execution reverted"
    assert upstream.requests["/ok/never"] == 0


async def test_a_node_at_its_rate_limit_is_skipped_not_hammered(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    limited, spare = "/ok/limited-node", "/ok/limited-spare"
    world = await make_world(
        world_config(
            [
                provider(
                    "limited",
                    {"eth_blockNumber": "0.000001"},
                    [
                        (
                            upstream.url(limited),
                            CHAIN_A,
                            {"rate_limit": 3, "rate_limit_interval_sec": 60},
                        )
                    ],
                ),
                provider(
                    "spare", {"eth_blockNumber": "0.000002"}, [(upstream.url(spare), CHAIN_A)]
                ),
            ]
        )
    )
    for _ in range(5):
        await world.call(rpc("eth_blockNumber"))
    assert (upstream.requests[limited], upstream.requests[spare]) == (3, 2)


async def test_plan_request_and_credit_limits_and_method_limits_are_respected(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    # Whole-credit prices: a plan's credit limit is in whole credits (spec: an integer).
    by_requests = provider(
        "req",
        {"eth_blockNumber": "1"},
        [(upstream.url("/ok/plan-req-1"), CHAIN_A), (upstream.url("/ok/plan-req-2"), CHAIN_A)],
        rate_limit_req=2,
        rate_limit_req_interval_sec=60,
    )
    by_credits = provider(
        "cr",
        {"eth_blockNumber": "2"},
        [(upstream.url("/ok/plan-cr"), CHAIN_A)],
        rate_limit_cr=4,  # two calls' worth
        rate_limit_cr_interval_sec=60,
    )
    by_method = provider("meth", {}, [(upstream.url("/ok/plan-meth"), CHAIN_A)])
    by_method["plans"][0]["methods"] = [
        {
            "method": "eth_blockNumber",
            "cost": "3",
            "rate_limit": 1,
            "rate_limit_interval_sec": 60,
        }
    ]
    world = await make_world(world_config([by_requests, by_credits, by_method], credits="100"))
    statuses = [(await world.call(rpc("eth_blockNumber"))).status for _ in range(6)]
    assert statuses == [200] * 5 + [429]
    plan_req = upstream.requests["/ok/plan-req-1"] + upstream.requests["/ok/plan-req-2"]
    assert (plan_req, upstream.requests["/ok/plan-cr"], upstream.requests["/ok/plan-meth"]) == (
        2,
        2,
        1,
    )


async def test_a_failed_node_cools_down_then_recovers(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    world = await make_world(
        world_config(
            [
                provider(
                    "flaky",
                    {"eth_blockNumber": "0.000001"},
                    [(upstream.url("/status/500/cd"), CHAIN_A)],
                ),
                provider(
                    "steady", {"eth_blockNumber": "0.000002"}, [(upstream.url("/ok/cd"), CHAIN_A)]
                ),
            ]
        )
    )
    clock = [1000.0]
    world.runtime.cooldowns.clock = lambda: clock[0]  # time travel
    for _ in range(3):
        assert (await world.call(rpc("eth_blockNumber"))).status == 200
    # Tried once, then left alone while cooling down.
    assert upstream.requests["/status/500/cd"] == 1
    clock[0] += 1.5  # the first cooldown (1 s) is over: the node is tried again, fails again
    await world.call(rpc("eth_blockNumber"))
    assert upstream.requests["/status/500/cd"] == 2
    clock[0] += 1.5  # the second cooldown is 2 s: still out
    await world.call(rpc("eth_blockNumber"))
    assert upstream.requests["/status/500/cd"] == 2


async def test_real_nodes_serve_reads_and_batches(
    make_world: WorldFactory, anvil: AnvilNodes
) -> None:
    world = await make_world(
        world_config(
            [
                provider(
                    "anvil",
                    {
                        "eth_chainId": "0",
                        "eth_getBalance": "0.0000002",
                        "eth_blockNumber": "0.0000001",
                    },
                    [(anvil.urls["a1"], CHAIN_A), (anvil.urls["b1"], 31338)],
                )
            ]
        )
    )
    account = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
    reply = await world.call(
        [rpc("eth_chainId", [], 1), rpc("eth_getBalance", [account, "latest"], 2)]
    )
    answers = json.loads(reply.body)
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": hex(CHAIN_A)}
    assert int(answers[1]["result"], 16) == 10_000 * 10**18
    other = await world.call(rpc("eth_chainId"), chain=31338)
    assert json.loads(other.body)["result"] == hex(31338)


async def test_a_node_serving_another_chain_gets_no_calls_once_checked(
    make_world: WorldFactory, anvil: AnvilNodes
) -> None:
    # The cheap node is registered for chain B but serves chain A (trusted from the operator's
    # file, so never screened); only the health check can tell. Economy would pick it first.
    world = await make_world(
        world_config(
            [
                provider("astray", {"eth_chainId": "0.000001"}, [(anvil.urls["a1"], CHAIN_B)]),
                provider("honest", {"eth_chainId": "0.000009"}, [(anvil.urls["b1"], CHAIN_B)]),
            ],
        )
    )
    for node in world.service.snapshot.routes.nodes_by_chain[CHAIN_B]:
        await world.check_health(node)
    for _ in range(3):
        reply = await world.call(rpc("eth_chainId"), chain=CHAIN_B)
        assert json.loads(reply.body)["result"] == hex(CHAIN_B)


async def test_a_node_whose_first_health_check_is_still_out_is_tried_after_one_that_answered(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    """After a start the router has heard nothing of its nodes. The cheapest one hangs: its
    first check never comes back, so calls go first to the node that answered its check rather
    than wait on it; once its check has timed out it cools down like any failing node."""
    hung, answering = "/hang/first-check", "/ok/first-check"
    world = await make_world(
        world_config(
            [
                provider("cheap", {"eth_blockNumber": "0.000001"}, [(upstream.url(hung), CHAIN_A)]),
                provider(
                    "dear", {"eth_blockNumber": "0.000003"}, [(upstream.url(answering), CHAIN_A)]
                ),
            ]
        ),
        health_check_timeout_s=1.0,
    )
    health = world.runtime.health
    world.executor.spawn(health.run(world.runtime.current_nodes))
    for _ in range(200):
        if health.latency_ms and health.first_check_out:
            break
        await world.executor.run(_pause(0.005))  # the executor runs the checker meanwhile
    assert len(health.latency_ms) == 1
    assert len(health.first_check_out) == 1
    for _ in range(3):
        assert await _served_by(world, upstream, [hung, answering]) == answering
    assert upstream.requests[hung] == 1  # its health check alone
    health.stop()
