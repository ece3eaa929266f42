"""The WebSocket endpoint as a client uses it (issue 31), on both executors:
`ws://host/rpc/{chainId}/{apiKey}` refused with spec section 7's statuses at the upgrade; calls
over the socket routed and billed as over HTTP; newHeads and logs subscriptions fed by the
provider's WebSocket node; each notification billed at the route's price for its kind."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from web3 import AsyncWeb3, WebSocketProvider
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import (
    CHAIN_A,
    DEPLOY_LOGGING,
    LOG_TOPIC,
    REPO_ROOT,
    AnvilNodes,
    node_result,
    start_anvil_nodes,
)
from tests.router.conftest import api_key, provider, world_config
from tests.router.test_server import Served, launch_router

pytestmark = pytest.mark.anyio

HEAD_PRICE, LOGS_PRICE, CALL_PRICE = "0.000002", "0.000003", "0.0000001"


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNodes]:
    yield from start_anvil_nodes((("ws", CHAIN_A),))


@pytest.fixture(scope="module", params=["python", "native"])
def served(
    request: pytest.FixtureRequest, node: AnvilNodes, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    tmp = tmp_path_factory.mktemp("ws-endpoint")
    database_url = f"sqlite:///{tmp / 'ws.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    http = node.urls["ws"]
    prices = {"eth_blockNumber": CALL_PRICE, "eth_chainId": "0", "eth_getBlockByNumber": CALL_PRICE}
    priced = provider("p", prices, [(http, CHAIN_A)])
    plan = priced["plans"][0]
    plan["methods"] += [
        {"method": "newHeads", "node_target_type": "ws", "cost": HEAD_PRICE},
        {"method": "logs", "node_target_type": "ws", "cost": LOGS_PRICE},
    ]
    plan["ws_nodes"] = [{"url": http.replace("http://", "ws://"), "chain_id": CHAIN_A}]
    key, restricted = api_key("main"), api_key("web", allowed_domains=["app.example.com"])
    apply_config(engine, validate_document(world_config([priced], [key, restricted])))
    engine.dispose()
    settings = {
        "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "0.5",
        "CHAINROUTER_WS_MAX_CONNECTIONS_PER_ADDRESS": "250",  # the many-clients test holds 200
    }
    router = launch_router(
        Path(tmp),
        request.param,
        "127.0.0.1",
        database_url,
        key["secret"],
        restricted["secret"],
        settings,
    )
    yield router
    router.process.terminate()
    router.process.wait(30)


def _ws(served: Served, key: str | None = None) -> str:
    return served.base.replace("http://", "ws://") + f"/rpc/{CHAIN_A}/{key or served.key}"


def _rpc(node: AnvilNodes, method: str, params: list[Any]) -> Any:
    return node_result(node.urls["ws"], method, params)


async def _call(ws: Any, method: str, params: list[Any], call_id: int) -> Any:
    await ws.send(json.dumps({"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}))
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if message.get("id") == call_id:
            return message


async def _notifications(ws: Any, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while len(found) < count:
        message = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if message.get("method") == "eth_subscription":
            found.append(message["params"])
    return found


async def test_a_bad_key_or_a_foreign_origin_is_refused_at_the_upgrade(served: Served) -> None:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(_ws(served, "crk_" + "x" * 40)):
            pass
    assert refused.value.response.status_code == 401
    restricted = _ws(served, served.restricted_key)
    with pytest.raises(InvalidStatus) as foreign:
        async with connect(restricted, origin="https://evil.example"):  # type: ignore[arg-type]
            pass
    assert foreign.value.response.status_code == 403
    free = served.base.replace("http://", "ws://") + f"/rpc/evm/{CHAIN_A}"
    with pytest.raises(InvalidStatus) as public:
        async with connect(free):
            pass
    assert public.value.response.status_code == 404


async def test_calls_and_subscriptions_over_one_socket_billed_exactly(
    served: Served, node: AnvilNodes
) -> None:
    before = served.balance()
    async with connect(_ws(served)) as ws:
        answer = await _call(ws, "eth_blockNumber", [], 1)
        assert answer["result"].startswith("0x")
        heads = (await _call(ws, "eth_subscribe", ["newHeads"], 2))["result"]
        logs = (await _call(ws, "eth_subscribe", ["logs", {"topics": [LOG_TOPIC]}], 3))["result"]
        await asyncio.sleep(0.5)  # the feed subscribes upstream
        _rpc(node, "anvil_mine", ["0x2"])
        account = _rpc(node, "eth_accounts", [])[0]
        _rpc(node, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
        got = await _notifications(ws, 4)  # three heads and the deployment's log
        by_kind = {heads: [], logs: []}  # type: dict[str, list[Any]]
        for params in got:
            by_kind[params["subscription"]].append(params["result"])
        numbers = [int(h["number"], 16) for h in by_kind[heads]]
        assert numbers == list(range(numbers[0], numbers[0] + 3))
        assert [log["topics"] for log in by_kind[logs]] == [[LOG_TOPIC]]
        assert (await _call(ws, "eth_unsubscribe", [heads], 4))["result"] is True
        assert (await _call(ws, "eth_unsubscribe", [heads], 5))["result"] is False
        bad = await _call(ws, "eth_subscribe", ["newBlocks"], 6)
        assert bad["error"]["code"] == -32602
    await asyncio.sleep(1.5)  # the router flushes usage every half second
    nano = 1_000_000_000
    expected = 3 * int(float(HEAD_PRICE) * nano) + int(float(LOGS_PRICE) * nano)
    expected += int(float(CALL_PRICE) * nano)
    assert before - served.balance() == expected


def test_ethers_and_viem_watch_blocks_and_events_unmodified(
    served: Served, node: AnvilNodes
) -> None:
    """ethers' WebSocketProvider ("block" events) and viem's webSocket transport (watchBlocks,
    watchEvent) against the router, as a dApp uses them."""
    script = REPO_ROOT / "tests" / "clients" / "js_ws_clients.mjs"
    process = subprocess.Popen(
        ["node", str(script), _ws(served), LOG_TOPIC, "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
    )
    try:
        assert process.stdout is not None
        assert json.loads(process.stdout.readline()) == {"ready": True}
        _rpc(node, "anvil_mine", ["0x3"])
        account = _rpc(node, "eth_accounts", [])[0]
        _rpc(node, "eth_sendTransaction", [{"from": account, "data": DEPLOY_LOGGING}])
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 0, err
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["viemChain"] == CHAIN_A
    for client in ("ethers", "viem"):
        numbers = seen[client]
        assert len(numbers) >= 3, (client, numbers)
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), client
    assert LOG_TOPIC in seen["viemLogs"]


async def test_web3_py_subscribes_to_new_heads_unmodified(served: Served, node: AnvilNodes) -> None:
    async with AsyncWeb3(WebSocketProvider(_ws(served))) as w3:
        assert await w3.eth.chain_id == CHAIN_A
        subscription = await w3.eth.subscribe("newHeads")
        await asyncio.sleep(0.3)
        _rpc(node, "anvil_mine", ["0x2"])
        numbers = []
        async for message in w3.socket.process_subscriptions():
            assert message["subscription"] == subscription
            numbers.append(message["result"]["number"])
            if len(numbers) == 2:
                break
        assert numbers[1] == numbers[0] + 1
        assert await w3.eth.unsubscribe(subscription)


async def test_a_message_over_the_byte_bound_closes_with_1009_however_few_its_characters(
    served: Served,
) -> None:
    """CHAINROUTER_WS_MAX_MESSAGE_BYTES counts UTF-8 bytes: a message of two-byte characters
    one byte over it is refused, though it holds about half as many characters."""
    bound = 1 << 20  # the default
    head, tail = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["', '"]}'
    room = bound + 1 - len(head) - len(tail)
    message = head + "x" * (room % 2) + "é" * (room // 2) + tail
    assert len(message.encode()) == bound + 1
    assert len(message) < bound * 0.6
    async with connect(_ws(served)) as ws:
        await ws.send(message)
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 10)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009


async def test_hundreds_of_clients_share_one_feed_and_each_gets_every_head_once(
    served: Served, node: AnvilNodes
) -> None:
    clients = [await connect(_ws(served)) for _ in range(200)]
    try:
        for number, ws in enumerate(clients):
            assert "result" in await _call(ws, "eth_subscribe", ["newHeads"], number)
        await asyncio.sleep(0.3)
        _rpc(node, "anvil_mine", ["0x3"])
        got = await asyncio.gather(*(_notifications(ws, 3) for ws in clients))
        for heads in got:
            numbers = [int(params["result"]["number"], 16) for params in heads]
            assert numbers == list(range(numbers[0], numbers[0] + 3))
        assert len({heads[0]["result"]["hash"] for heads in got}) == 1  # one feed, one view
    finally:
        await asyncio.gather(*(ws.close() for ws in clients))
