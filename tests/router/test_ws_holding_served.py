"""The holding price through a served router, on both executors (design notes, "Bounds"): a
logs subscription whose filter never matches, held open at 36 credits an hour, charged step by
step while open and for the rest when it ends, shows in the customer's usage as its own row
(`logs`, scenario `subscription_held`, no call), and the balance drops by exactly the usage."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from websockets.asyncio.client import connect

from chainrouter.management.usage import Granularity, Section, build_report, make_query
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import CHAIN_A, AnvilNodes, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

pytestmark = pytest.mark.anyio

PRICE_NANO_PER_HOUR = 36 * 10**9  # 36 credits an hour: 10 nano-credits a millisecond
HOUR_NS = 3600 * 10**9
NEVER = {"address": "0x" + "00" * 19 + "01", "topics": ["0x" + "ee" * 32]}  # no log matches


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNodes]:
    yield from start_anvil_nodes((("ws", CHAIN_A),))


@pytest.fixture(scope="module", params=["python", "native"])
def served(
    request: pytest.FixtureRequest, node: AnvilNodes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ws-holding")
    database_url = f"sqlite:///{tmp / 'ws.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    http = node.urls["ws"]
    priced = provider("p", {"eth_blockNumber": "0.0000001", "eth_chainId": "0"}, [(http, CHAIN_A)])
    plan = priced["plans"][0]
    plan["methods"] += [{"method": "logs", "node_target_type": "ws", "cost": "0.000003"}]
    plan["ws_nodes"] = [{"url": http.replace("http://", "ws://"), "chain_id": CHAIN_A}]
    key = api_key("main")
    apply_config(engine, validate_document(world_config([priced], [key])))
    engine.dispose()
    router = launch_router(
        Path(tmp),
        request.param,
        "127.0.0.1",
        database_url,
        key["secret"],
        key["secret"],
        {
            "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "0.2",
            "CHAINROUTER_WS_SUBSCRIPTION_HOLDING_CREDITS_PER_HOUR": "36",
            "CHAINROUTER_WS_SUBSCRIPTION_HOLDING_STEP_S": "0.2",
        },
    )
    yield router
    router.process.terminate()
    router.process.wait(30)


def _held(served: Served) -> tuple[int, int, int]:
    """The usage report's `subscription_held` row (calls, nano-credits; the only subscription
    held is of `logs`), and all the usage's nano-credits."""
    engine = create_database_engine(served.database_url)
    with engine.connect() as connection:
        customer = connection.execute(select(t.customers.c.id)).scalar_one()
    query = make_query(
        customer,
        start=None,
        end=None,
        sections=frozenset({Section.SUMMARY, Section.BY_SCENARIO, Section.TOP_METHODS}),
        group_by=None,
        granularity=Granularity.DAY,
        chain_id=None,
        api_key_id=None,
        limit=100,
    )
    report = build_report(engine, query)
    engine.dispose()
    assert report.summary is not None
    methods = {r.method for r in report.sections[Section.TOP_METHODS]}
    held = [r for r in report.sections[Section.BY_SCENARIO] if r.scenario == "subscription_held"]
    if not held:
        return 0, 0, report.summary.credits_nano
    assert "logs" in methods
    return held[0].request_count, held[0].credits_nano, report.summary.credits_nano


async def test_a_subscription_held_open_is_charged_for_its_time_in_steps_and_shows_in_usage(
    served: Served,
) -> None:
    before = served.balance()
    assert _held(served)[1] == 0
    url = served.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/{served.key}"
    async with connect(url) as ws:
        subscribe = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "eth_subscribe",
            "params": ["logs", NEVER],
        }
        asked = time.monotonic_ns()
        await ws.send(json.dumps(subscribe))
        subscription = json.loads(await asyncio.wait_for(ws.recv(), 10))["result"]
        answered = time.monotonic_ns()
        await asyncio.sleep(1.5)  # several steps, each flushed
        calls, while_open, _ = _held(served)
        assert calls == 0
        # Charged while open, step by step: at least the steps before the last flush.
        assert while_open >= 10 * 1_000 * 0.6, while_open
        unsubscribe = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "eth_unsubscribe",
            "params": [subscription],
        }
        leaving = time.monotonic_ns()
        await ws.send(json.dumps(unsubscribe))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["result"] is True
        left = time.monotonic_ns()
    await asyncio.sleep(1.0)  # flushed
    calls, held_nano, usage_nano = _held(served)
    assert calls == 0  # holding is not a call
    # The router held it from its subscribe to its unsubscribe: between what the client saw
    # of each, charged floor(price x time held / 1 h).
    least = PRICE_NANO_PER_HOUR * (leaving - answered) // HOUR_NS
    most = PRICE_NANO_PER_HOUR * (left - asked) // HOUR_NS
    assert least <= held_nano <= most, (least, held_nano, most)
    assert held_nano > while_open  # the rest, charged when it ended
    assert before - served.balance() == usage_nano  # the ledger and the usage agree exactly
    await asyncio.sleep(0.6)  # no more steps once it ended
    assert _held(served)[1] == held_nano
