"""Repeated forwards (docs/router.md, "Repeated forwards"): a call the pipeline forwarded to its
first node, answered at the first try with a `result`, is sent again by the native server itself
when the same request comes again, and answered once Python has billed it exactly as the pipeline
would have; whatever changed since, or failed, goes to the pipeline, and a failure is never billed.

Which calls the pipeline hands over, and what settling a group of repeats does, are told with the
scripted executor and a real native memo; the repeats themselves with a served native router in
front of a real anvil node (through the fault-injecting upstream, which counts what each node is
asked). The memo's matching of requests is the replays' (test_replay_memo.py)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import func, select

from chainrouter.domain.capabilities import Capabilities
from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work
from chainrouter.domain.routing import RouteTable
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.router.contract import FailureKind, HttpRequest
from chainrouter.router.executors.native import load_native_module
from chainrouter.router.flights import Flights, Landed
from chainrouter.router.forwards import Forwards
from chainrouter.router.http_face import RouterFace
from chainrouter.router.journal import UsageJournal
from chainrouter.router.replay import Replays
from chainrouter.router.runtime import RouterRuntime
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from chainrouter.testing.scripted import Script, answering, erroring, failing, slow
from tests.anvil import CHAIN_A, AnvilNodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.scripted_world import CHAIN, CUSTOMER, ScriptedWorld, rpc, scripted_world
from tests.router.test_server import Served, launch_router

A, B = "http://a.node", "http://b.node"
HEAD = "eth_blockNumber"
BALANCE = "eth_getBalance"
ACCOUNT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
OTHERS = "eth_call eth_getBlockByNumber eth_chainId eth_sendRawTransaction eth_getLogs"
UNKNOWN = "eth_sendUserOperation"  # a bundler's: the router does not know it, a write maybe
METHODS = (HEAD, BALANCE, UNKNOWN, *OTHERS.split())
JSON = "application/json"
CALL = rpc(HEAD, [])
BALANCE_CALL = rpc(BALANCE, [ACCOUNT, "latest"])
FIRST = 1  # the token of the first entry handed to a memo (its tokens count from 1)


def _world(*nodes: tuple[str, int, Script], **options: Any) -> ScriptedWorld:
    options.setdefault("heads", {url: 100 for url, _, _ in nodes})
    return scripted_world(list(nodes), methods=METHODS, **options)


OK = answering("0x64")  # block 100, the head every scripted node is at


def _one(**options: Any) -> ScriptedWorld:
    """One node, A, at price 100."""
    return _world((A, 100, OK), **options)


def _usually(world: ScriptedWorld, url: str, seconds: float) -> None:
    """The node at `url` has recently answered 20 quick calls in `seconds` each."""
    node_id = next(node.node_id for node in world.nodes if node.url == url)
    for _ in range(20):
        world.deps.health.recent.observe(node_id, Work.QUICK, seconds)


# Which calls the pipeline hands over.


def test_a_call_its_first_node_serves_at_once_is_handed_over_with_route_and_time_out() -> None:
    body = json.dumps(rpc(HEAD, [], 5)).encode()
    forward = _one(attempt_timeout_s=7.0).call(body).forwardable
    assert forward is not None
    assert (forward.route.node.url, forward.route.price.cost_nano) == (A, 100)
    assert (forward.customer_id, forward.key_id, forward.chain_id) == (CUSTOMER, 1, CHAIN)
    assert (forward.method, forward.work, forward.at_head) == (HEAD, Work.QUICK, True)
    assert forward.sent == body  # the node is sent the caller's bytes, and so is a repeat
    assert (forward.within_s, forward.at_hedge) == (7.0, False)  # one route: the time-out
    assert (forward.flight, forward.bypass_credit_check) == (None, False)  # not coalesced


def test_a_call_after_a_failed_repeat_hands_over_a_fresh_calls_time_out_not_what_was_left() -> None:
    # The repeat before it waited 5 s of the call's 10: this attempt had 5 s, later repeats get
    # the attempt's whole 7.
    world = _one(attempt_timeout_s=7.0, deadline_s=10.0)
    forward = world.call(rpc(HEAD, []), waited_s=5.0).forwardable
    assert forward is not None
    assert [command.timeout_s for command in world.executor.forwarded] == [5.0]
    assert forward.within_s == 7.0


def test_a_raced_read_is_repeated_within_its_hedge_delay_not_the_attempts_time_out() -> None:
    world = _world((A, 100, OK), (B, 300, OK))
    _usually(world, A, 0.020)  # its p95: the second lane would start after 20 ms
    forward = world.call(rpc(HEAD, [])).forwardable
    assert forward is not None
    assert forward.within_s == pytest.approx(0.020)
    assert forward.at_hedge


def test_a_coalesced_call_is_handed_over_with_the_flight_identical_calls_share() -> None:
    forward = _one(coalesce=True).call(rpc(HEAD, [])).forwardable
    assert forward is not None
    assert forward.flight  # its repeats lead or join flights, as the pipeline's calls do


def _method_limited(world: ScriptedWorld) -> ScriptedWorld:
    """`world` with every price of its plans limited to 1000 calls a minute."""
    snapshot = world.service.snapshot
    table = snapshot.routes
    prices = {
        key: dataclasses.replace(price, rate_limit=1000, rate_limit_interval_s=60)
        for key, price in table.prices.items()
    }
    routes = RouteTable(table.nodes_by_chain, table.plans, prices, table.methods_by_plan)
    world.service.install(dataclasses.replace(snapshot, routes=routes))
    return world


def _logs(first: int, last: int) -> dict[str, Any]:
    return rpc("eth_getLogs", [{"fromBlock": hex(first), "toBlock": hex(last)}])


def _split_world() -> ScriptedWorld:
    narrow = {A: Capabilities(logs_max_range=10)}
    return _world((A, 100, answering([])), capabilities=narrow)


def _request_logged() -> ScriptedWorld:
    world = _one()
    world.service.keyed.keep_requests = True  # as RpcService does with the request log on
    return world


NOT_HANDED_OVER: dict[str, tuple[Callable[[], ScriptedWorld], Any]] = {
    "a failover": (lambda: _world((A, 100, failing(FailureKind.TRANSPORT)), (B, 300, OK)), CALL),
    "a hedge won by a later lane": (lambda: _usual_hedge(slow(5.0, OK)), CALL),
    "a first lane that won once a hedge had started": (
        lambda: _usual_hedge(slow(0.030, OK), slow(1.0, OK)),
        CALL,
    ),
    "a first lane that won once a hedge had failed": (
        lambda: _usual_hedge(slow(0.030, OK), failing(FailureKind.TRANSPORT)),
        CALL,
    ),
    "a key with a rate limit of its own": (lambda: _one(key_rate_limit=1000), CALL),
    "a node with a rate limit": (lambda: _one(node_rate_limit=1000), CALL),
    "a plan with a credit rate limit": (lambda: _one(plan_credits_per_minute=10**9), CALL),
    "a method with a rate limit": (lambda: _method_limited(_one()), CALL),
    "an answer the cache keeps": (
        lambda: _world((A, 100, answering({"number": hex(50)})), cache_bytes=1 << 20),
        rpc("eth_getBlockByNumber", [hex(50), False]),  # final: over 10 blocks behind the head
    ),
    "a batch": (_one, [CALL]),
    "eth_chainId": (lambda: _world((A, 100, answering(hex(CHAIN)))), rpc("eth_chainId", [])),
    "a write": (_one, rpc("eth_sendRawTransaction", ["0x02f8"])),
    "a method the router does not know, which may be a write": (_one, rpc(UNKNOWN, [ACCOUNT])),
    "a split eth_getLogs": (_split_world, _logs(1, 30)),
    "the request log on": (_request_logged, CALL),
}


def _usual_hedge(first: Script, second: Script | None = None) -> ScriptedWorld:
    """A race whose second lane starts at the first node's usual 20 ms."""
    world = _world((A, 100, first), (B, 300, second or OK))
    _usually(world, A, 0.020)
    return world


@pytest.mark.parametrize("case", list(NOT_HANDED_OVER))
def test_a_call_is_answered_but_not_handed_over_for(case: str) -> None:
    make, payload = NOT_HANDED_OVER[case]
    reply = make().call(payload)
    assert reply.status == 200  # served: only not handed over
    assert reply.forwardable is None


def test_an_unsplit_eth_getlogs_and_an_unkept_call_beside_the_cache_are_handed_over() -> None:
    """The counterparts of the cases above that could be mistaken for them."""
    assert _split_world().call(_logs(1, 5)).forwardable is not None
    assert _one(cache_bytes=1 << 20).call(CALL).forwardable is not None


def test_a_free_tier_call_is_never_handed_over() -> None:
    reply = _one().public(CALL)
    assert (reply.status, reply.forwardable) == (200, None)


# Handed to a real native memo through the face, as a native worker's face hands it.


class _Repeating:
    """`world` behind the face of a native worker (RouterRuntime.replay_into), its memo real."""

    def __init__(self, world: ScriptedWorld) -> None:
        deps = world.deps
        unused: Any = None  # the sync, the limiter and storage: nothing here reads them
        parts = (unused, deps.health, deps.capabilities, None, unused, deps.cooldowns, unused)
        runtime = RouterRuntime(world.service, *parts, metrics=deps.metrics)
        self.memo = Replays.new_memo(load_native_module(), 1 << 20, 60.0)
        runtime.replay_into(self.memo)
        assert runtime.forwards is not None
        self.world, self.forwards = world, runtime.forwards
        executor: Any = world.executor  # the face reads only its name
        self.face: RouterFace = runtime.face([], executor)

    def request(self, payload: Any, call_id: Any = 1) -> HttpRequest:
        body = json.dumps({**payload, "id": call_id}).encode()
        path = f"/rpc/{CHAIN}/{self.world.key}"
        return HttpRequest("POST", path, None, None, None, JSON, "::1", body)

    def serve(self, payload: Any) -> int:
        """Serve `payload` through the pipeline; the HTTP status."""
        return self.world.executor.run(self.face.respond(self.request(payload))).status

    def holds(self, payload: Any) -> bool:
        """Whether the memo would repeat `payload` (under another id)."""
        asked = self.request(payload, "another id")
        fields = (asked.path, asked.origin, asked.referer, asked.content_type, asked.body)
        return bool(self.memo.holds_forward(*fields))

    def settled(self, *repeats: tuple[float, bool, int | None]) -> list[bool]:
        """Settle repeats the server sent to the node of the first forward handed over, each
        (elapsed_s, answered, head): none joined another, no pipeline call follows them."""
        return self.forwards.settle([(FIRST, *repeat, 0, None, None) for repeat in repeats])


def test_an_error_answer_is_never_held_for_repeating_though_the_pipeline_bills_it() -> None:
    reverted = erroring(3, "execution reverted")
    call = rpc("eth_call", [{"to": ACCOUNT, "data": "0x"}, "latest"])
    repeating = _Repeating(_world((A, 100, [reverted, answering("0x01")])))
    assert repeating.serve(call) == 200
    assert repeating.world.metered() == {Scenario.FIRST_CHOICE: (1, 100)}  # an answer, billed
    assert (repeating.forwards.held(), repeating.holds(call)) == (0, False)
    repeating.serve(call)  # its node now answers with a result
    assert (repeating.forwards.held(), repeating.holds(call)) == (1, True)


# Settling: what the server's `settle` does with repeats whose nodes have answered.

PRICE = 100


def _granted(world: ScriptedWorld, call: dict[str, Any] = CALL) -> _Repeating:
    """`world` with its first node's forward of `call` handed over, its usage so far taken."""
    repeating = _Repeating(world)
    assert repeating.serve(call) == 200
    assert repeating.forwards.held() == 1
    world.deps.meter.take()
    return repeating


def _rows(world: ScriptedWorld) -> list[tuple[str, int, int, int]]:
    """The meter's rows now: (scenario, plan, calls, nano-credits)."""
    rows = world.deps.meter.take().rows
    return [(key[4], key[6], count, spent) for key, (count, spent) in rows.items()]


def test_a_group_of_repeats_of_one_forward_is_charged_and_metered_as_one_row(
    tmp_path: Path,
) -> None:
    world = _world((A, PRICE, OK), (B, 300, OK))
    repeating = _granted(world)
    assert world.deps.health.latency_ms[1] == 0.0  # the scripted answer took no time
    journal = world.deps.meter.journal = UsageJournal(tmp_path, "router", "db")
    before = world.balance()
    group = [(0.001, True, 100), (0.002, True, 100), (0.003, True, 100)]
    assert repeating.settled(*group) == [True] * 3
    assert world.balance() == before - 3 * PRICE
    assert _rows(world) == [(Scenario.FIRST_CHOICE, 1, 3, 3 * PRICE)]
    lines = [orjson.loads(line) for line in journal.path.read_bytes().splitlines()]
    metered = [line["u"] for line in lines if "u" in line]
    assert [(u[6], u[8]) for u in metered] == [(3 * PRICE, 3)]  # one line: credits, calls
    metrics = world.deps.metrics
    assert metrics.requests[("keyed", 200)] == 1 + 3
    assert metrics.attempts()[(1, "answered")] == 1 + 3
    assert world.deps.health.latency_ms[1] > 0.0  # the repeats' times are the node's
    assert metrics.repeated == {(CHAIN, HEAD): 3}  # chainrouter_forwards_repeated_total
    journal.close(remove=True)


STANDING_LOST = {  # of A, node 1
    "a failure on record": lambda world: world.deps.cooldowns.failed(1),
    # B is checked 50 blocks past A's head of 100: A is more than 10 behind the chain's.
    "out of sync": lambda world: world.deps.health.record_head(
        world.service.snapshot.routes.nodes_by_chain[CHAIN][1], 100 + 50
    ),
}


@pytest.mark.parametrize("case", list(STANDING_LOST))
def test_a_node_whose_standing_changed_is_left_to_the_pipeline_and_the_forward_dropped(
    case: str,
) -> None:
    world = _world((A, PRICE, OK), (B, 300, OK))
    repeating = _granted(world)
    before = world.balance()
    STANDING_LOST[case](world)
    assert repeating.settled((0.001, True, None), (0.001, True, None)) == [False, False]
    assert (world.balance(), _rows(world), repeating.forwards.held()) == (before, [], 0)


def test_a_node_whose_first_health_check_is_still_out_is_left_to_the_pipeline() -> None:
    world = _world((A, PRICE, OK), (B, 300, OK), heads={})
    checks = []  # just started, as at a router's start: in flight until closed
    for node in world.service.snapshot.routes.nodes_by_chain[CHAIN]:
        checks.append(world.deps.health.check(node))
        checks[-1].send(None)  # up to its first probe
    assert set(world.deps.health.first_check_out) == {1, 2}
    repeating = _granted(world)  # no node has answered its check: the first is tried first
    before = world.balance()
    assert repeating.settled((0.001, True, None)) == [False]
    assert (world.balance(), _rows(world), repeating.forwards.held()) == (before, [], 0)
    for check in checks:
        check.close()


def test_credits_for_part_of_a_group_bill_that_part_and_leave_the_rest_to_the_pipeline() -> None:
    world = _world((A, PRICE, OK))
    repeating = _granted(world)
    spent = 10**9 - world.balance()
    world.deps.credits.replace_stored({CUSTOMER: spent + 2 * PRICE + PRICE // 2})
    answered = (0.001, True, None)
    assert repeating.settled(*[answered] * 4) == [True, True, False, False]
    assert world.balance() == PRICE // 2
    assert _rows(world) == [(Scenario.FIRST_CHOICE, 1, 2, 2 * PRICE)]
    assert repeating.forwards.held() == 0  # the next one is the pipeline's: 402
    assert repeating.serve(CALL) == 402


def test_a_key_that_bypasses_the_credit_check_is_billed_past_zero() -> None:
    world = _world((A, PRICE, OK), balance_nano=PRICE, bypass_credit_check=True)
    repeating = _granted(world)
    assert world.balance() == 0
    assert repeating.settled(*[(0.001, True, None)] * 3) == [True] * 3
    assert world.balance() == -3 * PRICE
    assert _rows(world) == [(Scenario.FIRST_CHOICE, 1, 3, 3 * PRICE)]


@pytest.mark.parametrize(
    ("raced", "elapsed_s", "counted"),
    [
        (False, 0.5, False),  # failed before its time-out (the attempt's 10 s here)
        (False, 10.0, False),  # timed out as an attempt: as the pipeline's own time-outs
        (True, 0.001, False),  # failed within its hedge delay
        (True, 0.5, True),  # cut off at its hedge delay (20 ms), where a hedge would go
    ],
)
def test_an_unanswered_repeat_is_never_billed_and_ends_the_forward(
    raced: bool, elapsed_s: float, counted: bool
) -> None:
    """A repeat cut off at its hedge delay counts, as that time, among the node's answer
    times; any other failure is the pipeline's to judge again."""
    world = _usual_hedge(OK) if raced else _world((A, PRICE, OK))
    repeating = _granted(world)
    before, latency = world.balance(), world.deps.health.latency_ms[1]
    assert repeating.settled((elapsed_s, False, None)) == [False]
    assert (world.balance(), _rows(world), repeating.forwards.held()) == (before, [], 0)
    assert (world.deps.health.latency_ms[1] != latency) is counted
    assert repeating.settled((0.001, True, 100)) == [False]  # the pipeline's from now on


@pytest.mark.parametrize("failed_at", [0, 1, 2])
def test_a_failed_repeat_leaves_the_answered_ones_of_its_group_billed_wherever_it_comes(
    failed_at: int,
) -> None:
    """Each repeat of a group is a request of its own the node answered or not: the answered
    ones are given, and billed, whichever of them the server happened to list first."""
    world = _world((A, PRICE, OK))
    repeating = _granted(world)
    group: list[tuple[float, bool, int | None]] = [(0.001, True, None)] * 3
    group[failed_at] = (0.5, False, None)
    verdicts = [True] * 3
    verdicts[failed_at] = False
    assert repeating.settled(*group) == verdicts
    assert _rows(world) == [(Scenario.FIRST_CHOICE, 1, 2, 2 * PRICE)]
    assert repeating.forwards.held() == 0  # the failure ended the forward all the same


def test_a_repeat_that_joined_one_in_flight_is_billed_at_the_cache_price() -> None:
    world = _world((A, PRICE, OK), coalesce=True, cache_prices={"*": 7})
    repeating = _granted(world)
    sent, joined = (
        (FIRST, 0.001, True, 100, 0, None, None),
        (FIRST, 0.0, True, 100, FIRST, None, None),
    )
    assert repeating.forwards.settle([sent, joined]) == [True, True]
    assert sorted(_rows(world)) == [(Scenario.CACHE, 0, 1, 7), (Scenario.FIRST_CHOICE, 1, 1, PRICE)]
    assert world.deps.metrics.repeated == {(CHAIN, HEAD): 1}  # one reached the node
    assert world.deps.flights is not None
    assert world.deps.flights.coalesced == {(CHAIN, HEAD): 1}


def test_a_read_at_the_head_is_not_repeated_from_a_node_behind_the_head_its_key_has_seen() -> None:
    world = _world((A, PRICE, OK), (B, 300, OK))
    repeating = _granted(world, BALANCE_CALL)
    seen_heads = world.deps.seen_heads
    seen_heads.saw(1, CHAIN, 105, None)  # no node is known to be at 105: the order stands
    assert repeating.settled((0.001, True, None)) == [True]
    seen_heads.saw(1, CHAIN, 105, world.service.snapshot.routes.nodes_by_chain[CHAIN][1])
    assert world.deps.health.chain_head(CHAIN) == 105  # B is at it; A, at 100, is behind
    assert repeating.settled((0.001, True, None)) == [False]
    assert repeating.forwards.held() == 0


def test_a_read_at_the_head_is_repeated_while_none_of_its_routes_is_at_the_keys_head() -> None:
    """As the pipeline decides (consistent_head.NotBehindSeen): the order stands while no route
    of the call is known to be at the key's head, though a node of another plan is. Refused,
    each such request reaches the node twice: the repeat, then the pipeline's own attempt."""
    world = _world((A, PRICE, OK), (B, 300, OK))
    table = world.service.snapshot.routes  # B's plan prices eth_blockNumber only
    prices = [p for p in table.prices.values() if (p.plan_id, p.method) != (2, BALANCE)]
    routes = RouteTable.build(list(table.nodes_by_chain[CHAIN]), table.plans.values(), prices)
    world.service.install(dataclasses.replace(world.service.snapshot, routes=routes))
    repeating = _granted(world, BALANCE_CALL)
    world.deps.seen_heads.saw(1, CHAIN, 105, table.nodes_by_chain[CHAIN][1])  # B is at 105
    world.call(BALANCE_CALL)
    assert world.urls_called()[-1] == A  # the pipeline's choice stands
    assert repeating.settled((0.001, True, None)) == [True]


def test_a_head_older_than_the_one_its_key_has_seen_is_left_to_the_pipeline() -> None:
    world = _world((A, PRICE, OK))
    repeating = _granted(world)  # the key has seen 100, A's answer
    assert repeating.settled((0.001, True, 99), (0.001, True, 100)) == [False, True]
    assert _rows(world) == [(Scenario.FIRST_CHOICE, 1, 1, PRICE)]


def test_the_highest_head_of_a_group_raises_the_keys_seen_head_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    world = _world((A, PRICE, OK))
    repeating = _granted(world)
    seen_heads = world.deps.seen_heads
    saw = seen_heads.saw
    raised: list[int] = []

    def recorded(key_id: int, chain_id: int, block: int, node: Any) -> None:
        raised.append(block)
        saw(key_id, chain_id, block, node)

    monkeypatch.setattr(seen_heads, "saw", recorded)
    assert seen_heads.seen(1, CHAIN) == 100  # the pipeline's answer
    group = [(0.001, True, 101), (0.001, True, 103), (0.001, True, 102)]
    assert repeating.settled(*group) == [True] * 3
    assert (raised, seen_heads.seen(1, CHAIN), world.deps.health.node_head(1)) == ([103], 103, 103)
    repeating.settled((0.001, True, 103))
    assert raised == [103]  # nothing past what the key has seen: nothing written


# Coalescing across the two: pipeline calls follow a repeat leading their flight, and the
# server leaves repeats to a pipeline call leading theirs (router/flights.py).


def _follower() -> concurrent.futures.Future[Landed | None]:
    future: concurrent.futures.Future[Landed | None] = concurrent.futures.Future()
    future.set_running_or_notify_cancel()
    return future


def test_pipeline_calls_following_a_billed_repeat_take_its_result_and_its_head() -> None:
    repeating = _granted(_one(coalesce=True))
    followers = [_follower(), _follower()]
    answer = b'{"jsonrpc":"2.0","id":9,"result":"0x65"}'
    repeat = (FIRST, 0.001, True, 101, 0, answer, followers)
    assert repeating.forwards.settle([repeat]) == [True]
    landed = [future.result(timeout=0) for future in followers]
    assert (
        landed[0] == landed[1] == Landed(Scenario.FIRST_CHOICE, 200, b'"result":"0x65"', None, 101)
    )


FOLLOWED_BUT_NOT_BILLED = {
    "the node gave no plain answer": (FIRST, 0.001, False, None, 0, None),
    "the forward was forgotten": (
        FIRST + 1,
        0.001,
        True,
        101,
        0,
        b'{"jsonrpc":"2.0","id":9,"result":"0x65"}',
    ),
}


@pytest.mark.parametrize("case", list(FOLLOWED_BUT_NOT_BILLED))
def test_pipeline_calls_following_a_repeat_not_billed_are_let_go_to_be_attempted(case: str) -> None:
    repeating = _granted(_one(coalesce=True))
    follower = _follower()
    assert repeating.forwards.settle([(*FOLLOWED_BUT_NOT_BILLED[case], [follower])]) == [False]
    assert follower.result(timeout=0) is None  # as a leader cut short: attempted on its own


def test_followers_are_let_go_even_when_billing_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    world = _one(coalesce=True)
    repeating = _granted(world)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in billing")

    monkeypatch.setattr(Forwards, "_charge", broken)
    follower, before = _follower(), world.balance()
    answer = b'{"jsonrpc":"2.0","id":9,"result":"0x65"}'
    assert repeating.forwards.settle([(FIRST, 0.001, True, 101, 0, answer, [follower])]) == [False]
    assert follower.result(timeout=0) is None  # never left waiting
    assert world.balance() == before  # nothing of it was charged without being metered


class _ServerFlights:
    """A native server's flights as the pipeline's see them: one repeat leading `repeating`."""

    def __init__(self, repeating: str | None = None) -> None:
        self.repeating = repeating
        self.calls: list[tuple[str, str]] = []
        self.followers: list[Any] = []

    def flying(self, *, flight: str) -> None:
        self.calls.append(("flying", flight))

    def landed(self, *, flight: str) -> None:
        self.calls.append(("landed", flight))

    def follow(self, *, flight: str, future: Any) -> bool:
        if flight != self.repeating:
            return False
        self.followers.append(future)
        return True


def test_a_pipeline_call_leading_a_flight_tells_the_server_until_it_lands() -> None:
    flights, server = Flights(), _ServerFlights()
    flights.native = server
    flight, leads = flights.lead_or_join("k", None, False)
    joined, joins = flights.lead_or_join("k", None, False)
    assert (leads, joins, joined is flight) == (True, False, True)
    flights.land("k", flight, None)
    assert server.calls == [("flying", "k"), ("landed", "k")]  # once: the joiner leads nothing


def test_a_pipeline_call_of_a_flight_a_repeat_leads_follows_the_repeat() -> None:
    flights, server = Flights(), _ServerFlights(repeating="k")
    flights.native = server
    flight, leads = flights.lead_or_join("k", None, False)
    assert (leads, server.calls) == (False, [])  # no flight of its own in the pipeline
    assert flight.outcome is server.followers[0]  # what the repeat's settling releases
    landed = Landed(Scenario.FIRST_CHOICE, 200, b'"result":"0x1"', None, None)
    server.followers[0].set_result(landed)
    assert flight.outcome.result(timeout=0) == landed


# Served: a native router in front of a real node, reached through the fault-injecting upstream
# as two nodes of two providers (the cheap one first), which counts what each node is asked. A
# repeat is told apart by `chainrouter_forwards_repeated_total`, counted as it is billed; a
# forward is repeated for 1 s at most, then the pipeline answers once more and hands a new one.

SERVED = {
    "CHAINROUTER_CACHE_MAX_BYTES": "0",  # nothing kept: every call is a node's
    "CHAINROUTER_HEDGE_MAX": "0",  # a repeat waits the attempt's time-out, never a hedge delay
    "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
    "CHAINROUTER_CAPABILITY_PROBE_INTERVAL_S": "0",  # the nodes are asked only what tests ask
    "CHAINROUTER_SYNC_INTERVAL_S": "0.2",
    "CHAINROUTER_METRICS_NETWORKS": '["127.0.0.0/8"]',
}
CHEAP = {HEAD: Decimal("0.0000001"), BALANCE: Decimal("0.0000002"), "eth_chainId": Decimal(0)}
DEAR = Decimal("0.000001")
NANO = Decimal(10**9)


class _Router:
    def __init__(
        self,
        tmp: Path,
        node: str,
        upstream: FaultyUpstream,
        credits: str,
        settings: dict[str, str] | None = None,
    ) -> None:
        port = node.rsplit(":", 1)[1]
        self.tmp, self.node, self.upstream, self.credits = tmp, node, upstream, credits
        self.settings = {**SERVED, **(settings or {})}
        self.paths = {name: f"/relay/{port}/full/{tmp.name}-{name}" for name in ("cheap", "dear")}
        self.key = api_key("main")
        self.engine = create_database_engine(f"sqlite:///{tmp / 'forwards.db'}")
        migrate.upgrade(self.engine)

    def apply(self) -> None:
        cheap = {method: str(price) for method, price in CHEAP.items()}
        nodes = {name: [(self.upstream.url(path), CHAIN_A)] for name, path in self.paths.items()}
        providers = [
            provider("cheap", cheap, nodes["cheap"]),
            provider("dear", dict.fromkeys(CHEAP, str(DEAR)), nodes["dear"]),
        ]
        config = world_config(providers, [self.key], credits=self.credits)
        apply_config(self.engine, validate_document(config))

    def start(self) -> None:
        self.apply()
        secret, url = self.key["secret"], self.engine.url.render_as_string()
        self.served: Served = launch_router(
            self.tmp / "router", "native", "127.0.0.1", url, secret, secret, self.settings
        )
        deadline = time.monotonic() + 20
        while self._metric("chainrouter_node_up{") < 2:  # both have answered their checks
            assert time.monotonic() < deadline, "the nodes never came up"
            time.sleep(0.05)

    def _metric(self, prefix: str) -> float:
        text = httpx.get(self.served.base + "/metrics", timeout=30).text
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        return sum(float(line.rsplit(" ", 1)[1]) for line in lines)

    def version(self) -> int:
        return int(self._metric("chainrouter_configuration_version "))

    def repeated(self, method: str = HEAD) -> int:
        """Calls of `method` the server has repeated so far."""
        labels = f'{{chain="{CHAIN_A}",method="{method}"}}'
        return int(self._metric("chainrouter_forwards_repeated_total" + labels))

    def post(self, payload: Any, call_id: Any = 1, **headers: str) -> httpx.Response:
        body = {**payload, "id": call_id}
        return httpx.post(self.served.url(), json=body, headers=headers, timeout=30)

    def asked(self) -> tuple[int, int]:
        """Requests each node has received so far: (cheap, dear)."""
        requests = self.upstream.requests
        return requests[self.paths["cheap"]], requests[self.paths["dear"]]

    def stop(self) -> None:
        self.served.process.terminate()
        self.served.process.wait(30)

    def usage(self) -> dict[str, tuple[int, int]]:
        """Calls and nano-credits in storage by scenario (after `stop`: its flush wrote them)."""
        usage = t.usage_aggregates
        query = select(
            usage.c.scenario, func.sum(usage.c.request_count), func.sum(usage.c.credits_nano)
        ).group_by(usage.c.scenario)
        with self.engine.connect() as connection:
            return {s: (int(n), int(c)) for s, n, c in connection.execute(query)}


@pytest.fixture
def router_of(
    final_blocks_node: AnvilNodes, upstream: FaultyUpstream, tmp_path: Path
) -> Iterator[Any]:
    """Starts a `_Router` whose customer has `credits`, with `settings` beside SERVED, its key
    with these fields."""
    made: list[_Router] = []

    def make(credits: str = "10", settings: dict[str, str] | None = None, **key: Any) -> _Router:
        router = _Router(tmp_path, final_blocks_node.urls["node"], upstream, credits, settings)
        router.key.update(key)
        made.append(router)
        router.start()
        return router

    yield make
    for router in made:
        served = getattr(router, "served", None)  # none if it never started
        if served is not None and served.process.poll() is None:
            router.stop()
        router.engine.dispose()


def _node_answer(router: _Router, payload: Any, call_id: Any) -> bytes:
    return httpx.post(router.node, json={**payload, "id": call_id}, timeout=30).content


def test_repeated_reads_are_the_nodes_answers_under_each_callers_id_billed_once_each(
    router_of: Any,
) -> None:
    router = router_of()
    balance = router.served.balance()
    calls = [(CALL, n) for n in (1, "two", None, -3, 123456789012345678)]
    calls += [(BALANCE_CALL, n) for n in (7, "eight", 9)]
    asked = router.asked()
    replies = [router.post(call, call_id) for call, call_id in calls]
    for (call, call_id), reply in zip(calls, replies, strict=True):
        assert reply.status_code == 200
        assert reply.content == _node_answer(router, call, call_id)
    assert len({reply.headers["x-batch-id"] for reply in replies}) == len(calls)
    # All but the first of each, less any the pipeline answered as a forward passed its 1 s.
    assert 1 <= router.repeated(HEAD) <= 4
    assert 1 <= router.repeated(BALANCE) <= 2
    assert router.asked() == (asked[0] + len(calls), asked[1])  # each once, at the cheap node
    router.stop()
    price = int((5 * CHEAP[HEAD] + 3 * CHEAP[BALANCE]) * NANO)
    assert router.usage() == {"first_choice": (len(calls), price)}
    assert balance - router.served.balance() == price


# Raced: the repeat waits the hedge delay, held at 1 s here, so the failure is the node's own.
@pytest.mark.parametrize(
    "hedging", [{}, {"CHAINROUTER_HEDGE_MAX": "2", "CHAINROUTER_HEDGE_DELAY_FLOOR_MS": "1000"}]
)
def test_a_node_that_fails_a_repeat_is_failed_over_at_once_and_never_billed(
    router_of: Any, upstream: FaultyUpstream, hedging: dict[str, str]
) -> None:
    router = router_of(settings=hedging)
    balance = router.served.balance()
    assert [router.post(CALL, n).status_code for n in range(2)] == [200, 200]
    assert router.repeated() == 1
    upstream.down.add(router.paths["cheap"])  # 503 from now on
    asked = router.asked()
    reply = router.post(CALL, "after")
    assert (reply.status_code, reply.content) == (200, _node_answer(router, CALL, "after"))
    # The repeat's failure was the pipeline's first attempt: the cheap node was not asked the
    # call twice, and the pipeline judged its 503 as its own, cooling the node down.
    assert (router.asked(), router.repeated()) == ((asked[0] + 1, asked[1] + 1), 1)
    assert router.post(CALL, "next").status_code == 200
    assert router.asked() == (asked[0] + 1, asked[1] + 2)
    router.stop()
    cheap, dear = int(CHEAP[HEAD] * NANO), int(DEAR * NANO)
    assert router.usage() == {"first_choice": (2, 2 * cheap), "failover": (2, 2 * dear)}
    assert balance - router.served.balance() == 2 * cheap + 2 * dear


def test_a_key_whose_credits_run_out_is_refused_402_by_the_pipeline_and_its_forward_ends(
    router_of: Any,
) -> None:
    router = router_of(credits=str(5 * CHEAP[HEAD]))
    asked = router.asked()[0]
    replies = [router.post(CALL, n) for n in range(6)]
    assert [reply.status_code for reply in replies] == [200] * 5 + [402]
    assert replies[5].json()["error"]["code"] == -32601
    assert router.repeated() == 4
    assert router.asked()[0] == asked + 6  # the sixth was repeated, then refused unbilled
    assert router.post(CALL, 6).status_code == 402
    assert router.asked()[0] == asked + 6  # the forward ended: the pipeline refuses alone
    router.stop()
    assert router.usage() == {
        "first_choice": (5, int(5 * CHEAP[HEAD] * NANO)),
        "insufficient_credits": (2, 0),
    }
    assert router.served.balance() == 0


def test_changing_the_keys_allowed_domains_ends_its_repeats(router_of: Any) -> None:
    router = router_of(allowed_domains=["app.example.com"])
    page = {"Origin": "https://app.example.com"}
    assert [router.post(CALL, n, **page).status_code for n in range(3)] == [200] * 3
    assert router.repeated() == 2
    version = router.version()
    router.key["allowed_domains"] = ["other.example.com"]
    router.apply()
    deadline = time.monotonic() + 10
    while router.version() == version:  # meanwhile a forward of this page is always held
        assert time.monotonic() < deadline, "the new domains were never applied"
        router.post(CALL, "meanwhile", **page)
    assert router.post(CALL, "after", **page).status_code == 403
    assert router.post(CALL, "still", **page).status_code == 403


def test_the_time_a_repeat_waited_on_its_node_counts_against_the_calls_deadline(
    router_of: Any, upstream: FaultyUpstream
) -> None:
    # An attempt may take 0.6 s, a call 1 s. The repeat waits its 0.6 s on the cheap node, which
    # has turned slow; its time-out is the pipeline's first attempt, and the pipeline has 0.4 s
    # left for the dear node, which answers in 0.5 s. Were the deadline to start again at the
    # handover, the dear node would have 0.6 s, and answer.
    deadlines = {
        "CHAINROUTER_UPSTREAM_TIMEOUT_S": "0.6",
        "CHAINROUTER_ADAPTIVE_TIMEOUT_FLOOR_S": "0.6",
        "CHAINROUTER_REQUEST_DEADLINE_S": "1.0",
    }
    router = router_of(settings=deadlines)
    assert [router.post(CALL, n).status_code for n in range(2)] == [200, 200]
    assert router.repeated() == 1
    upstream.held[router.paths["cheap"]] = 3.0
    upstream.held[router.paths["dear"]] = 0.5
    asked = router.asked()
    reply = router.post(CALL, "late")
    assert reply.status_code == 504, reply.text
    assert reply.json()["error"]["code"] == -32009  # every node failed: timed out
    assert router.asked() == (asked[0] + 1, asked[1] + 1)  # the repeat, then the dear node
    router.stop()
    assert router.usage()["all_failed"] == (1, 0)
