"""Failover (design notes, "Routing and billing"): routes are tried in order, a failing node is
passed over for the next route and cooled down with backoff, and the client is told what failed.

These stories are told with scripted nodes (testing/scripted.py): the pipeline runs as in
production, and only the nodes' answers are written down. The same rules against real sockets
are in test_routing.py and test_rpc_statuses.py.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.errors import RpcCode
from chainrouter.ratelimit.window import Bucket
from chainrouter.router.answers import Verdict, answers_call, judge_answer
from chainrouter.router.contract import FailureKind
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.latency import TailPolicy
from chainrouter.router.stages.attempt import Attempt
from chainrouter.testing.scripted import answering, erroring, failing, hanging, raw
from tests.router.scripted_world import CHAIN, METHOD, rpc, scripted_world

A, B, C = "http://a.node", "http://b.node", "http://c.node"
OK = answering("0x10d4f")


def _error(reply_body: bytes) -> tuple[int, str]:
    error = json.loads(reply_body)["error"]
    return error["code"], error["message"]


def test_the_first_choice_answers_when_it_can() -> None:
    world = scripted_world([(A, 100, OK), (B, 200, OK)])
    reply = world.call(rpc(request_id=7))
    assert (reply.status, json.loads(reply.body)) == (
        200,
        {"jsonrpc": "2.0", "id": 7, "result": "0x10d4f"},
    )
    assert world.urls_called() == [A]
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}


@pytest.mark.parametrize(
    "failure",
    [
        failing(FailureKind.HTTP_STATUS, 500),
        failing(FailureKind.HTTP_STATUS, 503),
        failing(FailureKind.RATE_LIMITED, 429),
        failing(FailureKind.TIMEOUT),
        failing(FailureKind.TRANSPORT),
        failing(FailureKind.TOO_LARGE),
        raw(b"<html>definitely not json"),
        raw(b'{"jsonrpc":"2.0","id":"not-7","result":"0x1"}'),
    ],
)
def test_every_kind_of_failure_fails_over_to_the_next_route_and_bills_it(failure: object) -> None:
    # Failover alone: with hedging, a hedge would overtake the time-out (test_hedging.py).
    no_hedge = TailPolicy(hedge_max=0)
    world = scripted_world([(A, 100, failure), (B, 200, OK)], tail=no_hedge)  # type: ignore[list-item]
    reply = world.call(rpc(request_id=7))
    assert reply.status == 200
    assert json.loads(reply.body)["id"] == 7
    assert world.urls_called() == [A, B]
    assert world.cooling() == [A]
    assert world.metered() == {Scenario.FAILOVER: (1, 200)}


def test_a_429_then_success_is_a_failover_billed_at_the_serving_route() -> None:
    world = scripted_world([(A, 100, [failing(FailureKind.RATE_LIMITED, 429), OK]), (B, 300, OK)])
    assert world.call(rpc()).status == 200
    assert world.metered() == {Scenario.FAILOVER: (1, 300)}
    assert world.balance() == 10**9 - 300


def test_a_json_rpc_error_is_an_answer_not_a_failure() -> None:
    world = scripted_world([(A, 100, erroring(3, "execution reverted")), (B, 200, OK)])
    reply = world.call(rpc())
    assert _error(reply.body) == (3, "execution reverted")
    assert world.urls_called() == [A]
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}


@pytest.mark.parametrize(
    ("scripts", "status", "code", "scenario"),
    [
        (
            [failing(FailureKind.HTTP_STATUS, 502), raw(b"garbage")],
            424,
            RpcCode.ALL_NODES_FAILED,
            Scenario.ALL_FAILED,
        ),
        (
            [failing(FailureKind.RATE_LIMITED, 429), failing(FailureKind.RATE_LIMITED, 429)],
            429,
            RpcCode.ALL_NODES_ON_COOLDOWN,
            Scenario.RATE_LIMITED,
        ),
        (
            [failing(FailureKind.TIMEOUT), failing(FailureKind.TIMEOUT)],
            504,
            RpcCode.ALL_NODES_FAILED,
            Scenario.ALL_FAILED,
        ),
    ],
)
def test_when_no_route_answers_the_client_is_told_why_and_pays_nothing(
    scripts: list[object], status: int, code: RpcCode, scenario: Scenario
) -> None:
    world = scripted_world([(A, 100, scripts[0]), (B, 200, scripts[1])])  # type: ignore[list-item]
    reply = world.call(rpc())
    assert reply.status == status
    assert _error(reply.body)[0] == code
    assert world.metered() == {scenario: (1, 0)}
    assert world.balance() == 10**9


def test_time_outs_share_the_calls_deadline() -> None:
    timeout = failing(FailureKind.TIMEOUT)
    world = scripted_world(
        [(A, 1, timeout), (B, 1, timeout), (C, 1, OK)],
        attempt_timeout_s=10,
        deadline_s=15,
        tail=TailPolicy(hedge_max=0, timeout_ceiling_s=10),  # one attempt at a time
    )
    reply = world.call(rpc())
    # A takes its 10 s; B gets the 5 s left; C is not tried once the deadline has passed.
    assert [command.timeout_s for command in world.executor.forwarded] == [10, 5]
    assert reply.status == 504


def test_time_the_server_spent_before_the_handover_is_taken_off_the_deadline() -> None:
    timeout = failing(FailureKind.TIMEOUT)
    world = scripted_world(
        [(A, 1, timeout), (B, 1, OK)],
        attempt_timeout_s=10,
        deadline_s=15,
        tail=TailPolicy(hedge_max=0, timeout_ceiling_s=10),
    )
    # A repeat of the call waited 8 s on its node: 7 s are left, which A's attempt takes.
    reply = world.call(rpc(), waited_s=8.0)
    assert [command.timeout_s for command in world.executor.forwarded] == [7]
    assert reply.status == 504
    assert world.metered() == {Scenario.ALL_FAILED: (1, 0)}


def test_a_failover_to_a_dearer_node_holds_the_difference_first() -> None:
    # 400 covers A's 100, held, and the 200 more B costs: B is tried and charged.
    world = scripted_world(
        [(A, 100, failing(FailureKind.HTTP_STATUS, 503)), (B, 300, OK)], balance_nano=400
    )
    reply = world.call(rpc())
    assert (reply.status, world.urls_called()) == (200, [A, B])
    assert world.metered() == {Scenario.FAILOVER: (1, 300)}
    assert world.balance() == 100  # charged B's price; nothing is left held


def test_a_dearer_node_the_balance_cannot_cover_is_not_tried_and_the_call_is_402() -> None:
    # 200 covers A's 100, not B's 300: once A fails, B would take the balance below zero.
    world = scripted_world(
        [(A, 100, failing(FailureKind.HTTP_STATUS, 503)), (B, 300, OK)], balance_nano=200
    )
    reply = world.call(rpc())
    assert (reply.status, _error(reply.body)[0]) == (402, RpcCode.INSUFFICIENT_CREDITS)
    assert "routes left cost more than the balance" in _error(reply.body)[1]
    assert world.urls_called() == [A]
    assert world.metered() == {Scenario.INSUFFICIENT_CREDITS: (1, 0)}
    assert world.balance() == 200  # A's failure cost nothing, and nothing is left held


def test_a_dearer_node_cooling_down_is_skipped_as_before_not_402() -> None:
    # B failed a moment ago and cools down: not trying it has nothing to do with the balance.
    world = scripted_world(
        [
            (A, 100, [OK, failing(FailureKind.HTTP_STATUS, 503)]),
            (B, 300, failing(FailureKind.HTTP_STATUS, 503)),
        ],
        balance_nano=10**9,
    )
    world.deps.cooldowns.failed(world.nodes[1].node_id)
    world.deps.credits.replace_stored({1: 200})
    reply = world.call(rpc())
    assert reply.status == 200
    reply = world.call(rpc())  # A fails now; B cools down
    assert reply.status == 424
    assert world.urls_called() == [A, A]
    assert world.balance() == 100


def test_a_request_the_nodes_rejected_is_not_402_for_a_dearer_route_skipped() -> None:
    # A found the request at fault (HTTP 400): topping up for B would not help the caller.
    world = scripted_world(
        [(A, 100, failing(FailureKind.HTTP_STATUS, 400)), (B, 300, OK)], balance_nano=200
    )
    reply = world.call(rpc())
    assert reply.status == 424
    assert "rejected this request (HTTP 400)" in _error(reply.body)[1]
    assert world.urls_called() == [A]


def test_a_failed_node_is_skipped_while_it_cools_down_then_tried_again() -> None:
    world = scripted_world([(A, 100, failing(FailureKind.HTTP_STATUS, 503)), (B, 200, OK)])
    world.call(rpc())
    world.call(rpc())  # A cools down: not tried at all
    assert world.urls_called() == [A, B, B]
    world.clock.now += 1.01  # the first cooldown is 1 s
    world.call(rpc())
    assert world.urls_called() == [A, B, B, A, B]
    assert world.metered() == {Scenario.FAILOVER: (3, 600)}


def test_when_every_node_is_cooling_the_answer_is_429_and_no_node_is_called() -> None:
    world = scripted_world([(A, 100, failing(FailureKind.HTTP_STATUS, 500))])
    world.call(rpc())
    reply = world.call(rpc())
    assert (reply.status, _error(reply.body)[0]) == (429, RpcCode.ALL_NODES_ON_COOLDOWN)
    assert world.urls_called() == [A]
    assert world.metered() == {Scenario.ALL_FAILED: (1, 0), Scenario.RATE_LIMITED: (1, 0)}


def test_a_node_at_its_rate_limit_is_skipped_not_called() -> None:
    world = scripted_world([(A, 100, OK), (B, 200, OK)], node_rate_limit=1)
    world.call(rpc())
    world.call(rpc())
    assert world.urls_called() == [A, B]  # A's one call per second is spent
    assert world.metered() == {Scenario.FIRST_CHOICE: (1, 100), Scenario.FAILOVER: (1, 200)}


def test_cooldown_backs_off_exponentially_up_to_the_cap_and_success_clears_it() -> None:
    cooldowns = MemoryCooldowns(base_s=1, max_s=10, clock=lambda: 0.0)
    assert [cooldowns.failed(1) for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    assert not cooldowns.available(1)
    cooldowns.succeeded(1)
    assert cooldowns.available(1)


def test_when_a_pause_ends_one_call_tries_the_node_and_the_others_wait_for_its_outcome() -> None:
    now = [0.0]
    cooldowns = MemoryCooldowns(base_s=1, max_s=10, clock=lambda: now[0])
    cooldowns.failed(1)
    now[0] = 1.0
    assert cooldowns.take(1)  # the trial
    assert not cooldowns.take(1)  # the others wait for it ...
    assert not cooldowns.available(1)
    now[0] = 2.0
    assert cooldowns.take(1)  # ... a base pause at most: the trial said nothing, another goes
    cooldowns.failed(1)  # it failed: paused longer (the second failure: 2 s)
    now[0] = 3.5
    assert not cooldowns.take(1)
    now[0] = 4.0
    assert cooldowns.take(1)
    cooldowns.succeeded(1)  # it answered: every call may try it
    assert cooldowns.take(1)
    assert cooldowns.take(1)


def test_cooldowns_cannot_overflow_however_long_a_node_fails() -> None:
    cooldowns = MemoryCooldowns(base_s=1, max_s=10, clock=lambda: 0.0)
    for _ in range(5000):
        cooldowns.failed(2)
    assert cooldowns.failed(2) == 10


@pytest.mark.parametrize(
    ("body", "ok"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":"0x1"}', True),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"reverted"}}', True),
        (b'{"jsonrpc":"2.0","id":8,"result":"0x1"}', False),
        (b'{"jsonrpc":"2.0","id":7}', False),
        (b'{"jsonrpc":"2.0","id":7,"error":"text"}', False),
        (b'{"id":7,"result":1}', False),
        (b"[1]", False),
        (b"not json", False),
    ],
)
def test_only_a_json_rpc_answer_with_the_requests_id_counts(body: bytes, ok: bool) -> None:
    assert answers_call(body, 7) is ok


@pytest.mark.parametrize(
    ("request_id", "answer_id", "ok"),
    [
        (2**63 - 1, b"9223372036854775807", True),
        (2**63 - 1, b"9223372036854775806", False),
        (-(2**63), b"-9223372036854775808", True),
        (-(2**63), b"-9223372036854775809", False),  # one past the 64-bit edge
        (7, b"1e300", False),
        (7, b"7.0", False),
    ],
)
def test_ids_at_the_64_bit_edges_are_compared_exactly(
    request_id: int, answer_id: bytes, ok: bool
) -> None:
    body = b'{"jsonrpc":"2.0","id":' + answer_id + b',"result":"0x1"}'
    assert answers_call(body, request_id) is ok


@pytest.mark.parametrize(
    ("body", "verdict"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":null}', Verdict.ANSWER),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"reverted"}}', Verdict.ANSWER),
        (b'{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"x"}}', Verdict.CALLERS_FAULT),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600}}', Verdict.CALLERS_FAULT),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700}}', Verdict.CALLERS_FAULT),
        (b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"x"}}', Verdict.REJECTED),
        (b'{"jsonrpc":"2.0","id":8,"error":{"code":-32600,"message":"x"}}', Verdict.NOT_AN_ANSWER),
        (b'{"jsonrpc":"2.0","id":null,"result":"0x1"}', Verdict.NOT_AN_ANSWER),
    ],
)  # fmt: skip
def test_a_nodes_answer_is_judged_by_its_id_and_error_code(body: bytes, verdict: Verdict) -> None:
    assert judge_answer(body, 7)[0] is verdict


@pytest.mark.parametrize("result", ["0x2", "0x", "1", 1, None])
def test_an_eth_chain_id_answer_naming_another_chain_fails_over_and_cools_the_node_down(
    result: object,
) -> None:
    world = scripted_world(
        [(A, 100, answering(result)), (B, 200, answering("0x1"))], methods=("eth_chainId",)
    )
    reply = world.call(rpc("eth_chainId", [], 3))
    assert json.loads(reply.body)["result"] == "0x1"  # the world's chain is 1
    assert world.cooling() == [A]
    assert world.metered() == {Scenario.FAILOVER: (1, 200)}


def test_a_429_because_every_route_is_held_back_says_when_the_first_frees_up() -> None:
    """Retry-After: the soonest a route held back (cooling down, or at its rate limit) is free."""
    world = scripted_world([(A, 100, failing(FailureKind.RATE_LIMITED, 429))])
    refused = world.call(rpc())
    assert refused.status == 429
    assert dict(refused.headers)["retry-after"] == "1"  # the node's first cooldown: 1 s
    world.clock.now += 0.4
    again = world.call(rpc())  # still cooling: 0.6 s left, said in whole seconds
    assert (again.status, dict(again.headers)["retry-after"]) == (429, "1")


def test_a_route_at_its_rate_limit_says_when_it_refills() -> None:
    """1 call per second: the call's time slot (0.1 s wide) leaves the window 1 to 1.1 s later,
    said in whole seconds, rounded up."""
    world = scripted_world([(A, 100, OK)], node_rate_limit=1)
    assert world.call(rpc()).status == 200
    refused = world.call(rpc())
    assert (refused.status, dict(refused.headers)["retry-after"]) == (429, "2")
    world.clock.now += 1.05
    batch = world.call([rpc(request_id=1), rpc(request_id=2)])
    assert (batch.status, dict(batch.headers)["retry-after"]) == (429, "1")


def test_a_failed_attempt_gives_its_price_back_to_the_plans_credit_limit() -> None:
    """Each plan allows two calls' price a minute. A's failure spends none of it (a provider
    bills answers), so once its cooldown is over A answers two calls; the call after them finds
    A's budget spent and goes to B."""
    world = scripted_world(
        [(A, 100, [failing(FailureKind.HTTP_STATUS, 502), OK, OK]), (B, 101, OK)],
        plan_credits_per_minute=202,
    )
    assert world.call(rpc()).status == 200
    assert world.urls_called() == [A, B]
    world.clock.now += 1.5  # A's first cooldown (1 s) is over
    for _ in range(3):
        assert world.call(rpc()).status == 200
    assert world.urls_called() == [A, B, A, A, B]


def test_an_attempt_the_deadline_stops_before_it_is_sent_gives_its_limits_back() -> None:
    """A hangs until the call's deadline has passed; B's limits were taken for the next attempt,
    which is then never sent: B's plan (one call's price a minute) still has it for the next
    call."""
    world = scripted_world(
        [(A, 100, [hanging()]), (B, 101, OK)],
        plan_credits_per_minute=101,
        deadline_s=5,
        tail=TailPolicy(hedge_max=0, timeout_ceiling_s=10),
    )
    assert world.call(rpc()).status == 504
    assert world.urls_called() == [A]
    assert world.call(rpc()).status == 200  # A cools down: B
    assert world.urls_called() == [A, B]


def test_a_routes_limits_are_its_own_even_where_another_route_was_before() -> None:
    """The attempt stage keeps each route's limits by the route's identity; a route of an older
    snapshot, gone since, may have left an entry under an id a new route now has."""
    world = scripted_world([(A, 100, OK)])
    attempt = next(s for s in world.service.keyed.call_stages if isinstance(s, Attempt))
    assert world.call(rpc()).status == 200
    [route] = world.service.snapshot.routes.routes(CHAIN, METHOD)
    spent = Bucket("plan-credits:gone", 1, 60, 10**9)  # would refuse any call
    attempt._buckets[id(route)] = (dataclasses.replace(route), [spent])
    assert world.call(rpc()).status == 200


def test_an_answer_that_is_not_a_429_says_nothing_of_retrying() -> None:
    world = scripted_world([(A, 100, failing(FailureKind.HTTP_STATUS, 503)), (B, 200, OK)])
    assert "retry-after" not in dict(world.call(rpc()).headers)
    served_and_refused = world.call([rpc(request_id=1), rpc(request_id=2)])
    assert served_and_refused.status == 200
    assert "retry-after" not in dict(served_and_refused.headers)
