"""Subscriptions through a served router (issue 31, "done when"), on both executors: the chain has
two WebSocket nodes (relays to one anvil, so one can be killed while the chain goes on); the
followed one dies mid-stream and subscribers get every head and log once, in order; a reorg
sends the orphaned logs again with `removed: true`; the bill is exactly what was delivered."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from sqlalchemy import select
from websockets.asyncio.client import connect

from chainrouter.management.usage import Granularity, Section, build_report, make_query
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.anvil import (
    CHAIN_A,
    DEPLOY_LOGGING,
    LOG_TOPIC,
    AnvilNodes,
    node_result,
    start_anvil_nodes,
)
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

pytestmark = pytest.mark.anyio

HEAD_PRICE, LOGS_PRICE = Decimal("0.000002"), Decimal("0.000003")
NANO = 1_000_000_000


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNodes]:
    yield from start_anvil_nodes((("ws", CHAIN_A),))


@pytest.fixture(scope="module", params=["python", "native"])
def served(
    request: pytest.FixtureRequest,
    node: AnvilNodes,
    upstream_server: FaultyUpstream,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Served, list[str]]]:
    """The router, and the relay paths of its two WebSocket nodes (the first is followed)."""
    tmp = tmp_path_factory.mktemp("ws-served")
    database_url = f"sqlite:///{tmp / 'ws.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    http = node.urls["ws"]
    port = http.rsplit(":", 1)[1]
    relays = [f"/ws-relay/{port}/{request.param}/first", f"/ws-relay/{port}/{request.param}/second"]
    priced = provider("p", {"eth_blockNumber": "0.0000001", "eth_chainId": "0"}, [(http, CHAIN_A)])
    plan = priced["plans"][0]
    plan["methods"] += [
        {"method": "newHeads", "node_target_type": "ws", "cost": str(HEAD_PRICE)},
        {"method": "logs", "node_target_type": "ws", "cost": str(LOGS_PRICE)},
    ]
    plan["ws_nodes"] = [
        {"url": upstream_server.ws_url(path), "chain_id": CHAIN_A} for path in relays
    ]
    key = api_key("main")
    apply_config(engine, validate_document(world_config([priced], [key])))
    engine.dispose()
    settings = {
        "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "0.5",
        # Short, so that a test sees a WebSocket outlive it: it bounds request heads only.
        "CHAINROUTER_REQUEST_HEAD_TIMEOUT_S": "1",
    }
    router = launch_router(
        Path(tmp), request.param, "127.0.0.1", database_url, key["secret"], key["secret"], settings
    )
    yield router, relays
    router.process.terminate()
    router.process.wait(30)
    for path in relays:
        upstream_server.down.discard(path)


def _rpc(node: AnvilNodes, method: str, params: list[Any]) -> Any:
    return node_result(node.urls["ws"], method, params)


def _usage_report(served: Served) -> tuple[dict[str, int], dict[str, int]]:
    """The customer's usage report (GET /usage's): calls per method and per scenario."""
    engine = create_database_engine(served.database_url)
    with engine.connect() as connection:
        customer = connection.execute(select(t.customers.c.id)).scalar_one()
    sections = frozenset({Section.TOP_METHODS, Section.BY_SCENARIO})
    query = make_query(
        customer,
        start=None,
        end=None,
        sections=sections,
        group_by=None,
        granularity=Granularity.DAY,
        chain_id=None,
        api_key_id=None,
        limit=100,
    )
    report = build_report(engine, query)
    engine.dispose()
    methods = {r.method or "": r.request_count for r in report.sections[Section.TOP_METHODS]}
    scenarios = {r.scenario or "": r.request_count for r in report.sections[Section.BY_SCENARIO]}
    return methods, scenarios


def _scrape(served: Served) -> list[Sample]:
    """The router's /metrics (loopback may read it by default)."""
    text = httpx.get(served.base + "/metrics").text
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _metric(samples: list[Sample], name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


async def _subscribe(ws: Any, params: list[Any], call_id: int) -> str:
    await ws.send(
        json.dumps({"jsonrpc": "2.0", "id": call_id, "method": "eth_subscribe", "params": params})
    )
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if message.get("id") == call_id:
            subscription: str = message["result"]
            return subscription


class Received:
    """What one client got, by subscription, in arrival order."""

    def __init__(self) -> None:
        self.by_subscription: dict[str, list[dict[str, Any]]] = {}

    async def read(self, ws: Any, until: Any, seconds: float = 20) -> None:
        try:
            await self._read(ws, until, seconds)
        except TimeoutError:
            raise AssertionError(f"not in time; got {self.by_subscription}") from None

    async def _read(self, ws: Any, until: Any, seconds: float) -> None:
        async with asyncio.timeout(seconds):
            while not until(self):
                message = json.loads(await ws.recv())
                if message.get("method") == "eth_subscription":
                    params = message["params"]
                    self.by_subscription.setdefault(params["subscription"], []).append(
                        params["result"]
                    )

    async def drain(self, ws: Any, quiet_s: float = 0.7) -> None:
        """Read for `quiet_s` more: whatever the router sent (and billed) is counted."""
        with contextlib.suppress(TimeoutError):
            await self._read(ws, lambda got: False, quiet_s)

    def of(self, subscription: str) -> list[dict[str, Any]]:
        return self.by_subscription.get(subscription, [])

    def billed_nano(self, heads: str, logs: str) -> int:
        return int(len(self.of(heads)) * HEAD_PRICE * NANO + len(self.of(logs)) * LOGS_PRICE * NANO)


async def test_a_node_killed_mid_stream_leaves_no_gap_no_repeat_and_the_bill_exact(
    served: tuple[Served, list[str]], node: AnvilNodes, upstream_server: FaultyUpstream
) -> None:
    router, (first, _) = served
    url = router.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/{router.key}"
    account = _rpc(node, "eth_accounts", [])[0]
    before = router.balance()
    got = Received()
    async with connect(url) as ws:
        heads = await _subscribe(ws, ["newHeads"], 1)
        logs = await _subscribe(ws, ["logs", {"topics": [LOG_TOPIC]}], 2)
        await asyncio.sleep(0.5)  # the feed subscribes upstream
        start = int(_rpc(node, "eth_blockNumber", []), 16)
        _rpc(node, "anvil_mine", ["0x2"])
        _rpc(node, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
        await got.read(ws, lambda g: len(g.of(heads)) == 3 and len(g.of(logs)) == 1)
        upstream_server.cut(first)  # the followed node dies
        _rpc(node, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])  # missed
        _rpc(node, "anvil_mine", ["0x3"])  # missed too
        await asyncio.sleep(1.0)
        _rpc(node, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
        await got.read(ws, lambda g: len(g.of(heads)) == 8 and len(g.of(logs)) == 3)
        await got.drain(ws)  # nothing more comes: no repeat
        open_now = _scrape(router)
    numbers = [int(h["number"], 16) for h in got.of(heads)]
    assert numbers == list(range(start + 1, start + 9))
    assert [h["hash"] for h in got.of(heads)] == [
        _rpc(node, "eth_getBlockByNumber", [hex(n), False])["hash"] for n in numbers
    ]
    log_blocks = [int(log["blockNumber"], 16) for log in got.of(logs)]
    assert log_blocks == [start + 3, start + 4, start + 8]
    assert all(log["removed"] is False for log in got.of(logs))
    await asyncio.sleep(1.5)  # the router flushes usage every half second
    assert before - router.balance() == got.billed_nano(heads, logs)
    methods, scenarios = _usage_report(router)  # this module's router: this test runs first
    assert (methods["newHeads"], methods["logs"]) == (8, 3)
    assert scenarios["subscription"] == 11
    # Operators see the same in /metrics: the socket and its feed while open, then what it got.
    assert _metric(open_now, "chainrouter_websocket_connections") == 1
    assert _metric(open_now, "chainrouter_websocket_feeds") == 1
    closed = _scrape(router)
    assert _metric(closed, "chainrouter_websocket_connections") == 0
    notified = "chainrouter_websocket_notifications_total"
    assert _metric(closed, notified, chain=str(CHAIN_A), kind="newHeads") == 8
    assert _metric(closed, notified, chain=str(CHAIN_A), kind="logs") == 3


async def test_a_reorg_sends_the_orphaned_logs_again_removed(
    served: tuple[Served, list[str]], node: AnvilNodes
) -> None:
    router, _ = served
    url = router.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/{router.key}"
    account = _rpc(node, "eth_accounts", [])[0]
    before = router.balance()
    got = Received()
    _rpc(node, "anvil_mine", ["0x3"])  # history below what the reorg replaces
    async with connect(url) as ws:
        heads = await _subscribe(ws, ["newHeads"], 1)
        logs = await _subscribe(ws, ["logs", {"topics": [LOG_TOPIC]}], 2)
        await asyncio.sleep(0.5)
        tx = _rpc(node, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
        start = int(_rpc(node, "eth_getTransactionReceipt", [tx])["blockNumber"], 16)
        _rpc(node, "anvil_mine", ["0x1"])
        # A feed still running from the test before (its grace) may first announce the blocks
        # mined since it last followed a node: heads are awaited by number, not counted.
        await got.read(
            ws,
            lambda g: (
                len(g.of(logs)) == 1
                and any(int(head["number"], 16) == start + 1 for head in g.of(heads))
            ),
        )
        orphaned = got.of(heads)[-1]["hash"]
        announced = len(got.of(heads))
        # Three blocks replaced: the deployment's, the next, and the one before (below the
        # feed's first head when the feed starts with this test's first subscriber).
        _rpc(node, "anvil_reorg", [3, []])
        await got.read(ws, lambda g: len(g.of(logs)) == 2 and g.of(heads)[-1]["hash"] != orphaned)
        await got.drain(ws)
    [emitted, removed] = got.of(logs)
    assert removed == {**emitted, "removed": True}
    # The new branch from the fork, as the node announces it, though the fork may be below the
    # feed's first head: the feed read the blocks below it, unannounced, when it started.
    branch = got.of(heads)[announced:]
    numbers = [int(head["number"], 16) for head in branch]
    assert numbers == [start - 1, start, start + 1]
    ancestor = _rpc(node, "eth_getBlockByNumber", [hex(start - 2), False])["hash"]
    assert [head["parentHash"] for head in branch] == [ancestor] + [h["hash"] for h in branch[:-1]]
    tip = branch[-1]
    assert tip["hash"] == _rpc(node, "eth_getBlockByNumber", [tip["number"], False])["hash"]
    await asyncio.sleep(1.5)
    assert before - router.balance() == got.billed_nano(heads, logs)


async def test_a_websocket_outlives_the_request_head_deadline(
    served: tuple[Served, list[str]],
) -> None:
    """The head deadline (1 s here) bounds how long a client takes to send a request's head; a
    WebSocket connection carries no more heads after its 101 and lives on (the demo's clients
    were cut at 30 s on the native executor)."""
    router, _ = served
    url = router.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/{router.key}"
    async with connect(url, ping_interval=None) as ws:
        await asyncio.sleep(2.5)  # silent, well past the deadline
        await ws.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "eth_chainId"}))
        answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert answer == {"jsonrpc": "2.0", "id": 7, "result": hex(CHAIN_A)}
