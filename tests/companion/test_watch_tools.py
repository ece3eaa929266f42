"""The watch tools (issue 31): an agent gets the new heads or logs of a chain for a bounded count
and time, through the router's WebSocket, while blocks are mined on a real node; the count and
the time bound both end a watch; a refusal is the router's error, passed through; a primary
router that is down is passed over for the backup."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from tests.anvil import CHAIN_A, free_port
from tests.companion.conftest import (
    ACCOUNT,
    DEPLOY_CODE,
    LOG_TOPIC,
    WATCH_CHAIN,
    Service,
    call_ok,
    companion,
    companion_env,
    error_text,
    payload,
)

pytestmark = pytest.mark.anyio


def _node(service: Service, method: str, params: list[Any]) -> Any:
    url = service.chains[WATCH_CHAIN].node_url
    answer = httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return answer.json()["result"]


@contextmanager
def _working(service: Service, method: str, params: list[Any]) -> Iterator[None]:
    """Calls `method` on the watch chain's node every 0.3 s (mining a block each time) until the
    block ends: whenever the tool subscribes, more blocks follow."""
    stop = threading.Event()

    def work() -> None:
        while not stop.wait(0.3):
            _node(service, method, params)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


async def test_new_heads_come_in_order_until_the_limit(service: Service) -> None:
    async with companion(companion_env(service)) as session:
        with _working(service, "anvil_mine", ["0x1"]):
            watched = await call_ok(
                session, "rpc_watch_heads", {"chainId": WATCH_CHAIN, "limit": 3, "maxSeconds": 30}
            )
    assert (watched["stoppedBy"], watched["count"], watched["subscription"]) == (
        "limit",
        3,
        "newHeads",
    )
    numbers = [int(head["number"], 16) for head in watched["heads"]]
    assert numbers == list(range(numbers[0], numbers[0] + 3))
    assert watched["blocks"] == {"first": numbers[0], "last": numbers[-1]}
    assert all("logsBloom" not in head and "hash" in head for head in watched["heads"])
    assert watched["batchId"]
    for head in watched["heads"]:  # each as the node has it
        block = _node(service, "eth_getBlockByNumber", [head["number"], False])
        assert block["hash"] == head["hash"]


async def test_logs_matching_the_filter_come_until_the_limit(service: Service) -> None:
    deploy = [{"from": ACCOUNT, "data": DEPLOY_CODE}]
    async with companion(companion_env(service)) as session:
        with _working(service, "eth_sendTransaction", deploy):  # each deployment logs once
            watched = await call_ok(
                session,
                "rpc_watch_logs",
                {"chainId": WATCH_CHAIN, "topics": [LOG_TOPIC], "limit": 2, "maxSeconds": 30},
            )
    assert (watched["stoppedBy"], watched["count"], watched["removed"]) == ("limit", 2, 0)
    for log in watched["logs"]:
        assert log["topics"] == [LOG_TOPIC]
        receipt = _node(service, "eth_getTransactionReceipt", [log["transactionHash"]])
        assert receipt["logs"][0]["address"] == log["address"]


async def test_the_time_bound_ends_a_quiet_watch(service: Service) -> None:
    async with companion(companion_env(service)) as session:
        watched = await call_ok(
            session, "rpc_watch_heads", {"chainId": WATCH_CHAIN, "limit": 5, "maxSeconds": 1}
        )
    assert (watched["stoppedBy"], watched["count"], watched["heads"]) == ("time", 0, [])
    assert 1.0 <= watched["seconds"] < 10


async def test_a_chain_without_websocket_nodes_is_the_routers_error(service: Service) -> None:
    async with companion(companion_env(service)) as session:
        result = await session.call_tool("rpc_watch_heads", {"chainId": CHAIN_A, "maxSeconds": 1})
    assert "eth_subscribe failed: JSON-RPC error -32002" in error_text(result)
    assert payload(result)["error"]["code"] == -32002


async def test_a_key_without_credits_is_refused_at_the_upgrade(service: Service) -> None:
    env = companion_env(service, SERVICE_API_KEY=service.broke_api_key)
    async with companion(env) as session:
        result = await session.call_tool("rpc_watch_heads", {"chainId": WATCH_CHAIN})
    assert "the router refused the WebSocket: JSON-RPC error -32601" in error_text(result)
    refused = payload(result)
    assert refused["httpStatus"] == 402
    assert refused["batchId"]
    assert service.broke_api_key not in error_text(result)


async def test_a_primary_router_that_is_down_is_passed_over_for_the_backup(
    service: Service,
) -> None:
    env = companion_env(
        service,
        SERVICE_BASE_URL=f"http://127.0.0.1:{free_port()}",
        SERVICE_BACKUP_BASE_URL=service.primary,
    )
    async with companion(env) as session:
        with _working(service, "anvil_mine", ["0x1"]):
            watched = await call_ok(
                session, "rpc_watch_heads", {"chainId": WATCH_CHAIN, "limit": 1, "maxSeconds": 30}
            )
    assert (watched["stoppedBy"], watched["count"]) == ("limit", 1)


async def test_bounds_are_checked_before_anything_is_sent(service: Service) -> None:
    async with companion(companion_env(service)) as session:
        for arguments, problem in (
            ({"chainId": WATCH_CHAIN, "limit": 0}, "limit"),
            ({"chainId": WATCH_CHAIN, "maxSeconds": 121}, "maxSeconds"),
            ({"chainId": WATCH_CHAIN, "topics": [None] * 5}, "topics"),
            ({"chainId": WATCH_CHAIN, "address": "0x12"}, "address"),
        ):
            tool = "rpc_watch_logs" if problem in ("topics", "address") else "rpc_watch_heads"
            result = await session.call_tool(tool, arguments)
            assert f"- {problem}" in error_text(result), arguments
