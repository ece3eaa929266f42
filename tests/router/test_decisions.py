"""What the pipeline hands the native server to apply to later calls (router/fast/decisions.py),
told with the scripted executor: which calls get a decision, in which scope, depending on which
epochs, and how an attempt the server made before the handover stands for the pipeline's own.
The served stories of the same rules are in test_decisions_served.py."""

from __future__ import annotations

from typing import Any

import pytest
from eth_hash.auto import keccak

from chainrouter.domain.enums import Scenario
from chainrouter.router import epochs
from chainrouter.router.contract import (
    Attempted,
    Decision,
    DecisionScope,
    Failure,
    FailureKind,
)
from chainrouter.router.fast.grants import GRANT_CALLS
from chainrouter.router.latency import TailPolicy
from chainrouter.router.ledger import Booking
from chainrouter.testing.scripted import answering, erroring, failing, slow
from tests.router.scripted_world import CUSTOMER, ScriptedWorld, rpc, scripted_world

A, B = "http://a.node", "http://b.node"
OK = answering("0x10")
READS = ("eth_blockNumber", "eth_getBalance", "eth_call", "eth_getLogs", "eth_gasPrice")
METHODS = (*READS, "eth_sendRawTransaction", "zks_unknownRead", "eth_chainId")
ADDRESS = "0x" + "ab" * 20


def _world(a: Any = OK, b: Any = OK, **options: Any) -> ScriptedWorld:
    options.setdefault("methods", METHODS)
    options.setdefault("tail", TailPolicy(hedge_max=0))  # no hedges unless a story races
    return scripted_world([(A, 100, a), (B, 200, b)], decisions=True, **options)


def _decided(world: ScriptedWorld, payload: Any, **call: Any) -> list[Decision]:
    return world.decided(world.call(payload, **call))


def _booking(decision: Decision) -> Booking:
    assert isinstance(decision.booking, Booking)
    return decision.booking


def test_a_read_its_first_node_serves_at_once_is_handed_over_as_a_forward_to_that_node() -> None:
    world = _world()
    [decision] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    assert (decision.url, decision.node_id, decision.call) == (A, world.nodes[0].node_id, 0)
    assert (decision.spend_nano, decision.member) == (100, None)
    # As long as the pipeline's attempt would wait (no hedge here: its time-out).
    assert decision.timeout_s == pytest.approx(world.executor.forwarded[-1].timeout_s)
    booking = _booking(decision)
    assert (booking.scenario, booking.cost_nano, booking.customer_id) == (
        Scenario.FIRST_CHOICE,
        100,
        CUSTOMER,
    )


def test_a_raced_read_is_handed_over_within_its_hedge_delay() -> None:
    tail = TailPolicy(hedge_max=1, hedge_floor_s=0.05, hedge_ceiling_s=0.05)
    world = _world(tail=tail)
    [decision] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    assert decision.timeout_s == pytest.approx(0.05)


@pytest.mark.parametrize(
    ("method", "params", "scope"),
    [
        ("eth_getBalance", [ADDRESS, "latest"], DecisionScope.MASKED),
        ("eth_call", [{"to": ADDRESS, "data": "0x01"}, "latest"], DecisionScope.MASKED),
        ("eth_call", [{"to": ADDRESS, "data": "0x01"}], DecisionScope.MASKED),  # no block: latest
        ("eth_blockNumber", [], DecisionScope.EXACT),  # no parameter of its own to leave out
        ("eth_gasPrice", [], DecisionScope.EXACT),
        ("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "0x2"}], DecisionScope.EXACT),
    ],
)
def test_calls_whose_block_parameter_is_all_the_stages_read_share_a_masked_scope(
    method: str, params: list[Any], scope: DecisionScope
) -> None:
    [decision] = _decided(_world(), rpc(method, params))
    assert decision.scope is scope


def test_named_parameters_are_decided_in_the_exact_scope_only() -> None:
    [decision] = _decided(_world(), rpc("eth_getBalance", {"address": ADDRESS}))
    assert decision.scope is DecisionScope.EXACT


@pytest.mark.parametrize(
    "case",
    [
        "write",
        "unknown method",
        "eth_chainId",
        "key rate limit",
        "failover",
        "node rate limit",
        "free tier",
        "request log",
    ],
)
def test_a_call_that_must_be_decided_each_time_is_never_handed_over(case: str) -> None:
    payload = rpc("eth_getBalance", [ADDRESS, "latest"])
    options: dict[str, Any] = {}
    if case == "write":  # each node accepts it, answering its hash
        payload = rpc("eth_sendRawTransaction", ["0x02"])
        options["a"] = options["b"] = answering("0x" + keccak(b"\x02").hex())
    elif case == "unknown method":  # it may be a write, as for hedges
        payload = rpc("zks_unknownRead", [])
    elif case == "eth_chainId":  # the one answer the router checks against the chain
        payload = rpc("eth_chainId", [])
        options["a"] = answering("0x1")
    elif case == "key rate limit":  # a limit must see every call
        options["key_rate_limit"] = 100
    elif case == "failover":
        options["a"] = failing(FailureKind.HTTP_STATUS, 503)
    elif case == "node rate limit":
        options["node_rate_limit"] = 100
    world = _world(**options)
    if case == "free tier":
        reply = world.public(payload)
    else:
        if case == "request log":
            world.service.keyed.keep_requests = True
            world.service.keyed.hand_decisions = False
        reply = world.call(payload)
    assert reply.status == 200
    assert world.decided(reply) == []


def test_an_error_the_node_answers_as_the_calls_outcome_is_decided_all_the_same() -> None:
    """A revert is billed as an answer: the route stands; each later answer is judged when it
    is settled (router/fast/settle.py)."""
    world = _world(a=erroring(3, "execution reverted"))
    [decision] = _decided(world, rpc("eth_call", [{"to": ADDRESS}, "latest"]))
    assert decision.url == A


def test_a_decision_depends_on_the_snapshot_and_on_every_node_of_the_calls_routes() -> None:
    world = _world()
    [decision] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    read = dict(zip(decision.epoch_slots, decision.epoch_values, strict=True))
    store = world.deps.epochs
    assert read[epochs.SNAPSHOT] == store.read(epochs.SNAPSHOT)
    for node in world.nodes:
        assert epochs.node(node.node_id) in read


def test_a_read_of_the_head_depends_on_the_keys_seen_head_and_the_chains_heads() -> None:
    """A read pinned to a block depends on the nodes' heads (which of them have it), not on
    what the key has seen."""
    world = _world()
    [at_head] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    [pinned] = _decided(world, rpc("eth_getBalance", [ADDRESS, "0x5"]))
    [access] = world.service.snapshot.keys_by_hash.values()
    assert {epochs.seen(access.key_id), epochs.chain_heads(1)} <= set(at_head.epoch_slots)
    assert epochs.chain_heads(1) in pinned.epoch_slots
    assert epochs.seen(access.key_id) not in pinned.epoch_slots


def test_what_each_epoch_counts_moving_on_is_seen_by_the_decisions_made_before() -> None:
    """Each thing a decision read raises its slot when it changes (router/epochs.py)."""
    world = _world()
    [decision] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    store = world.deps.epochs

    def stands() -> bool:
        read = zip(decision.epoch_slots, decision.epoch_values, strict=True)
        return all(store.read(slot) == value for slot, value in read)

    assert stands()
    world.deps.cooldowns.failed(world.nodes[1].node_id)  # a route's node: even the second
    assert not stands()
    [decision] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    assert stands()
    world.service.install(world.service.snapshot)
    assert not stands()
    [decision] = _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    world.call(rpc("eth_blockNumber"))  # the key sees block 0x10: its seen head moves on
    assert not stands()


def test_a_hit_of_the_cache_is_handed_over_as_an_answer_of_that_call_alone() -> None:
    world = _world(cache_bytes=1 << 20, heads={A: 100, B: 100})
    call = rpc("eth_getBalance", [ADDRESS, "0x5"])  # final: 100 - 10 >= 5
    assert _decided(world, call) == []  # kept by the cache: the next one is a hit, not a forward
    [answer] = _decided(world, call)
    assert (answer.url, answer.member, answer.scope) == ("", b'"result":"0x10"', "exact")
    assert epochs.chain_cache(1) in answer.epoch_slots
    assert _booking(answer).scenario is Scenario.CACHE


def test_a_request_answered_partly_from_the_cache_hands_nothing_over() -> None:
    """Its `X-Cache: PARTIAL` is what neither kind of call would get alone."""
    world = _world(cache_bytes=1 << 20, heads={A: 100, B: 100})
    kept = rpc("eth_getBalance", [ADDRESS, "0x5"])
    world.call(kept)
    batch = [kept, rpc("eth_getBalance", [ADDRESS, "latest"], 2)]
    reply = world.call(batch)
    assert dict(reply.headers)["x-cache"] == "PARTIAL"
    assert world.decided(reply) == []


def test_a_decision_tops_up_its_customers_grant_and_a_bypassing_key_spends_nothing() -> None:
    world = _world()
    grants = world.deps.grants
    assert grants is not None
    _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    held = 100 * GRANT_CALLS
    assert grants.memo.granted(CUSTOMER) == held
    assert world.balance() == 10**9 - 100 - held  # the call's price, and the grant held aside
    bypassing = _world(bypass_credit_check=True)
    [decision] = _decided(bypassing, rpc("eth_getBalance", [ADDRESS, "latest"]))
    assert (decision.spend_nano, _booking(decision).cost_nano) == (0, 100)
    assert bypassing.deps.grants is not None
    assert bypassing.deps.grants.memo.granted(CUSTOMER) == 0


def test_a_call_short_of_credits_takes_its_customers_grant_back_first() -> None:
    world = _world(balance_nano=100 * 200)
    _decided(world, rpc("eth_getBalance", [ADDRESS, "latest"]))
    grants = world.deps.grants
    assert grants is not None
    assert grants.memo.granted(CUSTOMER) == 100 * 199  # all the balance allowed
    reply = world.call(rpc("eth_gasPrice"))
    assert reply.status == 200  # the grant was taken back for it
    assert grants.memo.granted(CUSTOMER) == 0


# An attempt the native server made under a decision before the handover.


def _made(world: ScriptedWorld, answer: bytes | Failure, **fields: Any) -> Attempted:
    return Attempted(
        call=fields.get("call", 0),
        node_id=world.nodes[fields.get("node", 0)].node_id,
        answer=answer if isinstance(answer, bytes) else None,
        failure=answer if isinstance(answer, Failure) else None,
        elapsed_s=fields.get("elapsed_s", 0.2),
        timeout_s=fields.get("timeout_s", 10.0),
    )


def test_a_failure_the_server_met_is_the_pipelines_first_attempt_judged_as_its_own() -> None:
    world = _world()
    failure = Failure(FailureKind.HTTP_STATUS, "HTTP 503", 503)
    reply = world.call(rpc(), attempts=[_made(world, failure)], waited_s=0.2)
    assert reply.status == 200
    assert world.urls_called() == [B]  # the first node was not asked again
    assert world.cooling() == [A]  # its 503 was judged as the pipeline's own
    assert world.metered() == {"failover": (1, 200)}


def test_an_answer_the_server_got_is_served_without_asking_its_node_again() -> None:
    world = _world()
    answer = b'{"jsonrpc":"2.0","id":1,"result":"0x20"}'
    reply = world.call(rpc(), attempts=[_made(world, answer)])
    assert (reply.status, reply.body) == (200, answer)
    assert world.urls_called() == []
    assert world.metered() == {"first_choice": (1, 100)}


def test_a_time_out_stands_only_for_an_attempt_that_would_have_waited_no_longer() -> None:
    timeout = Failure(FailureKind.TIMEOUT, "no answer", None)
    world = _world()
    reply = world.call(rpc(), attempts=[_made(world, timeout, timeout_s=10.0, elapsed_s=10.0)])
    assert (reply.status, world.urls_called()) == (200, [B])  # the first node's stood
    world = _world(a=slow(0.01, OK))
    short = _made(world, timeout, timeout_s=0.05, elapsed_s=0.05)
    reply = world.call(rpc(), attempts=[short], waited_s=0.05)
    assert (reply.status, world.urls_called()) == (200, [A])  # it would wait longer: asked


def test_an_attempt_stands_for_its_own_call_and_node_only() -> None:
    world = _world()
    answer = b'{"jsonrpc":"2.0","id":1,"result":"0x20"}'
    batch = [rpc("eth_blockNumber", [], 1), rpc("eth_blockNumber", [], 2)]
    reply = world.call(batch, attempts=[_made(world, answer, call=0, node=1)])
    assert reply.status == 200
    assert world.urls_called() == [A, A]  # made on the second node: not this call's first
