"""Audits against real nodes (docs/integrity.md, "Audits"): a lying node, well-formed and in sync
(its every result a made-up quantity), is caught by the audit of its first answer, cordoned (in
storage too, with its reason), its answers disputed and refunded, its plan not paid; an
administrator's lift brings it back, watched. And the native server samples the calls it serves
under decisions, every n-th, for the same auditor.

The honest nodes are a real anvil node reached through the fault-injecting upstream's relays, as
nodes of other providers; the liar is its `/block/N` node (a head of N, every result N)."""

from __future__ import annotations

import json
import time
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from chainrouter.domain.enums import NodeStatus, Scenario
from chainrouter.management import nodes
from chainrouter.management.earnings import provider_earnings
from chainrouter.management.usage import Granularity
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.schema import utcnow
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes, node_result
from tests.router.conftest import WorldFactory, provider, rpc, world_config
from tests.router.test_decisions_served import router_of  # noqa: F401  (a fixture)

ADDRESS = "0x" + "5a" * 20
AT = "0x1"  # final: anvil's finalized block is 64 behind its head of 100
PRICE = "0.000001"
NANO = 10**9
BALANCE_AT = {"jsonrpc": "2.0", "method": "eth_getBalance", "params": [ADDRESS, AT]}


def result(body: bytes) -> Any:
    return json.loads(body)["result"]


@pytest.fixture
def executor() -> str:
    """The served sampling story is the native server's: the Python executor applies no
    decision (its calls are the pipeline's, told below on both executors)."""
    return "native"


@pytest.mark.anyio
async def test_a_lying_node_is_caught_at_its_first_audit_cordoned_and_its_answers_refunded(
    make_world: WorldFactory, final_blocks_node: AnvilNodes, upstream: FaultyUpstream
) -> None:
    anvil = final_blocks_node.urls["node"]
    port = anvil.rsplit(":", 1)[1]
    head = int(node_result(anvil, "eth_blockNumber", []), 16)
    honest = node_result(anvil, "eth_getBalance", [ADDRESS, AT])
    liar = upstream.url(f"/block/{head}/audits-liar")
    prices = {"eth_getBalance": PRICE, "eth_blockNumber": PRICE, "eth_chainId": "0"}
    config = world_config(
        [
            provider(
                "liar",
                {m: "0.0000001" if p != "0" else p for m, p in prices.items()},
                [(liar, CHAIN_A)],
            ),
            provider("b", prices, [(upstream.url(f"/relay/{port}/full/audits-b"), CHAIN_A)]),
            provider("c", prices, [(upstream.url(f"/relay/{port}/full/audits-c"), CHAIN_A)]),
        ]
    )
    world = await make_world(config, audit_rate=1.0)
    for node in world.runtime.current_nodes():
        await world.check_health(node)
    auditor = world.runtime.auditor
    assert auditor is not None
    start = world.stored_balance()

    forged = [await world.call(rpc("eth_getBalance", [ADDRESS, AT], i)) for i in range(3)]
    assert {result(reply.body) for reply in forged} == {hex(head)}  # believed, at once
    await world.executor.run(auditor.drain())  # the program the router runs beside requests
    truth = await world.call(rpc("eth_getBalance", [ADDRESS, AT], 9))
    assert result(truth.body) == honest

    sync = world.runtime.sync
    assert await sync.flush()
    await sync.write_cordons()
    usage = world.stored_usage_by_scenario()
    assert usage[Scenario.DISPUTED] == (3, 0)
    assert usage[Scenario.FIRST_CHOICE] == (1, int(Decimal(PRICE) * NANO))  # the honest one
    assert world.stored_balance() == start - int(Decimal(PRICE) * NANO)  # three refunded exactly
    with world.engine.connect() as connection:
        row = connection.execute(select(t.nodes).where(t.nodes.c.url == liar)).one()
        liar_provider = connection.execute(
            select(t.providers.c.id).where(t.providers.c.slug == "liar")
        ).scalar_one()
    assert row.status == NodeStatus.CORDONED.value
    assert "eth_getBalance answer on chain 31337 was outvoted by 2 nodes" in row.cordon_reason
    assert (row.disputed_calls, row.disputed_nano) == (3, 300)
    since = utcnow().replace(minute=0, second=0, microsecond=0)
    earned = provider_earnings(world.engine, liar_provider, since, utcnow(), Granularity.HOUR)
    assert sum(e.credits_nano for e in earned.by_plan) == 0  # not paid for a disputed answer
    status = nodes.node_status(world.engine, liar_provider, row.id, "http")
    assert (status.status, status.disputed_calls) == ("cordoned", 3)
    assert status.cordon_reason == row.cordon_reason

    lifted = nodes.lift_cordon(world.engine, row.id)  # the administrator's action
    assert lifted.status == NodeStatus.HEALTHY.value
    assert lifted.cordon_reason is None
    assert lifted.watched_until is not None
    assert await sync.refresh()
    back = [n for n in world.runtime.current_nodes() if n.url == liar]
    assert back
    assert back[0].watched_until > time.time() + 3600  # watched: audited at the higher rate
    cordons = world.runtime.ledger.cordons
    assert cordons is not None
    assert not cordons.is_cordoned(row.id)
    assert world.runtime.health.health(row.id).in_sync  # chosen again, on this router too
    back_to_work = await world.call(rpc("eth_getBalance", [ADDRESS, AT], 10))
    assert result(back_to_work.body) == hex(head)  # the cheapest again (and watched)


def test_the_server_samples_every_nth_call_it_serves_under_a_decision(
    router_of: Any,  # noqa: F811
) -> None:
    """At 50 %, every second call a decision serves is audited (the server counts, per
    decision); the pipeline's own calls are drawn at random. A health check may end a decision
    early (its epoch), and a call then goes to the pipeline, which decides anew: counted per
    decision, so at most one call per decision escapes the count."""
    router = router_of(settings={"CHAINROUTER_AUDIT_RATE": "0.5"})
    before = router.asked()
    calls = 21
    for i in range(calls):
        assert router.post(BALANCE_AT, i).status_code == 200
    decided = router.decided()
    assert decided >= calls - 4, decided  # the first the pipeline's, the rest decided, mostly
    decisions = calls - decided  # each pipeline call's decision served the calls after it
    least = (decided - decisions) // 2  # the server's samples, however the calls were split
    most = decided // 2 + (calls - decided)  # and every pipeline call drawn
    deadline = time.monotonic() + 10
    audits = 0
    while audits < least:  # asked again of the other provider's node, off the answers' path
        assert time.monotonic() < deadline, f"{audits} audits of {decided} decided calls"
        time.sleep(0.05)
        audits = router.asked()[1] - before[1]
    time.sleep(0.3)
    audits = router.asked()[1] - before[1]
    assert least <= audits <= most, (audits, decided)
    assert router.asked()[0] - before[0] == calls  # the client's answers: all the cheap node's


@pytest.mark.anyio
async def test_a_cordon_made_just_before_the_router_stops_is_stored(
    make_world: WorldFactory, final_blocks_node: AnvilNodes, upstream: FaultyUpstream
) -> None:
    """The router writes cordons with its usage, every round and once more as it stops: a liar
    cordoned a moment before a restart stays out after it."""
    port = final_blocks_node.urls["node"].rsplit(":", 1)[1]
    liar = upstream.url(f"/relay/{port}/lie/eth_getBalance/stopping-liar")
    config = world_config(
        [
            provider("liar", {"eth_getBalance": "0.0000001"}, [(liar, CHAIN_A)]),
            provider(
                "b",
                {"eth_getBalance": "0.000001"},
                [(upstream.url(f"/relay/{port}/full/stopping-b"), CHAIN_A)],
            ),
            provider(
                "c",
                {"eth_getBalance": "0.000001"},
                [(upstream.url(f"/relay/{port}/full/stopping-c"), CHAIN_A)],
            ),
        ]
    )
    world = await make_world(config, audit_rate=1.0)
    for node in world.runtime.current_nodes():
        await world.check_health(node)
    auditor = world.runtime.auditor
    assert auditor is not None
    await world.call(rpc("eth_getBalance", [ADDRESS, AT]))
    await world.executor.run(auditor.drain())
    await world.runtime.stop()  # before the next round's write
    with world.engine.connect() as connection:
        row = connection.execute(select(t.nodes).where(t.nodes.c.url == liar)).one()
    assert row.status == NodeStatus.CORDONED.value
