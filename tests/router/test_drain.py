"""A router's stop by SIGTERM, behind a load balancer (router/executors/native.py, `drain`; on
the Python executor, executors/asgi.py, `DrainingServer`):
`/health` turns 503 "draining" at once while the router goes on serving for the drain delay,
WebSocket clients are told to reconnect (1012), the requests in flight finish, the usage is
written, and the process exits within its bound."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from chainrouter.router.executors.native_websocket import RESTARTING
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.router.conftest import AnvilNodes, rpc
from tests.router.test_server import ACCOUNT, start_router

DRAIN_S = 1.5


def _health(base: str) -> tuple[int, dict[str, object]]:
    answer = httpx.get(f"{base}/health", timeout=5)
    return answer.status_code, answer.json()


@pytest.mark.parametrize("server", ["native", "python"])
@pytest.mark.timeout(60)
def test_sigterm_drains_serves_through_the_delay_closes_websockets_and_writes_usage(
    tmp_path: Path, anvil: AnvilNodes, server: str
) -> None:
    served = start_router(
        tmp_path,
        anvil,
        server,
        CHAINROUTER_DRAIN_DELAY_S=str(DRAIN_S),
        CHAINROUTER_SHUTDOWN_GRACE_S="5",
    )
    before = served.balance()
    ws_url = served.url().replace("http://", "ws://")

    async def scenario() -> tuple[int | None, float, int, int]:
        async with connect(ws_url) as client:
            await client.send('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}')
            await client.recv()
            signalled = time.monotonic()
            served.process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            status, body = await asyncio.to_thread(_health, served.base)
            assert (status, body["status"]) == (503, "draining")
            assert body["reasons"] == ["the router is stopping"]
            # Still serving while the balancer takes it out: these are answered and billed.
            async with httpx.AsyncClient() as http:
                answers = [
                    await http.post(served.url(), json=rpc("eth_getBalance", [ACCOUNT, "latest"]))
                    for _ in range(3)
                ]
            assert [a.status_code for a in answers] == [200, 200, 200]
            assert all("result" in a.json() for a in answers)
            try:
                await asyncio.wait_for(client.recv(), timeout=DRAIN_S + 5)
            except ConnectionClosed as closed:
                code = None if closed.rcvd is None else closed.rcvd.code
            else:
                code = -1
            told_s = time.monotonic() - signalled
        exit_status = await asyncio.to_thread(served.process.wait, 15)
        return code, told_s, exit_status, len(answers)

    code, told_s, exit_status, billed = asyncio.run(scenario())
    assert code == RESTARTING  # reconnect: to another router, through the balancer
    assert told_s >= DRAIN_S  # not before the balancer had its time
    assert exit_status == 0
    # Written at the stop: the calls answered while draining, each charged the price of the
    # node that served it (the first call may go to either provider's while checks settle).
    calls, credits = _written_usage(served.database_url, "eth_getBalance")
    assert calls == billed
    assert before - served.balance() == credits >= billed * 200


def _written_usage(database_url: str, method: str) -> tuple[int, int]:
    engine = create_database_engine(database_url)
    try:
        with engine.connect() as connection:
            calls, credits = connection.execute(
                select(
                    func.sum(t.usage_aggregates.c.request_count),
                    func.sum(t.usage_aggregates.c.credits_nano),
                ).where(t.usage_aggregates.c.method == method)
            ).one()
    finally:
        engine.dispose()
    return int(calls), int(credits)
