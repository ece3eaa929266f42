"""What audits and proofs found of each node, kept in storage (docs/integrity.md, "What is visible
where"): counted in memory on the request path, added to the node's totals at the router's
flush, so that routers add up; read by the provider's node status and the administrator's views.

The nodes are a real anvil reached through the fault-injecting upstream's relays, each of its own
provider; the liar is a relay in `lie` mode (its balances one more, well-formed)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from chainrouter.domain.records import NodeChecksWrite
from chainrouter.management import nodes
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.node_checks import LAST_AT, NodeCheck, NodeChecks
from chainrouter.router.sync import StorageSync
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.node_checks import node_checks, write_node_checks
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import CHAIN_A, AnvilNodes, node_result
from tests.router.conftest import World, WorldFactory, provider, rpc, world_config

ADDRESS = "0x" + "5a" * 20
AT = "0x1"  # final: anvil's finalized block is 64 behind its head of 100
PRICES = {"eth_getBalance": "0.000001", "eth_blockNumber": "0.000001", "eth_chainId": "0"}


def _config(upstream: FaultyUpstream, anvil: AnvilNodes, paths: dict[str, str]) -> dict[str, Any]:
    """One provider per path, each with one node of chain A; the first listed is cheapest."""
    port = anvil.urls["node"].rsplit(":", 1)[1]
    providers = []
    for index, (name, path) in enumerate(paths.items()):
        prices = {m: p if p == "0" else f"0.00000{index + 1}" for m, p in PRICES.items()}
        url = upstream.url(path.format(port=port))
        providers.append(provider(name, prices, [(url, CHAIN_A)]))
    return world_config(providers)


async def _ready(world: World) -> None:
    for node in world.runtime.current_nodes():
        await world.check_health(node)


def _node(world: World, provider_slug: str) -> tuple[int, int]:
    """(provider id, node id) of the provider's one node."""
    with world.engine.connect() as connection:
        row = connection.execute(
            select(t.providers.c.id, t.nodes.c.id)
            .select_from(t.nodes)
            .join(t.plans, t.plans.c.id == t.nodes.c.plan_id)
            .join(t.providers, t.providers.c.id == t.plans.c.provider_id)
            .where(t.providers.c.slug == provider_slug)
        ).one()
    return int(row[0]), int(row[1])


def _status(world: World, provider_slug: str) -> nodes.NodeStatusReport:
    """The node's status as the provider API reads it (GET /provider/nodes/{id}/status)."""
    provider_id, node_id = _node(world, provider_slug)
    return nodes.node_status(world.engine, provider_id, node_id, "http")


@pytest.mark.anyio
async def test_a_node_an_audit_outvotes_shows_its_failed_audit_and_the_referees_their_passes(
    make_world_on_each_backend: WorldFactory,
    final_blocks_node: AnvilNodes,
    upstream: FaultyUpstream,
) -> None:
    paths = {
        "liar": "/relay/{port}/lie/eth_getBalance/checks-liar",
        "b": "/relay/{port}/full/checks-b",
        "c": "/relay/{port}/full/checks-c",
    }
    world = await make_world_on_each_backend(
        _config(upstream, final_blocks_node, paths), audit_rate=1.0
    )
    await _ready(world)
    auditor = world.runtime.auditor
    assert auditor is not None
    before = datetime.now(UTC)

    await world.call(rpc("eth_getBalance", [ADDRESS, AT]))  # the liar's, the cheapest
    await world.executor.run(auditor.drain())
    assert _status(world, "liar").checks.audits_failed == 0  # counted, not yet flushed
    await world.runtime.sync.write_node_checks()  # the router's periodic flush

    liar = _status(world, "liar")
    assert (liar.checks.audits_failed, liar.checks.audits_passed) == (1, 0)
    failed_at = liar.checks.last_audit_failed_at
    assert failed_at is not None
    assert failed_at >= before.replace(microsecond=0)
    honest = [_status(world, name).checks for name in ("b", "c")]
    assert [c.audits_passed for c in honest] == [1, 1]  # the majority that outvoted it
    assert all(c.audits_failed == 0 and c.last_audit_failed_at is None for c in honest)


@pytest.mark.anyio
async def test_a_refuted_answer_counts_against_its_node_and_the_proven_one_for_its_node(
    make_world_on_each_backend: WorldFactory,
    final_blocks_node: AnvilNodes,
    upstream: FaultyUpstream,
) -> None:
    paths = {
        "liar": "/relay/{port}/lie/eth_getBalance/proofs-liar",
        "honest": "/relay/{port}/full/proofs-honest",
    }
    world = await make_world_on_each_backend(
        _config(upstream, final_blocks_node, paths), verify="always"
    )
    await _ready(world)
    truth = node_result(final_blocks_node.urls["node"], "eth_getBalance", [ADDRESS, AT])

    reply = await world.call(rpc("eth_getBalance", [ADDRESS, AT]))
    assert reply.status == 200
    assert dict(reply.headers).get("x-verified") == "proof"
    assert truth in reply.body.decode()
    await world.runtime.sync.write_node_checks()

    liar, honest = _status(world, "liar").checks, _status(world, "honest").checks
    assert (liar.proofs_failed, liar.proofs_checked) == (1, 0)
    assert liar.last_proof_failed_at is not None
    assert (honest.proofs_checked, honest.proofs_failed) == (1, 0)
    assert honest.last_proof_checked_at is not None


@pytest.mark.anyio
async def test_two_routers_counts_add_up_in_storage(
    make_world_on_each_backend: WorldFactory,
    final_blocks_node: AnvilNodes,
    upstream: FaultyUpstream,
) -> None:
    paths = {
        "a": "/relay/{port}/full/two-a",
        "b": "/relay/{port}/full/two-b",
        "c": "/relay/{port}/full/two-c",
    }
    config = _config(upstream, final_blocks_node, paths)
    routers = [await make_world_on_each_backend(config, audit_rate=1.0) for _ in range(2)]
    for world in routers:
        await _ready(world)
        auditor = world.runtime.auditor
        assert auditor is not None
        for i in range(3):
            await world.call(rpc("eth_getBalance", [ADDRESS, AT], i))  # a's, the cheapest
        await world.executor.run(auditor.drain())
    for world in routers:  # each flushes its own, in turn
        await world.runtime.sync.write_node_checks()
    assert _status(routers[0], "a").checks.audits_passed == 6
    await routers[0].runtime.sync.write_node_checks()  # nothing new: nothing added twice
    assert _status(routers[1], "a").checks.audits_passed == 6


# -- storage ---------------------------------------------------------------------------------


def _nodes_in(engine: Engine, count: int) -> list[int]:
    providers = [
        provider(f"p{i}", {"eth_chainId": "0"}, [(f"http://node-{i}.example", CHAIN_A)])
        for i in range(count)
    ]
    apply_config(engine, validate_document(world_config(providers)))
    with engine.connect() as connection:
        return sorted(connection.execute(select(t.nodes.c.id)).scalars())


def test_concurrent_flushes_add_up_and_keep_the_latest_time(engine: Engine) -> None:
    """Routers flushing at once on one database: every increment lands, none twice."""
    node_ids = _nodes_in(engine, 3)
    routers, flushes = 4, 10

    def router(index: int) -> None:
        for flush in range(flushes):
            writes = [
                NodeChecksWrite(
                    node_id,
                    audits_passed=1,
                    proofs_checked=2,
                    last_audit_passed_at=1.8e9 + index * 100 + flush,
                )
                for node_id in node_ids
            ]
            write_node_checks(engine, writes)

    threads = [threading.Thread(target=router, args=(i,)) for i in range(routers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with engine.connect() as connection:
        stored = node_checks(connection, node_ids)
    for node_id in node_ids:
        checks = stored[node_id]
        assert (checks.audits_passed, checks.proofs_checked) == (40, 80)
        assert (checks.audits_failed, checks.proofs_failed) == (0, 0)
        latest = datetime.fromtimestamp(1.8e9 + (routers - 1) * 100 + flushes - 1, UTC)
        assert checks.last_audit_passed_at == latest
        assert checks.last_proof_checked_at is None


def test_counts_of_a_node_deleted_since_are_dropped_not_retried_forever(engine: Engine) -> None:
    node_ids = _nodes_in(engine, 2)
    gone = 10**9
    write_node_checks(
        engine, [NodeChecksWrite(node_ids[0], audits_failed=1), NodeChecksWrite(gone, 1)]
    )
    with engine.connect() as connection:
        stored = node_checks(connection, [*node_ids, gone])
    assert list(stored) == [node_ids[0]]
    assert stored[node_ids[0]].audits_failed == 1


@pytest.mark.anyio
async def test_counts_storage_refuses_are_kept_and_written_once_at_the_next_flush(
    engine: Engine,
) -> None:
    [node_id] = _nodes_in(engine, 1)
    counted = NodeChecks()
    sync = StorageSync(
        engine,
        UsageMeter(),
        CreditView(),
        lambda snapshot: None,
        version=1,
        sync_interval_s=1,
        flush_interval_s=1,
        node_checks=counted,
    )
    t.node_checks.drop(engine)  # storage refuses the write (no such table)
    counted.add(node_id, NodeCheck.AUDIT_FAILED)
    await sync.write_node_checks()
    assert counted.pending() == 1  # put back
    t.node_checks.create(engine)
    counted.add(node_id, NodeCheck.AUDIT_FAILED)
    await sync.write_node_checks()
    await sync.write_node_checks()  # nothing left: nothing added twice
    assert counted.pending() == 0
    with engine.connect() as connection:
        assert node_checks(connection, [node_id])[node_id].audits_failed == 2


_CHECKS = st.sampled_from(list(NodeCheck))


@settings(max_examples=60, deadline=None)
@given(
    adds=st.lists(st.tuples(st.integers(1, 3), _CHECKS), max_size=40),
    takes=st.sets(st.integers(0, 40)),
    failed=st.sets(st.integers(0, 40)),
)
def test_what_is_counted_is_taken_once_whatever_the_flushes_and_their_failures(
    adds: list[tuple[int, NodeCheck]], takes: set[int], failed: set[int]
) -> None:
    """A flush between any two checks, some of them failing (put back): the totals written
    are the checks counted, each once, and each time the latest of its kind."""
    clock = iter(range(1, 1000))
    counted = NodeChecks(now=lambda: float(next(clock)))
    written: dict[tuple[int, str], int] = {}
    latest: dict[tuple[int, str], float] = {}

    def flush(index: int) -> None:
        writes = counted.take()
        if index in failed:
            counted.put_back(writes)
            return
        for write in writes:
            for check in NodeCheck:
                n = getattr(write, check.value)
                if n:
                    key = (write.node_id, check.value)
                    written[key] = written.get(key, 0) + n
                    at = getattr(write, LAST_AT[check])
                    latest[key] = max(latest.get(key, 0.0), at)

    expected: dict[tuple[int, str], int] = {}
    last: dict[tuple[int, str], float] = {}
    for index, (node_id, check) in enumerate(adds):
        if index in takes:
            flush(index)
        counted.add(node_id, check)
        expected[(node_id, check.value)] = expected.get((node_id, check.value), 0) + 1
        last[(node_id, check.value)] = float(index + 1)
    flush(-1)
    assert counted.pending() == 0
    assert written == expected
    assert latest == last
