"""Open WebSocket connections lose their access as calls do (design notes, "Bounds"), on both
executors: a key deactivated, or its allowed domains changed, closes every socket it holds
within 2 s of the change in storage (4001, or 4003 when the page's Origin is no longer
allowed), sockets whose only subscriptions are filters that never match included: the hub runs
the upgrade's checks again on every open connection (router/ws/hub.py, `recheck`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import update
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.config_version import bump_config_version
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import CHAIN_A, AnvilNodes, start_anvil_nodes
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

pytestmark = pytest.mark.anyio

PAGE = "https://app.example.com"
NEVER = {"address": "0x" + "00" * 19 + "01", "topics": ["0x" + "ee" * 32]}  # no log matches


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNodes]:
    yield from start_anvil_nodes((("ws", CHAIN_A),))


@pytest.fixture(scope="module", params=["python", "native"])
def world(
    request: pytest.FixtureRequest, node: AnvilNodes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Served, str]]:
    """A router whose keys may each hold 3 connections from one address; the last test of the
    module deactivates one and re-domains the other."""
    tmp_path = tmp_path_factory.mktemp("ws-bounds")
    database_url = f"sqlite:///{tmp_path / 'ws.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    http = node.urls["ws"]
    priced = provider("p", {"eth_blockNumber": "0.0000001", "eth_chainId": "0"}, [(http, CHAIN_A)])
    plan = priced["plans"][0]
    plan["methods"] += [{"method": "logs", "node_target_type": "ws", "cost": "0.000003"}]
    plan["ws_nodes"] = [{"url": http.replace("http://", "ws://"), "chain_id": CHAIN_A}]
    key, web = api_key("main"), api_key("web", allowed_domains=["app.example.com"])
    apply_config(engine, validate_document(world_config([priced], [key, web])))
    engine.dispose()
    served = launch_router(
        tmp_path,
        request.param,
        "127.0.0.1",
        database_url,
        key["secret"],
        web["secret"],
        {"CHAINROUTER_WS_MAX_CONNECTIONS_PER_ADDRESS": "3"},
    )
    yield served, database_url
    served.process.terminate()
    served.process.wait(30)


async def _quiet_socket(url: str, **headers: str) -> Any:
    """A connection holding one logs subscription that never matches."""
    ws = await connect(url, additional_headers=headers)
    await ws.send(
        json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["logs", NEVER]}
        )
    )
    answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
    assert "result" in answer, answer
    return ws


async def _closed_within(ws: Any, seconds: float) -> int | None:
    """The close code once the router closes `ws`, waiting at most `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            async for _ in ws:
                pass
    except TimeoutError:
        return None
    except ConnectionClosed:
        pass
    return ws.close_code  # type: ignore[no-any-return]


async def test_a_key_holds_at_most_its_bound_of_connections_from_one_address(
    world: tuple[Served, str],
) -> None:
    served, _ = world
    base = served.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/"
    held = [await connect(base + served.key) for _ in range(3)]
    with pytest.raises(InvalidStatus) as refused:
        await connect(base + served.key)
    assert refused.value.response.status_code == 429
    assert b"max_connections_per_address" in refused.value.response.body
    other = await connect(base + served.restricted_key, additional_headers={"Origin": PAGE})
    for ws in [*held, other]:
        await ws.close()


async def test_a_deactivated_or_re_domained_key_loses_its_quiet_sockets_within_2_s(
    world: tuple[Served, str],
) -> None:
    served, database_url = world
    base = served.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/"
    main = [await _quiet_socket(base + served.key) for _ in range(3)]
    web = [await _quiet_socket(base + served.restricted_key, Origin=PAGE) for _ in range(2)]
    engine = create_database_engine(database_url)
    with engine.begin() as connection:
        connection.execute(
            update(t.api_keys).where(t.api_keys.c.name == "main").values(active=False)
        )
        connection.execute(
            update(t.api_keys)
            .where(t.api_keys.c.name == "web")
            .values(allowed_domains=["other.example.com"])
        )
        bump_config_version(connection)
    changed = time.monotonic()
    engine.dispose()
    codes = await asyncio.gather(*(_closed_within(ws, 2.5) for ws in main + web))
    took = time.monotonic() - changed
    assert codes == [4001] * 3 + [4003] * 2
    assert took < 2.5
