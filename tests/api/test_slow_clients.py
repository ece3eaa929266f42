"""The management API as served (`chainrouter serve --role api`, uvicorn with net/http_bounds.py)
bounds slow clients and the connections it holds (issue 35, item 9): a connection that sends
nothing, drips its head or starves its body is closed in the configured time, and beyond
CHAINROUTER_MAX_CONNECTIONS a request is refused with 503 instead of holding more."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from tests.anvil import free_port
from tests.served import serve, stop, wait_healthy


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    work = tmp_path_factory.mktemp("slow-api")
    database_url = f"sqlite:///{work / 'api.db'}"
    migrate.upgrade(create_database_engine(database_url))
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")},
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_API_PORT": str(port),
        "CHAINROUTER_REQUEST_HEAD_TIMEOUT_S": "0.5",
        "CHAINROUTER_REQUEST_BODY_TIMEOUT_S": "0.5",
        "CHAINROUTER_MAX_CONNECTIONS": "3",
    }
    log = Path(work / "api.log")
    process = serve("api", env, log)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process, log)
        yield "127.0.0.1", port
    finally:
        stop([process])


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"POST /api-keys HTTP/1.1\r\nHost: a\r\nX-Api-Key: crm_",  # a head never finished
        b"POST /chains/requests HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n{",
    ],
    ids=["silent", "dripping head", "short body"],
)
def test_a_slow_client_is_cut_off(api: tuple[str, int], sent: bytes) -> None:
    with socket.create_connection(api, timeout=10) as connection:
        connection.sendall(sent)
        started = time.monotonic()
        while connection.recv(4096):
            pass
        assert time.monotonic() - started < 5


def test_beyond_its_connections_a_request_is_refused_not_held(api: tuple[str, int]) -> None:
    held = [socket.create_connection(api, timeout=10) for _ in range(3)]
    try:
        time.sleep(0.1)
        refused = httpx.get(f"http://{api[0]}:{api[1]}/health", timeout=5)
        assert refused.status_code == 503
    finally:
        for connection in held:
            connection.close()
    time.sleep(0.2)
    assert httpx.get(f"http://{api[0]}:{api[1]}/health", timeout=5).status_code == 200
