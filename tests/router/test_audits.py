"""Audits (docs/integrity.md, "Audits"): a sampled share of the answers nodes give is asked again of
another provider's node, off the answer's path; a disagreement goes to more nodes; the node that
a majority of two providers outvotes is cordoned, and its answers since its last clean audit are
disputed: refunded, not paid to its provider. Told as scripted stories (no I/O)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from random import Random
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine

from chainrouter.domain.enums import Scenario
from chainrouter.domain.routing import NodeInfo
from chainrouter.router import epochs
from chainrouter.router.audits import RULES, AuditSettings, Outcome, Rule, comparable, compare
from chainrouter.router.contract import FailureKind, Receipt
from chainrouter.router.cordon import Cordons
from chainrouter.router.fast.settle import Settle
from chainrouter.router.journal import (
    ReplayedFlush,
    UsageJournal,
    database_fingerprint,
    replay_journals,
)
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.prometheus import RouterExposition, RouterState
from chainrouter.router.sync import StorageSync
from chainrouter.testing.scripted import Script, answering, failing
from tests.router.scripted_world import ScriptedWorld, rpc, scripted_world

BALANCE = "eth_getBalance"
AT = "0x10"  # a block well below the head (100), so final
HONEST = "0xde0b6b3a7640000"
FORGED = "0x56bc75e2d63100000"
ADDRESS = "0x" + "ab" * 20
ALWAYS = AuditSettings(rate=1.0, watched_rate=1.0)
HEAD = "eth_blockNumber"


def balance(at: str = AT) -> dict[str, Any]:
    return rpc(BALANCE, [ADDRESS, at])


def world(
    answers: dict[str, str],
    *,
    audits: AuditSettings = ALWAYS,
    provider_of: dict[str, str] | None = None,
    **more: Any,
) -> ScriptedWorld:
    """Nodes a (cheapest: first choice), b, c..., each of its own provider unless said, each
    answering eth_getBalance with its value; every node at head 100."""
    nodes: list[tuple[str, int, Script]] = [
        (f"http://{name}", 10 + index, answering(value))
        for index, (name, value) in enumerate(answers.items())
    ]
    return scripted_world(
        nodes,
        methods=(BALANCE, "eth_blockNumber", "eth_gasPrice"),
        heads={url: 100 for url, _, _ in nodes},
        audits=audits,
        provider_of=provider_of,
        **more,
    )


def result_of(reply: Any) -> Any:
    return json.loads(reply.body)["result"]


# -- the rules ------------------------------------------------------------------------------


def test_answers_that_change_between_two_asks_are_never_compared() -> None:
    for method in ("eth_blockNumber", "eth_gasPrice", "eth_maxPriorityFeePerGas", "eth_feeHistory"):
        assert RULES[method] is Rule.NEVER
        assert not comparable(method, [])
    # A read of the head or of a lagging tag, or with no block named (the head), is not either.
    for at in ("latest", "pending", "safe", "finalized"):
        assert not comparable(BALANCE, [ADDRESS, at])
    assert not comparable(BALANCE, [ADDRESS])
    assert not comparable("eth_getLogs", [{"fromBlock": "0x1", "toBlock": "latest"}])
    assert comparable(BALANCE, [ADDRESS, AT])
    assert not comparable("eth_someMethodNobodyKnows", [])


def test_hex_is_compared_as_one_spelling() -> None:
    first = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": "0xABCDEF"})
    second = orjson.dumps({"jsonrpc": "2.0", "id": 9, "result": "0xabcdef"})
    assert compare(BALANCE, [ADDRESS, AT], first, second, final=True) is Outcome.AGREE


def test_errors_nulls_and_other_forks_are_not_compared() -> None:
    def answer(result: Any) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": result})

    error = orjson.dumps({"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "x"}})
    params = ["0x" + "11" * 32]
    receipt = "eth_getTransactionReceipt"
    one = answer({"blockHash": "0x" + "aa" * 32, "status": "0x1"})
    other_fork = answer({"blockHash": "0x" + "bb" * 32, "status": "0x0"})
    assert compare(receipt, params, one, answer(None), final=True) is Outcome.UNCOMPARED
    assert compare(receipt, params, one, error, final=True) is Outcome.UNCOMPARED
    assert compare(receipt, params, one, other_fork, final=True) is Outcome.UNCOMPARED
    forged = answer({"blockHash": "0x" + "aa" * 32, "status": "0x0"})
    assert compare(receipt, params, one, forged, final=True) is Outcome.DISAGREE
    # Pinned above finality, naming no block: a reorg may change it.
    assert compare(BALANCE, [ADDRESS, AT], answer("0x1"), answer("0x2"), final=False) is (
        Outcome.UNCOMPARED
    )


# -- sampling ---------------------------------------------------------------------------------


def test_a_sampled_answer_is_asked_again_of_another_providers_node_after_the_client_has_it() -> (
    None
):
    w = world({"a": HONEST, "b": HONEST, "c": HONEST})
    reply = w.call(balance())
    assert result_of(reply) == HONEST
    assert w.urls_called() == ["http://a"]  # the client's answer waited on no audit
    w.audit_all()
    assert w.urls_called() == ["http://a", "http://b"]  # another provider's, the same call
    assert json.loads(w.executor.forwarded[1].body)["params"] == [ADDRESS, AT]
    assert w.auditor is not None
    assert w.auditor.standings[1].passed == 1


def test_the_sampled_share_is_the_rate_and_more_for_watched_nodes() -> None:
    draws = itertools.cycle([i / 100 for i in range(100)])  # an even spread of draws
    w = world(
        {"a": HONEST, "b": HONEST},
        audits=AuditSettings(rate=0.01, watched_rate=0.1),
        draw=lambda: next(draws),
    )
    for _ in range(200):
        w.call(balance())
    w.audit_all()
    assert w.urls_called().count("http://b") == 2  # 1 % of 200
    watched = world(
        {"a": HONEST, "b": HONEST},
        audits=AuditSettings(rate=0.01, watched_rate=0.1),
        draw=lambda: next(draws),
        watched={"http://a": 4e9},  # young, or back from a cordon: watched until then
    )
    for _ in range(200):
        watched.call(balance())
    watched.audit_all()
    assert watched.urls_called().count("http://b") == 20  # 10 % of 200


def test_calls_whose_answers_are_never_compared_are_not_sampled() -> None:
    w = world({"a": HONEST, "b": HONEST})
    w.call(rpc("eth_gasPrice", []))
    w.call(balance("latest"))
    w.audit_all()
    assert w.urls_called() == ["http://a", "http://a"]


def test_a_decision_carries_the_share_the_server_samples() -> None:
    w = world(
        {"a": HONEST, "b": HONEST},
        audits=AuditSettings(rate=0.01, watched_rate=0.1),
        decisions=True,
    )
    w.auditor._draw = lambda: 1.0  # type: ignore[union-attr]  # this call not drawn
    [decided] = w.decided(w.call(balance()))
    assert decided.audit_every == 100  # every 100th call the server serves under it
    [head] = w.decided(w.call(rpc("eth_gasPrice", [])))
    assert head.audit_every == 0  # never compared: never sampled


def test_the_servers_sampled_receipts_are_audited() -> None:
    """A call served under a decision, the server's every n-th, reaches the auditor through the
    ledger's settling (with the call's bytes), and is audited like the pipeline's."""
    w = world({"a": FORGED, "b": HONEST, "c": HONEST}, decisions=True)
    w.auditor._draw = lambda: 1.0  # type: ignore[union-attr]
    [decided] = w.decided(w.call(balance()))
    assert decided.audit_every == 1
    deps = w.deps
    assert deps.grants is not None
    assert deps.audit is not None
    settle = Settle(
        deps.ledger, deps.grants, RouterMetrics(), deps.health.node_head, deps.audit.receipt
    )
    body = orjson.dumps(balance())
    answer = orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": FORGED})
    settled = settle([Receipt(decided, 0, b"1", answer, 0.01, joined=False, audited=body)], [])
    assert settled.verdicts[0].served  # the client's answer is not held for the audit
    w.audit_all()
    assert w.cordons is not None
    assert w.cordons.is_cordoned(1)


# -- majority, cordon, disputes ----------------------------------------------------------------


def test_a_node_outvoted_by_two_providers_is_cordoned_and_no_longer_chosen() -> None:
    w = world({"a": FORGED, "b": HONEST, "c": HONEST})
    assert result_of(w.call(balance())) == FORGED  # believed once, then audited
    slot = epochs.node(1)
    before = w.deps.epochs.read(slot)
    w.audit_all()
    assert w.urls_called() == ["http://a", "http://b", "http://c"]  # disagreement: one more
    assert w.cordons is not None
    reasons = w.cordons.reasons()
    assert "outvoted by 2 nodes of providers 2, 3" in reasons[1]
    assert w.deps.epochs.read(slot) > before  # its decisions end
    assert result_of(w.call(balance())) == HONEST  # no longer chosen
    assert w.urls_called()[-1] == "http://b"


def test_its_answers_since_the_last_clean_audit_are_disputed_and_refunded() -> None:
    draws = iter([0.0] + [1.0] * 3 + [0.0])  # the first call audited, then three not, then one
    w = world({"a": HONEST, "b": HONEST, "c": HONEST}, draw=lambda: next(draws))
    start = w.balance()
    w.call(balance())
    w.audit_all()  # clean: a's first answer is not disputable
    w.metered()  # flushed
    w.nodes[0].script = answering(FORGED)
    w.executor.nodes["http://a"] = answering(FORGED)
    for _ in range(4):
        w.call(balance())
    assert w.balance() == start - 5 * 10
    w.audit_all()
    usage = w.metered()
    assert usage[Scenario.DISPUTED] == (4, 0)
    assert usage[Scenario.FIRST_CHOICE] == (0, 0)  # its four taken back: nothing billed
    assert w.balance() == start - 10  # the four refunded, exactly; the clean one stays paid
    rows = w.deps.meter.take().rows
    assert not rows  # nothing left over to flush twice


def test_the_dispute_takes_the_calls_from_the_plan_in_the_hour_they_were_served() -> None:
    w = world({"a": FORGED, "b": HONEST, "c": HONEST})
    w.call(balance())
    w.audit_all()
    rows = w.deps.meter.take().rows
    by_plan: dict[int, list[int]] = {}
    hours = set()
    for (_, _, _, _, _, hour, plan), (count, credits) in rows.items():
        totals = by_plan.setdefault(plan, [0, 0])
        totals[0] += count
        totals[1] += credits
        hours.add(hour)
    assert by_plan[1] == [0, 0]  # a's plan earns nothing from it
    assert len(hours) == 1


def test_no_majority_cordons_nobody() -> None:
    w = world({"a": FORGED, "b": HONEST})  # one against one
    w.call(balance())
    w.audit_all()
    assert w.cordons is not None
    assert w.cordons.reasons() == {}
    failed = world({"a": FORGED, "b": HONEST, "c": HONEST})
    failed.executor.nodes["http://c"] = failing(FailureKind.TIMEOUT)
    failed.call(balance())
    failed.audit_all()
    assert failed.cordons is not None
    assert failed.cordons.reasons() == {}


def test_a_majority_of_one_provider_cordons_nobody() -> None:
    w = world({"a": FORGED, "b": HONEST, "c": HONEST}, provider_of={"http://c": "http://b"})
    w.call(balance())
    w.audit_all()
    assert w.cordons is not None
    assert w.cordons.reasons() == {}


def test_a_referee_that_lies_is_the_one_outvoted() -> None:
    w = world({"a": HONEST, "b": FORGED, "c": HONEST})
    w.call(balance())
    w.audit_all()
    assert w.cordons is not None
    assert list(w.cordons.reasons()) == [2]
    usage = w.metered()
    assert Scenario.DISPUTED not in usage  # b served nothing to dispute


def test_a_failed_proof_cordons_through_the_same_hook_at_once() -> None:
    w = world({"a": HONEST, "b": HONEST, "c": HONEST})
    w.call(balance())
    assert w.cordons is not None
    node = w.service.snapshot.routes.routes(1, BALANCE)[0].node
    assert w.cordons.cordon(node, "proof: eth_getBalance failed against the stateRoot")
    assert not w.cordons.cordon(node, "again")  # once
    assert w.metered()[Scenario.DISPUTED] == (1, 0)
    w.call(balance())
    assert w.urls_called()[-1] == "http://b"
    assert w.deps.health.health(1).in_sync is False


# -- the property -------------------------------------------------------------------------------

_HASH = st.binary(min_size=32, max_size=32).map(lambda b: "0x" + b.hex())
_QUANTITY = st.integers(min_value=0, max_value=2**64).map(hex)


@st.composite
def _legitimately_different(draw: Any) -> tuple[str, Any, Any, Any, bool]:
    """Two honest nodes' answers to one call that may differ without either lying: a read of
    the head (their heads differ), a gas price, a block one has not seen, a reorg, a block above
    finality."""
    kind = draw(st.sampled_from(["head", "gas", "unseen", "reorg", "unfinal"]))
    if kind == "head":
        method, params = BALANCE, [ADDRESS, draw(st.sampled_from(["latest", "pending", "safe"]))]
        return method, params, draw(_QUANTITY), draw(_QUANTITY), True
    if kind == "gas":
        method = draw(
            st.sampled_from(["eth_gasPrice", "eth_maxPriorityFeePerGas", "eth_blockNumber"])
        )
        return method, [], draw(_QUANTITY), draw(_QUANTITY), True
    if kind == "unseen":
        tx = {"blockHash": draw(_HASH), "status": "0x1"}
        return "eth_getTransactionReceipt", [draw(_HASH)], tx, None, True
    if kind == "reorg":
        forks = draw(st.lists(_HASH, min_size=2, max_size=2, unique=True))
        one = {"blockHash": forks[0], "logIndex": "0x0", "data": draw(_QUANTITY)}
        other = {"blockHash": forks[1], "logIndex": "0x0", "data": draw(_QUANTITY)}
        logs = {"fromBlock": "0x60", "toBlock": "0x63"}
        return "eth_getLogs", [logs], [one], [other], True
    return (
        BALANCE,
        [ADDRESS, hex(draw(st.integers(0, 99)))],
        draw(_QUANTITY),
        draw(_QUANTITY),
        False,
    )


@settings(max_examples=200, deadline=None)
@given(_legitimately_different())
def test_answers_that_legitimately_differ_never_disagree(
    case: tuple[str, Any, Any, Any, bool],
) -> None:
    method, params, one, other, final = case

    def answer(result: Any) -> bytes:
        return orjson.dumps({"jsonrpc": "2.0", "id": 1, "result": result})

    assert compare(method, params, answer(one), answer(other), final=final) is not (
        Outcome.DISAGREE
    )


@settings(max_examples=40, deadline=None)
@given(_legitimately_different(), st.integers(min_value=2, max_value=4))
def test_an_honest_node_is_never_cordoned_by_audits_of_answers_that_legitimately_differ(
    case: tuple[str, Any, Any, Any, bool], referees: int
) -> None:
    method, params, one, other, final = case
    nodes: list[tuple[str, int, Script]] = [("http://honest", 10, answering(one))]
    nodes += [(f"http://peer{i}", 20 + i, answering(other)) for i in range(referees)]
    w = scripted_world(
        nodes,
        methods=(method,),
        heads={url: 100 for url, _, _ in nodes},
        audits=ALWAYS,
        finality_depth=10,
        cache_bytes=0,
    )
    if not final:  # the chain's head only a few blocks past the call's block
        for node in w.service.snapshot.routes.routes(1, method):
            w.deps.health.record_head(node.node, int(params[1], 16) + 1)
    w.call(rpc(method, params))
    w.audit_all()
    assert w.cordons is not None
    assert w.cordons.reasons() == {}


def test_a_dispute_survives_a_kill_in_the_journal_refunding_once(tmp_path: Path) -> None:
    """The dispute is usage like any: journaled as it is metered, so a router killed before its
    flush replays it, and the refund is in that one flush (its reference: credited once)."""
    database = database_fingerprint("sqlite:///audits.db")
    journal = UsageJournal(tmp_path, "r1", database)
    meter, credits = UsageMeter(journal=journal), CreditView()
    credits.replace_stored({1: 10**6})
    cordons = Cordons(meter, credits, lambda node_id: None)
    meter.record(1, 7, 1, BALANCE, Scenario.FIRST_CHOICE, 100, 5, count=3)
    credits.settle(1, 0, 300)
    cordons.served(9, 1, 7, 1, BALANCE, Scenario.FIRST_CHOICE, 5, 100, 3)
    assert cordons.cordon(NodeInfo(9, 5, 1, "http://liar", provider_id=2), "audit: outvoted")
    assert credits.available(1) == 10**6  # refunded at once, exactly
    journal.close(remove=False)  # killed before any flush
    replayed: list[ReplayedFlush] = []
    replay_journals(tmp_path, database, replayed.append, marks_kept_s=3600)
    [flush] = replayed
    rows: dict[tuple[str, int], list[int]] = {}
    for (_, _, _, _, scenario, _, plan), (count, nano) in flush.rows.items():
        total = rows.setdefault((scenario, plan), [0, 0])
        total[0] += count
        total[1] += nano
    assert rows == {(Scenario.FIRST_CHOICE, 5): [0, 0], (Scenario.DISPUTED, 0): [3, 0]}
    assert flush.spend.get(1, 0) == 0  # charged and refunded in the one flush


def test_the_metrics_tell_each_nodes_audits_passed_and_failed() -> None:
    w = world({"a": FORGED, "b": HONEST, "c": HONEST})
    w.call(balance())
    w.audit_all()
    deps = w.deps
    sync = StorageSync(
        create_engine("sqlite://"),
        deps.meter,
        deps.credits,
        lambda snapshot: None,
        version=1,
        sync_interval_s=1,
        flush_interval_s=1,
    )
    state = RouterState(
        lambda: deps.metrics,
        lambda: w.service.snapshot,
        deps.health,
        deps.cooldowns,
        sync,
        w.auditor,
    )
    text = RouterExposition(state).render().decode()
    assert 'chainrouter_node_audits_total{node="1",outcome="failed"} 1.0' in text
    assert 'chainrouter_node_audits_total{node="2",outcome="passed"} 1.0' in text
    assert 'chainrouter_node_audits_total{node="3",outcome="passed"} 1.0' in text
    assert "chainrouter_audit_samples_dropped_total 0.0" in text


def test_a_cordon_another_router_made_disputes_what_this_one_served_of_the_node() -> None:
    w = world({"a": HONEST, "b": HONEST, "c": HONEST}, audits=AuditSettings(rate=0.0))
    start = w.balance()
    w.call(balance())
    w.call(balance())
    assert w.cordons is not None
    w.cordons.elsewhere(frozenset({1}))  # the snapshot says node 1 is cordoned
    usage = w.metered()
    assert usage[Scenario.DISPUTED] == (2, 0)
    assert usage[Scenario.FIRST_CHOICE] == (0, 0)
    assert w.balance() == start
    [write] = w.cordons.take_writes()
    assert (write.node_id, write.reason, write.disputed_calls, write.disputed_nano) == (
        1,
        "",
        2,
        20,
    )
    w.cordons.elsewhere(frozenset({1}))  # the next snapshot: nothing twice
    assert w.cordons.take_writes() == []
    w.call(balance())
    assert w.urls_called()[-1] == "http://b"


@pytest.mark.parametrize("seed", [51, 52, 53])
def test_a_lying_node_is_caught_within_its_first_1000_answers_at_the_default_rate(
    seed: int,
) -> None:
    """At 1 %, a node lying in every answer goes unaudited through 1,000 of them with a chance
    of 0.99 ** 1000 (4 in 100,000): caught, and cordoned at its first audit."""
    draw = Random(seed).random
    w = world({"a": FORGED, "b": HONEST, "c": HONEST}, audits=AuditSettings(), draw=draw)
    assert w.cordons is not None
    answered = 0
    while answered < 1000 and not w.cordons.is_cordoned(1):
        w.call(balance())
        answered += 1
        w.audit_all()
    assert w.cordons.is_cordoned(1), "not caught in 1,000 answers"
    assert answered > 1  # found by sampling, not at once
    assert w.metered()[Scenario.DISPUTED] == (answered, 0)  # every answer it gave, refunded
