"""Node capabilities against real nodes: an archive anvil, an anvil that keeps 5 blocks of state
(`--prune-history 5`), and the fault-injecting upstream relaying to them as a node without
tracing or with a 10-block eth_getLogs limit. Every call is answered by a node that can, that
node is billed, node failures cost nothing, and when none can the client gets the error of spec
section 7 that says why."""

from __future__ import annotations

import json
from collections.abc import Generator
from decimal import Decimal
from typing import Any

import httpx
import pytest

from chainrouter.domain.enums import LedgerEntryKind, Scenario
from chainrouter.domain.urls import normalise_url
from chainrouter.stores.sql.ledger import record_credit_change
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import AnvilNodes, start_anvil_nodes
from tests.router.conftest import CHAIN_A, World, WorldFactory, provider, rpc, world_config

pytestmark = pytest.mark.anyio

ADDRESS = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"  # anvil's first funded account
MINED = 40
METHODS = ("eth_getBalance", "trace_block", "debug_traceBlockByNumber", "eth_getLogs")
NANO = 10**9


@pytest.fixture(scope="module")
def nodes() -> Generator[AnvilNodes]:
    """An archive node and a pruned node of chain A, both mined to block 40."""
    started = start_anvil_nodes(
        (("archive", CHAIN_A), ("pruned", CHAIN_A)),
        extra_args={"pruned": ["--prune-history", "5"]},
    )
    found = next(started)
    for url in found.urls.values():
        httpx.post(url, json=rpc("anvil_mine", [hex(MINED)]), timeout=10).raise_for_status()
    yield found
    started.close()


def _port(url: str) -> str:
    return url.rsplit(":", 1)[1]


def _world_providers(prices: dict[str, tuple[str, dict[str, Any] | None]]) -> list[dict[str, Any]]:
    """One provider per node URL, each pricing METHODS at its price."""
    found = []
    for index, (url, (price, capabilities)) in enumerate(prices.items()):
        declared = {} if capabilities is None else {"capabilities": capabilities}
        found.append(
            provider(f"p{index}", dict.fromkeys(METHODS, price), [(url, CHAIN_A, declared)])
        )
    return found


async def _world(
    make_world: WorldFactory, prices: dict[str, tuple[str, dict[str, Any] | None]]
) -> World:
    world = await make_world(world_config(_world_providers(prices), credits="100"))
    for node in world.runtime.current_nodes():
        await world.check_health(node)
    return world


async def _call(world: World, method: str, params: list[Any]) -> tuple[int, dict[str, Any]]:
    reply = await world.call(rpc(method, params))
    answer: dict[str, Any] = json.loads(reply.body)
    return reply.status, answer


async def _spent(world: World, before: int) -> Decimal:
    await world.runtime.sync.flush()
    return Decimal(before - world.stored_balance()) / NANO


async def test_old_state_is_read_from_the_archive_node_and_only_it_is_billed(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    no_trace_path = f"/relay/{_port(nodes.urls['pruned'])}/no-trace/state"
    no_trace = upstream.url(no_trace_path)
    world = await _world(
        make_world,
        {
            no_trace: ("1", None),  # pruned, no tracing: the cheapest
            nodes.urls["pruned"]: ("2", None),
            nodes.urls["archive"]: ("5", None),
        },
    )
    before, checks = world.stored_balance(), upstream.requests[no_trace_path]
    for block in ("0x1", "0x0"):
        status, answer = await _call(world, "eth_getBalance", [ADDRESS, block])
        assert (status, answer["result"]) == (200, "0x21e19e0c9bab2400000")
    assert upstream.requests[no_trace_path] == checks + 1  # learned from: asked once
    status, answer = await _call(world, "eth_getBalance", [ADDRESS, hex(MINED - 1)])
    assert status == 200  # recent state: the cheapest node has it
    assert await _spent(world, before) == Decimal("5") * 2 + Decimal("1")
    usage = world.stored_usage_by_scenario()
    assert usage[Scenario.FAILOVER] == (1, 5 * NANO)  # the failures before it cost nothing
    assert usage[Scenario.FIRST_CHOICE] == (2, 6 * NANO)


async def test_a_trace_goes_past_the_node_without_tracing(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    no_trace = upstream.url(f"/relay/{_port(nodes.urls['archive'])}/no-trace/trace")
    world = await _world(make_world, {no_trace: ("1", None), nodes.urls["archive"]: ("5", None)})
    before = world.stored_balance()
    for method, params in (
        ("trace_block", [hex(MINED)]),
        ("debug_traceBlockByNumber", [hex(MINED), {}]),
        ("trace_block", [hex(MINED - 1)]),
    ):
        status, answer = await _call(world, method, params)
        assert (status, answer["result"]) == (200, [])
    # health check, then each namespace once: trace_* and debug_* are learned apart
    assert upstream.requests[f"/relay/{_port(nodes.urls['archive'])}/no-trace/trace"] == 2 + 2
    assert await _spent(world, before) == Decimal("15")


async def test_no_tracing_node_is_minus_32011_unbilled(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    no_trace = upstream.url(f"/relay/{_port(nodes.urls['archive'])}/no-trace/only")
    world = await _world(make_world, {no_trace: ("1", None)})
    before = world.stored_balance()
    for _ in range(2):  # learned from the node's error, then known
        status, answer = await _call(world, "trace_block", [hex(MINED)])
        assert status == 422
        assert answer["error"]["code"] == -32011
    assert upstream.requests[f"/relay/{_port(nodes.urls['archive'])}/no-trace/only"] == 2 + 1
    assert await _spent(world, before) == 0
    assert world.stored_usage_by_scenario() == {Scenario.INCAPABLE: (2, 0)}


async def test_state_no_node_keeps_is_minus_32012_naming_the_oldest_kept(
    make_world: WorldFactory, nodes: AnvilNodes
) -> None:
    world = await _world(make_world, {nodes.urls["pruned"]: ("1", None)})
    status, answer = await _call(world, "eth_getBalance", [ADDRESS, "0x1"])
    assert status == 422
    error = answer["error"]
    assert error["code"] == -32012
    assert error["message"].startswith("insufficient historical state depth: block 1 is older")
    assert error["data"]["requirement"] == "state"
    assert error["data"]["oldest_available"] >= 2  # what its error said; a probe says more:
    prober = world.runtime.prober
    assert prober is not None
    for node in world.runtime.current_nodes():
        assert await world.executor.run(prober.probe(node))
    status, answer = await _call(world, "eth_getBalance", [ADDRESS, "0x1"])
    assert MINED - 6 <= answer["error"]["data"]["oldest_available"] <= MINED


async def test_requirements_met_only_apart_are_minus_32013(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    no_trace = upstream.url(f"/relay/{_port(nodes.urls['archive'])}/no-trace/apart")
    world = await _world(
        make_world,
        {
            no_trace: ("1", {"state_history": "archive", "trace": False, "debug": False}),
            nodes.urls["pruned"]: ("2", {"state_history": 5}),
        },
    )
    status, answer = await _call(world, "trace_block", ["0x2"])
    assert (status, answer["error"]["code"]) == (422, -32013)
    assert "state at block 1" in answer["error"]["message"]


async def test_blocks_past_the_head_are_answered_as_the_node_answers_them(
    make_world: WorldFactory, nodes: AnvilNodes
) -> None:
    world = await _world(make_world, {nodes.urls["archive"]: ("1", None)})
    for block in (MINED + 3, MINED + 50_000):  # anvil: the caller's fault, -32602
        status, answer = await _call(world, "eth_getBalance", [ADDRESS, hex(block)])
        assert (status, answer["error"]["code"]) == (200, -32602)
        assert "BlockOutOfRange" in answer["error"]["message"]


async def test_a_malformed_block_is_minus_32602(
    make_world: WorldFactory, nodes: AnvilNodes
) -> None:
    world = await _world(make_world, {nodes.urls["archive"]: ("1", None)})
    status, answer = await _call(world, "eth_getBalance", [ADDRESS, "0xnope"])
    assert (status, answer["error"]["code"]) == (400, -32602)


async def test_a_log_range_wider_than_a_nodes_limit_goes_elsewhere_or_is_minus_32005(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    narrow_path = f"/relay/{_port(nodes.urls['archive'])}/logs-range/10/logs"
    narrow = upstream.url(narrow_path)
    world = await _world(make_world, {narrow: ("1", None), nodes.urls["archive"]: ("5", None)})
    before = world.stored_balance()
    wide = [{"fromBlock": "0x1", "toBlock": "0x15"}]  # 21 blocks
    assert (await _call(world, "eth_getLogs", wide))[1]["result"] == []
    assert (await _call(world, "eth_getLogs", wide))[1]["result"] == []
    narrow_range = [{"fromBlock": "0x1", "toBlock": "0xa"}]
    assert (await _call(world, "eth_getLogs", narrow_range))[1]["result"] == []
    assert upstream.requests[narrow_path] == 2 + 2  # health, the wide range once, the narrow
    assert await _spent(world, before) == Decimal("11")


async def test_a_log_range_wider_than_every_nodes_limit_is_minus_32005_with_the_widest(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    narrow = upstream.url(f"/relay/{_port(nodes.urls['archive'])}/logs-range/10/alone")
    alone = await _world(make_world, {narrow: ("1", None)})
    wide = [{"fromBlock": "0x1", "toBlock": "0x15"}]
    status, answer = await _call(alone, "eth_getLogs", wide)
    assert (status, answer["error"]["code"], answer["error"]["data"]) == (200, -32005, 10)
    assert answer["error"]["message"].endswith("try a block range of at most 10 blocks")


EMIT_ONE_LOG = "0x60006000a000"  # init code: LOG0 of nothing, then stop


async def test_a_range_wider_than_every_nodes_limit_is_split_and_merged_as_the_node_has_it(
    make_world: WorldFactory, upstream: FaultyUpstream
) -> None:
    started = start_anvil_nodes((("logs", CHAIN_A),))
    logs_node = next(started)
    try:
        url = logs_node.urls["logs"]
        for _ in range(12):  # blocks 1 to 12, one log each
            tx = {"from": ADDRESS, "data": EMIT_ONE_LOG}
            httpx.post(url, json=rpc("eth_sendTransaction", [tx]), timeout=10).raise_for_status()
        query = [{"fromBlock": "0x1", "toBlock": "0xc"}]
        direct = httpx.post(url, json=rpc("eth_getLogs", query), timeout=10).json()["result"]
        assert len(direct) == 12
        path = f"/relay/{_port(url)}/logs-range/5/split"
        world = await _world(make_world, {upstream.url(path): ("1", None)})
        before = world.stored_balance()
        first = await _call(world, "eth_getLogs", query)  # the node's limit learned
        assert first[1]["error"]["data"] == 5
        reply = await world.call(rpc("eth_getLogs", query))
        answer = json.loads(reply.body)
        assert answer.get("result") == direct, answer  # the whole answer when it is not
        assert dict(reply.headers) == {"x-logs-split-ranges": "3"}
        assert await _spent(world, before) == Decimal(3)  # per range served
        assert world.stored_usage_by_scenario()[Scenario.SPLIT] == (3, 3 * NANO)  # ranges
    finally:
        started.close()


async def test_a_split_range_holds_what_each_range_may_cost_so_it_is_never_billed_past_the_check(
    make_world_on_each_backend: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    # The cheap node serves 5 blocks, the dear one 10: blocks 1 to 25 are asked as 1-10 and
    # 11-20 (the dear node alone can) and 21-25 (the cheap node first, the dear one after it).
    # They may cost 4 + 4 + 4; they will cost 4 + 4 + 1. The first route's price times the
    # ranges (1 x 3) would let a customer with 5 credits through, to be billed 9.
    port = _port(nodes.urls["archive"])
    cheap = upstream.url(f"/relay/{port}/logs-range/5/held-cheap")
    dear = upstream.url(f"/relay/{port}/logs-range/10/held-dear")
    prices: dict[str, tuple[str, dict[str, Any] | None]] = {
        cheap: ("1", {"logs_max_block_range": 5}),
        dear: ("4", {"logs_max_block_range": 10}),
    }
    world = await make_world_on_each_backend(world_config(_world_providers(prices), credits="5"))
    for node in world.runtime.current_nodes():
        await world.check_health(node)
    query = [{"fromBlock": "0x1", "toBlock": "0x19"}]
    status, answer = await _call(world, "eth_getLogs", query)
    assert (status, answer["error"]["code"]) == (402, -32601)
    assert await _spent(world, world.stored_balance()) == 0
    assert world.stored_balance() == 5 * NANO

    with world.engine.begin() as connection:  # exactly what the three ranges may cost
        record_credit_change(
            connection,
            customer_id=world.customer_id,
            kind=LedgerEntryKind.GRANT,
            amount_nano=7 * NANO,
            reference="top-up",
        )
    await world.runtime.sync.flush()
    status, answer = await _call(world, "eth_getLogs", query)
    assert (status, answer["result"]) == (200, [])
    credits = world.runtime.service.credits
    assert credits.available(world.customer_id) == 3 * NANO  # the unused hold given back
    assert await world.runtime.sync.flush()
    assert world.stored_balance() == 3 * NANO


async def test_the_prober_finds_what_each_node_can_answer(
    make_world: WorldFactory, nodes: AnvilNodes, upstream: FaultyUpstream
) -> None:
    no_trace = upstream.url(f"/relay/{_port(nodes.urls['archive'])}/no-trace/probed")
    world = await _world(
        make_world,
        {
            no_trace: ("1", None),
            nodes.urls["pruned"]: ("2", None),
            nodes.urls["archive"]: ("5", None),
        },
    )
    prober, book = world.runtime.prober, world.runtime.capabilities
    assert prober is not None
    found = {}
    for node in world.runtime.current_nodes():
        assert await world.executor.run(prober.probe(node))
        found[node.url] = book.of(node)
    archive, pruned, relayed = (
        found[normalise_url(nodes.urls["archive"])],
        found[normalise_url(nodes.urls["pruned"])],
        found[normalise_url(no_trace)],
    )
    assert (archive.archive, archive.trace, archive.debug, archive.blocks_from) == (
        True,
        True,
        True,
        0,
    )
    assert not pruned.archive
    assert pruned.state_depth is not None
    assert 4 <= pruned.state_depth <= 6
    assert pruned.blocks_from == 0  # it prunes state, not blocks
    assert (relayed.archive, relayed.trace, relayed.debug) == (True, False, False)
