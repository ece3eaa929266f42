"""The router as users run it: `chainrouter serve --role rpc`, on each of its executors (the
Python one, uvicorn and aiohttp, and the native one), real anvil nodes behind it, real clients in
front (`cast`, viem, ethers, web3.py and plain HTTP). Every response carries X-Batch-Id; browsers
get CORS; a stop by SIGTERM writes the usage metered so far."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from sqlalchemy import select

from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql import schema as t
from chainrouter.stores.sql.engine import create_database_engine
from tests.conftest import REPO_ROOT
from tests.router.conftest import (
    CHAIN_A,
    CHAIN_B,
    AnvilNodes,
    api_key,
    free_port,
    provider,
    rpc,
    world_config,
)

ACCOUNT = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"


@dataclass
class Served:
    base: str
    key: str  # allows any origin
    restricted_key: str  # allows app.example.com only
    database_url: str
    process: subprocess.Popen[bytes]
    executor: str

    def url(self, chain: int = CHAIN_A) -> str:
        return f"{self.base}/rpc/{chain}/{self.key}"

    def balance(self) -> int:
        """The balance in storage of the router's one customer, nano-credits."""
        engine = create_database_engine(self.database_url)
        with engine.connect() as connection:
            value: int = connection.execute(select(t.customers.c.balance_nano)).scalar_one()
        engine.dispose()
        return value


def start_router(
    tmp: Path,
    anvil: AnvilNodes,
    server: str,
    host: str = "127.0.0.1",
    *,
    beside: Served | None = None,
    **settings: str,
) -> Served:
    """A served router over `anvil`, with its working directory in `tmp`; `settings` add to or
    replace its environment. `beside`: a router already serving, whose database (and so keys)
    this one shares, as routers that share load do; else a new SQLite database."""
    if beside is not None:
        return launch_router(
            tmp, server, host, beside.database_url, beside.key, beside.restricted_key, settings
        )
    database_url = f"sqlite:///{tmp / 'served.db'}"
    return start_router_on(tmp, anvil, server, database_url, host, **settings)


def start_router_on(
    tmp: Path,
    anvil: AnvilNodes,
    server: str,
    database_url: str,
    host: str = "127.0.0.1",
    **settings: str,
) -> Served:
    """The same, on a new database at `database_url`."""
    tmp.mkdir(parents=True, exist_ok=True)
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    key = api_key("main", allowed_domains=["app.example.com"])
    open_key = api_key("open")
    prices = {
        "eth_chainId": "0",
        "eth_blockNumber": "0.0000001",
        "eth_getBalance": "0.0000002",
        "eth_getBlockByNumber": "0.0000003",
    }
    config = world_config(
        [
            provider("cheap", prices, [(anvil.urls["a1"], CHAIN_A), (anvil.urls["b1"], CHAIN_B)]),
            provider("dear", dict.fromkeys(prices, "0.000001"), [(anvil.urls["a2"], CHAIN_A)]),
        ],
        [key, open_key],
    )
    apply_config(engine, validate_document(config))
    engine.dispose()
    return launch_router(
        tmp, server, host, database_url, open_key["secret"], key["secret"], settings
    )


def launch_router(
    tmp: Path,
    server: str,
    host: str,
    database_url: str,
    key: str,
    restricted_key: str,
    settings: dict[str, str],
) -> Served:
    """A router process on an existing database, its working directory `tmp`, its log (stderr)
    in `tmp/router.log`."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_RPC_PORT": str(port),
        "CHAINROUTER_USAGE_FLUSH_INTERVAL_S": "300",  # only the shutdown flush writes
        "CHAINROUTER_MAX_BODY_BYTES": "2048",
        "CHAINROUTER_LOG_LEVEL": "warning",
        "CHAINROUTER_RPC_SERVER": server,
        "CHAINROUTER_RPC_HOST": host,
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its nodes are on loopback
        # No audits unless a test asks (test_audits_served.py): an audit asks another node at
        # random, which the tests counting what each node is asked would see.
        "CHAINROUTER_AUDIT_RATE": "0",
        # Nor are answers proven unless a test asks (test_verified_answers_served.py): a proof
        # asks nodes more, and most of these worlds have one provider, whose answers the cache
        # would then never keep.
        "CHAINROUTER_VERIFY": "off",
        **settings,
    }
    with (tmp / "router.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"],
            env=env,
            cwd=tmp,
            stderr=log,
        )
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return Served(base, key, restricted_key, database_url, process, server)
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the router did not start")


@pytest.fixture(scope="module", params=["python", "native"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, anvil: AnvilNodes
) -> Iterator[Served]:
    server = start_router(tmp_path_factory.mktemp("served"), anvil, request.param)
    yield server
    if server.process.poll() is None:
        server.process.terminate()
        server.process.wait(20)


def _cast(*args: str) -> str:
    binary = REPO_ROOT / "node_modules" / ".bin" / "cast"
    done = subprocess.run(
        [str(binary), *args], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_cast_reads_through_the_router(served: Served) -> None:
    assert _cast("chain-id", "--rpc-url", served.url()) == str(CHAIN_A)
    assert _cast("chain-id", "--rpc-url", served.url(CHAIN_B)) == str(CHAIN_B)
    assert int(_cast("block-number", "--rpc-url", served.url())) >= 0
    assert _cast("balance", ACCOUNT, "--rpc-url", served.url()) == str(10_000 * 10**18)


def test_a_batch_over_http_is_answered_in_order(served: Served) -> None:
    batch = [rpc("eth_chainId", [], "a"), rpc("eth_nope", [], "b"), rpc("eth_blockNumber", [], "c")]
    response = httpx.post(served.url(), json=batch)
    assert response.status_code == 200
    assert [item["id"] for item in response.json()] == ["a", "b", "c"]
    assert response.json()[1]["error"]["code"] == -32002
    assert response.headers["x-batch-id"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/rpc/31337/crk_wrong", b"{}", 401),
        ("POST", "/rpc/31337/{key}", b"{", 400),
        ("POST", "/rpc/1/{key}", json.dumps(rpc("eth_chainId")).encode(), 422),
        ("GET", "/rpc/31337/{key}", b"", 405),
        ("POST", "/rpc/31337", b"{}", 404),
        ("POST", "/rpc/31337/{key}/extra", b"{}", 404),
        ("POST", "/rpc/31337/{key}", b"[" + b" " * 3000 + b"]", 413),
        ("POST", "/rpc/31337/{key}", b"text", 415),
    ],
)
def test_every_router_response_carries_a_batch_id(
    served: Served, method: str, path: str, body: bytes, status: int
) -> None:
    content_type = "text/plain" if status == 415 else "application/json"
    response = httpx.request(
        method,
        served.base + path.format(key=served.key),
        content=body,
        headers={"content-type": content_type},
    )
    assert response.status_code == status
    assert response.headers["x-batch-id"]
    assert "error" in response.json()


@pytest.mark.parametrize(
    ("method", "path", "status"), [("GET", "/health", 200), ("GET", "/x", 404)]
)
def test_the_routers_other_responses_carry_a_batch_id_too(
    served: Served, method: str, path: str, status: int
) -> None:
    response = httpx.request(method, served.base + path)
    assert response.status_code == status
    assert response.headers["x-batch-id"]


def test_each_response_has_its_own_batch_id_under_the_workers_prefix(served: Served) -> None:
    # Seventeen answers take the counter past one hexadecimal digit.
    ids = [
        httpx.post(served.url(), json=rpc("eth_chainId", [], n)).headers["x-batch-id"]
        for n in range(17)
    ]
    assert len(set(ids)) == len(ids)
    prefixes = {i.rsplit("-", 1)[0] for i in ids}
    assert len(prefixes) == 1
    assert re.fullmatch(r"[0-9a-f]{12}", prefixes.pop())
    counters = [int(i.rsplit("-", 1)[1], 16) for i in ids]
    assert counters == sorted(counters)


@pytest.mark.parametrize("server", ["python", "native"])
def test_the_health_checker_runs_and_reports_every_node_to_storage(
    server: str, tmp_path: Path, anvil: AnvilNodes
) -> None:
    # On the native server the checks run on the server's own thread, through its Rust client.
    # Reports are stored with each usage flush.
    served = start_router(
        tmp_path,
        anvil,
        server,
        CHAINROUTER_HEALTH_CHECK_INTERVAL_S="1",
        CHAINROUTER_USAGE_FLUSH_INTERVAL_S="1",
    )
    engine = create_database_engine(served.database_url)
    try:
        deadline = time.monotonic() + 20
        while True:
            with engine.connect() as connection:
                rows = connection.execute(select(t.node_health)).all()
            if len(rows) == 3 and all(row.head_block is not None for row in rows):
                break
            assert time.monotonic() < deadline, f"node health not reported: {rows}"
            time.sleep(0.2)
    finally:
        engine.dispose()
        served.process.terminate()
        served.process.wait(20)
    assert all(row.in_sync and row.consecutive_failures == 0 for row in rows)
    assert all(row.latency_ms is not None and row.latency_ms > 0 for row in rows)


def test_health_tells_which_executor_runs_and_how_much_usage_is_unwritten(served: Served) -> None:
    health = httpx.get(served.base + "/health").json()
    assert health["executor"] == served.executor
    assert health["status"] == "ok"
    assert health["unwritten_usage_batches"] == 0


def test_a_body_sent_in_chunks_is_bounded_too(served: Served) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(10):
            yield b" " * 500

    json_body = {"content-type": "application/json"}
    response = httpx.post(served.url(), content=chunks(), headers=json_body)
    assert response.status_code == 413
    small = httpx.post(
        served.url(), content=iter([json.dumps(rpc("eth_chainId")).encode()]), headers=json_body
    )
    assert small.json()["result"] == hex(CHAIN_A)


def test_browsers_get_cors_and_the_key_decides_the_origin(served: Served) -> None:
    preflight = httpx.options(served.url(), headers={"origin": "https://app.example.com"})
    assert preflight.status_code == 204
    assert preflight.headers["x-batch-id"]
    assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    restricted = served.url().replace(served.key, served.restricted_key)
    allowed = httpx.post(
        restricted, json=rpc("eth_chainId"), headers={"origin": "https://app.example.com"}
    )
    assert allowed.status_code == 200
    assert allowed.headers["access-control-expose-headers"] == (
        "x-batch-id, x-logs-split-ranges, retry-after, x-cache"
    )
    assert allowed.headers["x-cache"] in ("HIT", "MISS")  # a page may read it
    refused = httpx.post(
        restricted, json=rpc("eth_chainId"), headers={"origin": "https://evil.example"}
    )
    assert refused.status_code == 403


def test_the_free_tier_ignores_forwarded_for_without_a_trusted_proxy(served: Served) -> None:
    response = httpx.post(
        f"{served.base}/rpc/evm/{CHAIN_A}",
        json=rpc("eth_chainId"),
        headers={"x-forwarded-for": "203.0.113.50"},
    )
    assert response.status_code == 200
    assert response.json()["result"] == hex(CHAIN_A)
    assert response.headers["x-batch-id"]


def test_viem_with_batching_and_ethers_work_unmodified(served: Served) -> None:
    script = REPO_ROOT / "tests" / "clients" / "js_clients.mjs"
    done = subprocess.run(
        ["node", str(script), served.url(), ACCOUNT],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    balance = str(10_000 * 10**18)
    assert seen["viem"]["chainId"] == CHAIN_A
    assert seen["viem"]["balance"] == balance
    # viem sent its three concurrent calls as one batch (one HTTP exchange), then the lone call.
    fetches = seen["viem"]["fetches"]
    assert [f["status"] for f in fetches] == [200, 422]
    assert all(f["batchId"] for f in fetches)
    assert seen["viem"]["unsupported"]["code"] == -32002
    assert seen["ethers"]["chainId"] == str(CHAIN_A)
    assert seen["ethers"]["balance"] == balance
    assert seen["ethers"]["blockNumber"] >= 0


# web3.py imports a module websockets has deprecated; that is web3's to fix, not a fault here.
@pytest.mark.filterwarnings("ignore:websockets.legacy is deprecated:DeprecationWarning")
def test_web3py_works_unmodified_including_batches(served: Served) -> None:
    from web3 import Web3

    w3 = Web3(Web3.HTTPProvider(served.url()))
    assert w3.eth.chain_id == CHAIN_A
    with w3.batch_requests() as batch:
        batch.add(w3.eth.get_balance(Web3.to_checksum_address(ACCOUNT)))
        batch.add(w3.eth.get_block("latest"))
        balance, block = cast(list[Any], batch.execute())
    assert balance == 10_000 * 10**18
    assert block["number"] >= 0


def test_sigterm_writes_the_usage_metered_so_far(served: Served) -> None:
    for _ in range(3):
        httpx.post(served.url(), json=rpc("eth_getBalance", [ACCOUNT, "latest"]))
    served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(30) == 0
    engine = create_database_engine(served.database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                select(t.usage_aggregates.c.method, t.usage_aggregates.c.request_count).where(
                    t.usage_aggregates.c.method == "eth_getBalance"
                )
            ).all()
    finally:
        engine.dispose()
    assert sum(count for _, count in rows) >= 3


@pytest.mark.parametrize("server", ["python", "native"])
def test_the_router_listens_on_an_ipv6_address(
    tmp_path: Path, anvil: AnvilNodes, server: str
) -> None:
    ipv6 = start_router(tmp_path, anvil, server, host="::1")
    try:
        response = httpx.post(ipv6.url(), json=rpc("eth_chainId"))
        assert response.json()["result"] == hex(CHAIN_A)
    finally:
        ipv6.process.terminate()
        ipv6.process.wait(20)


@pytest.mark.parametrize("server", ["python", "native"])
def test_slow_clients_are_cut_off_on_either_executor(
    server: str, tmp_path: Path, anvil: AnvilNodes
) -> None:
    """A connection that sends nothing, or drips its head, or starves its body, is closed
    within the configured time (issue 35, item 9), on the Python executor (uvicorn, bounded by
    net/http_bounds.py) as on the native one."""
    router = start_router(
        tmp_path,
        anvil,
        server,
        CHAINROUTER_REQUEST_HEAD_TIMEOUT_S="0.5",
        CHAINROUTER_REQUEST_BODY_TIMEOUT_S="0.5",
    )
    host, port = router.base.removeprefix("http://").rsplit(":", 1)
    try:
        for sent in (
            b"",  # connects and says nothing
            b"POST /rpc/1/k HTTP/1.1\r\nHost: r\r\n",  # a head never finished
            b"POST /rpc/1/k HTTP/1.1\r\nHost: r\r\nContent-Length: 100\r\n\r\n{",  # a short body
        ):
            with socket.create_connection((host, int(port)), timeout=10) as connection:
                connection.sendall(sent)
                started = time.monotonic()
                while connection.recv(4096):  # the native server may answer 408 first
                    pass
                assert time.monotonic() - started < 5, sent
        # An ordinary request still gets its answer.
        answer = httpx.post(router.url(), json=rpc("eth_chainId"), timeout=10)
        assert answer.json()["result"] == hex(CHAIN_A)
    finally:
        router.process.terminate()
        router.process.wait(30)
