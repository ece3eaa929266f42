"""Verified answers are priced as calls (docs/integrity.md, "What it costs"; router/proving.py,
router/ledger.py): every call a check makes and a node answers is billed to the customer whose
call caused it, at the answering plan's price for that method (its price for the call's own
method where the plan does not price that one), metered under the scenario `verification` and
earned by that plan. Each is held before it is sent: a balance that cannot hold the next one
ends the check (the answer is served unproven), and never goes below what the holds allowed.

Two providers' nodes relay to one real anvil; the pipeline runs on the scripted executor, so
every call a check makes is seen, and the proofs are anvil's own."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainrouter.domain.verification import VerifyMode
from chainrouter.router.contract import FailureKind
from chainrouter.testing.scripted import Responder, failing
from tests.anvil import CHAIN_A, DEPLOY_LOGGING, node_result, start_anvil_nodes
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world
from tests.router.test_verified_answers import (
    PRICED,
    RECIPIENT,
    Chain,
    plus_one,
    relaying,
    result,
    verified,
)

A, B = "http://a.node", "http://b.node"
PLAN_A, PLAN_B = 1, 2  # scripted_world: one plan per node, in order
BALANCE, HEADER, PROOF = "eth_getBalance", "eth_getBlockByNumber", "eth_getProof"
# Each plan's price list: the call's own method, and what a state read's proof asks for.
PRICES = {
    (A, BALANCE): 100,
    (A, HEADER): 10,
    (A, PROOF): 30,
    (B, BALANCE): 200,
    (B, HEADER): 20,
    (B, PROOF): 60,
}
AT_BLOCK_1 = rpc(BALANCE, [RECIPIENT, "0x1"])
Usage = dict[tuple[str, str, int], tuple[int, int]]


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    nodes = start_anvil_nodes((("billed", CHAIN_A),))
    url = next(nodes).urls["billed"]
    sender = node_result(url, "eth_accounts", [])[0]
    transfer = node_result(
        url, "eth_sendTransaction", [{"from": sender, "to": RECIPIENT, "value": "0x2a"}]
    )
    deployed = node_result(url, "eth_sendTransaction", [{"from": sender, "data": DEPLOY_LOGGING}])
    contract = node_result(url, "eth_getTransactionReceipt", [deployed])["contractAddress"]
    node_result(url, "anvil_mine", ["0x10"])
    head = int(node_result(url, "eth_blockNumber", []), 16)
    yield Chain(url, sender, head, transfer, contract)
    nodes.close()


def world(
    chain: Chain,
    verify: VerifyMode = VerifyMode.ALWAYS,
    a: Responder | None = None,
    b: Responder | None = None,
    *,
    balance_nano: int = 10**9,
    prices: dict[tuple[str, str], int] | None = None,
    cache: bool = False,
) -> ScriptedWorld:
    return scripted_world(
        [(A, 100, a or relaying(chain.url)), (B, 200, b or relaying(chain.url))],
        methods=PRICED,
        method_prices=PRICES if prices is None else prices,
        heads={A: chain.head, B: chain.head},
        verify=verify,
        balance_nano=balance_nano,
        cache_bytes=1 << 20 if cache else 0,
    )


def usage(w: ScriptedWorld) -> Usage:
    """Calls and nano-credits metered so far by (method, scenario, plan), taken from the meter."""
    found: Usage = {}
    for key, (count, credits) in w.deps.meter.take().rows.items():
        _, _, _, method, scenario, _, plan_id = key
        calls, spent = found.get((method, scenario, plan_id), (0, 0))
        found[(method, scenario, plan_id)] = (calls + count, spent + credits)
    return found


def earned(found: Usage) -> dict[int, int]:
    """What each plan earns of the usage (the rows that name it)."""
    plans: dict[int, int] = {}
    for (_, _, plan_id), (_, credits) in found.items():
        if plan_id:
            plans[plan_id] = plans.get(plan_id, 0) + credits
    return plans


def test_a_verified_state_read_bills_the_call_and_each_call_its_proof_made(chain: Chain) -> None:
    w = world(chain)
    before = w.balance()
    reply = w.call(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"
    # A's answer; A's header; B's header, agreeing; A's proof against the header's stateRoot.
    assert w.urls_called() == [A, A, B, A]
    assert before - w.balance() == 100 + 10 + 20 + 30
    found = usage(w)
    assert found == {
        (BALANCE, "first_choice", PLAN_A): (1, 100),
        (HEADER, "verification", PLAN_A): (1, 10),
        (HEADER, "verification", PLAN_B): (1, 20),
        (PROOF, "verification", PLAN_A): (1, 30),
    }
    assert earned(found) == {PLAN_A: 140, PLAN_B: 20}

    # The header is trusted now: the next read at that block makes only its proof.
    again = w.call(rpc(BALANCE, [chain.sender, "0x1"]))
    assert verified(again) == "proof"
    assert w.urls_called()[4:] == [A, A]
    assert before - w.balance() == 160 + 100 + 30
    assert usage(w) == {
        (BALANCE, "first_choice", PLAN_A): (1, 100),
        (PROOF, "verification", PLAN_A): (1, 30),
    }


def test_a_method_the_plan_does_not_price_is_billed_at_its_price_for_the_calls_method(
    chain: Chain,
) -> None:
    """Neither plan prices eth_getProof: it is asked all the same, and billed as one more call
    of the method the customer called, under its own name."""
    unpriced = {key: price for key, price in PRICES.items() if key[1] != PROOF}
    w = world(chain, prices=unpriced)
    before = w.balance()
    reply = w.call(AT_BLOCK_1)
    assert verified(reply) == "proof"
    assert before - w.balance() == 100 + 10 + 20 + 100
    assert usage(w)[(PROOF, "verification", PLAN_A)] == (1, 100)


def test_a_balance_that_cannot_hold_the_next_check_call_ends_the_check_unproven(
    chain: Chain,
) -> None:
    """The balance holds the call and A's header, not B's: nothing more is sent (not even A's
    proof), the answer is served unproven, and the balance ends at zero, never below."""
    w = world(chain, balance_nano=100 + 10)
    reply = w.call(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A, A]
    assert w.balance() == 0
    assert usage(w) == {
        (BALANCE, "first_choice", PLAN_A): (1, 100),
        (HEADER, "verification", PLAN_A): (1, 10),
    }


def test_a_balance_that_holds_only_the_call_gets_it_unproven_and_nothing_asked_more(
    chain: Chain,
) -> None:
    w = world(chain, balance_nano=100)
    reply = w.call(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A]
    assert w.balance() == 0
    assert usage(w) == {(BALANCE, "first_choice", PLAN_A): (1, 100)}


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.integers(0, 200))
def test_whatever_the_balance_a_check_takes_it_no_lower_than_zero_and_bills_what_was_made(
    chain: Chain, balance: int
) -> None:
    """The call holds 100, then A's header 10, B's header 20 and A's proof 30, each before it is
    sent: the check goes as far as the balance holds, proven only when it holds all four."""
    w = world(chain, balance_nano=balance)
    reply = w.call(AT_BLOCK_1)
    spent = sent = 0
    for price in (100, 10, 20, 30):  # the call, A's header, B's header, A's proof
        if spent + price > balance:
            break
        spent, sent = spent + price, sent + 1
    assert w.balance() == balance - spent >= 0
    assert sum(credits for _, credits in usage(w).values()) == spent
    assert len(w.urls_called()) == sent
    if sent == 0:
        assert reply.status == 402
    else:
        assert result(reply) == "0x2a"
        assert verified(reply) == ("proof" if sent == 4 else None)


def test_a_key_that_bypasses_the_credit_check_has_its_checks_made_and_billed(
    chain: Chain,
) -> None:
    w = scripted_world(
        [(A, 100, relaying(chain.url)), (B, 200, relaying(chain.url))],
        methods=PRICED,
        method_prices=PRICES,
        heads={A: chain.head, B: chain.head},
        verify=VerifyMode.ALWAYS,
        balance_nano=0,
        bypass_credit_check=True,
    )
    reply = w.call(AT_BLOCK_1)
    assert verified(reply) == "proof"
    assert w.balance() == -(100 + 10 + 20 + 30)


def test_an_unproven_check_bills_only_the_calls_nodes_answered(chain: Chain) -> None:
    """B fails when asked for the header: A's header is vouched for by nobody, and A's answer,
    which its own stateRoot holds, is served unproven; B's failure is not billed."""
    w = world(chain, b=failing(FailureKind.TRANSPORT))
    before = w.balance()
    reply = w.call(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A, A, B, A]
    assert before - w.balance() == 100 + 10 + 30
    assert usage(w) == {
        (BALANCE, "first_choice", PLAN_A): (1, 100),
        (HEADER, "verification", PLAN_A): (1, 10),
        (PROOF, "verification", PLAN_A): (1, 30),
    }


def test_an_agreement_bills_the_other_providers_answer_at_its_price(chain: Chain) -> None:
    """A kept eth_call is agreed by B: B's answer is billed at B's eth_call price; when B says
    otherwise the answer is unproven (and not kept), and B's answer is billed all the same."""
    call = rpc("eth_call", [{"to": chain.contract, "data": "0x"}, "0x2"])
    w = world(chain, VerifyMode.CACHE, cache=True)
    before = w.balance()
    assert verified(w.call(call)) == "agreement"
    assert before - w.balance() == 100 + 200
    assert usage(w) == {
        ("eth_call", "first_choice", PLAN_A): (1, 100),
        ("eth_call", "verification", PLAN_B): (1, 200),
    }

    def other(request: object, value: object) -> str:
        return "0x01"

    lie = relaying(chain.url, other, ("eth_call",))
    disagreeing = world(chain, VerifyMode.CACHE, b=lie, cache=True)
    before = disagreeing.balance()
    assert verified(disagreeing.call(call)) is None
    assert before - disagreeing.balance() == 100 + 200


def test_the_refuted_nodes_check_calls_are_disputed_and_the_others_billed(chain: Chain) -> None:
    """A lies: its answer is refuted, B's is served and proven, and A is cordoned. The customer
    pays B's answer and the calls B answered for the checks; A's (its header, its proof) are
    disputed at once: neither billed nor earned."""
    w = world(chain, a=relaying(chain.url, plus_one, (BALANCE,)))
    before = w.balance()
    reply = w.call(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"
    assert w.cordons is not None
    assert w.cordons.is_cordoned(1)
    # A's lie, A's header, B's header, A's proof (refuted); B's answer and B's proof.
    assert w.urls_called() == [A, A, B, A, B, B]
    assert before - w.balance() == 200 + 20 + 60
    found = usage(w)
    assert found == {
        (BALANCE, "failover", PLAN_B): (1, 200),
        (HEADER, "verification", PLAN_B): (1, 20),
        (PROOF, "verification", PLAN_B): (1, 60),
        (HEADER, "disputed", 0): (1, 0),
        (PROOF, "disputed", 0): (1, 0),
    }
    assert earned(found) == {PLAN_B: 280}


def test_the_free_tiers_checks_are_made_at_the_operators_cost(chain: Chain) -> None:
    """Under `always` the free tier's answers are proven too; its checks' calls, like its own,
    are billed to nobody and metered for no plan."""
    w = world(chain)
    reply = w.public(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) == "proof"
    assert w.urls_called() == [A, A, B, A]
    assert usage(w) == {}
    assert w.balance() == 10**9


def test_a_cache_hit_is_not_proven_again_and_costs_the_cache_price(chain: Chain) -> None:
    w = world(chain, VerifyMode.CACHE, cache=True)
    assert verified(w.call(AT_BLOCK_1)) == "proof"
    usage(w)
    before = w.balance()
    hit = w.call(AT_BLOCK_1)
    assert result(hit) == "0x2a"
    assert len(w.urls_called()) == 4  # nothing asked again
    assert usage(w) == {(BALANCE, "cache", 0): (1, 0)}
    assert w.balance() == before


def test_a_customer_who_asks_at_once_is_never_taken_below_what_the_holds_allowed(
    chain: Chain,
) -> None:
    """Several verified reads at once, with a balance for fewer than all of them and their
    checks: every call and check call either holds its price or is not sent, so the balance
    never goes below zero."""
    w = world(chain, balance_nano=3 * 160 + 50)
    reads = [rpc(BALANCE, [f"0x{n:040x}", "0x1"], request_id=n) for n in range(1, 7)]
    replies = w.together(*((w.key, orjson.dumps(read)) for read in reads))
    outcomes = {(reply.status, verified(reply)) for reply in replies}
    # Proven while the balance held the checks, served unproven once it held only the call,
    # refused once it held not even that.
    assert outcomes == {(200, "proof"), (200, None), (402, None)}
    assert w.balance() >= 0  # every hold released, and no charge past them
    assert 3 * 160 + 50 - w.balance() == sum(credits for _, credits in usage(w).values())


def test_a_check_sends_no_call_dearer_than_the_keys_max_price_per_call(chain: Chain) -> None:
    """The key's cap bounds every call billed to it: a proof priced above it is not asked, and
    the answer is served unproven, at the call's own price."""
    w = scripted_world(
        [(A, 100, relaying(chain.url)), (B, 200, relaying(chain.url))],
        methods=PRICED,
        method_prices={**PRICES, (A, PROOF): 150},
        heads={A: chain.head, B: chain.head},
        verify=VerifyMode.ALWAYS,
        max_price_nano=100,
    )
    before = w.balance()
    reply = w.call(AT_BLOCK_1)
    assert result(reply) == "0x2a"
    assert verified(reply) is None
    assert w.urls_called() == [A, A, B]  # the headers, within the cap; not the proof
    assert before - w.balance() == 100 + 10 + 20
