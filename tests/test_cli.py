"""The `chainrouter` command as an operator runs it: a subprocess, its output and exit code."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chainrouter.stores.sql import migrate
from tests.conftest import CHAINS_JSON, REPO_ROOT

CHAINROUTER = str(Path(sys.executable).with_name("chainrouter"))
EXAMPLE = REPO_ROOT / "examples" / "operator.yaml"


def run(
    *args: str, database_url: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")}
    env["CHAINROUTER_DATABASE_URL"] = database_url
    env.update(extra_env or {})
    return subprocess.run(
        [CHAINROUTER, *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_bad_setting_stops_every_command_with_exit_code_2(sqlite_database_url: str) -> None:
    result = run("migrate", database_url=sqlite_database_url, extra_env={"CHAINROUTER_ROLE": "x"})
    assert result.returncode == 2
    assert "CHAINROUTER_ROLE: must be one of: 'rpc', 'api', 'watcher' or 'all'" in result.stderr


def test_commands_refuse_an_unmigrated_database_and_say_what_to_run(
    sqlite_database_url: str,
) -> None:
    result = run("apply", str(EXAMPLE), database_url=sqlite_database_url)
    assert result.returncode == 1
    assert "run `chainrouter migrate`" in result.stderr


def test_migrate_apply_and_import_work_end_to_end(database_url: str) -> None:
    migrated = run("migrate", database_url=database_url)
    assert migrated.returncode == 0, migrated.stderr
    assert f"database schema at revision {migrate.head_revision()}" in migrated.stdout

    applied = run("apply", str(EXAMPLE), database_url=database_url)
    assert applied.returncode == 0, applied.stderr
    assert "customers: 3 created" in applied.stdout
    assert "shown this once" in applied.stdout
    assert applied.stdout.count("crk_") == 2
    assert applied.stdout.count("crm_") == 3

    again = run("apply", str(EXAMPLE), database_url=database_url)
    assert again.returncode == 0
    assert "(no changes)" in again.stdout
    assert "crk_" not in again.stdout

    imported = run("chains", "import", str(CHAINS_JSON), database_url=database_url)
    assert imported.returncode == 0, imported.stderr
    # 31337 is both in the example file and in the registry; 31338 is only in the file.
    assert "1939 created, 1 updated" in imported.stdout


def test_an_invalid_file_lists_its_problems_and_exits_1(
    sqlite_database_url: str, tmp_path: Path
) -> None:
    run("migrate", database_url=sqlite_database_url)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "providers:\n  - slug: p\n    name: P\n    plans:\n      - name: x\n        methods:\n"
        "          - {method: eth_call, cost: -1}\n"
    )
    result = run("apply", str(bad), database_url=sqlite_database_url)
    assert result.returncode == 1
    assert "nothing was applied" in result.stderr
    assert "providers[0].plans[0].methods[0].cost: must be >= 0" in result.stderr


def test_the_schema_of_the_file_can_be_printed(sqlite_database_url: str) -> None:
    result = run("apply", "--print-schema", database_url=sqlite_database_url)
    assert result.returncode == 0
    assert '"title": "chainrouter operator configuration"' in result.stdout


def test_an_unreachable_database_is_reported_without_its_password() -> None:
    result = run(
        "migrate", database_url="postgresql://admin:hunter2@127.0.0.1:1/none?connect_timeout=2"
    )
    assert result.returncode == 1
    assert (
        "cannot use the database postgresql+psycopg://admin:***@127.0.0.1:1/none" in result.stderr
    )
    assert "hunter2" not in result.stderr


def test_migrate_can_go_down_and_report_the_revision(sqlite_database_url: str) -> None:
    run("migrate", database_url=sqlite_database_url)
    down = run("migrate", "--downgrade", "base", database_url=sqlite_database_url)
    assert down.returncode == 0
    assert "(empty)" in down.stdout
    assert run("migrate", "--current", database_url=sqlite_database_url).stdout.strip() == "(empty)"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(sqlite_database_url: str) -> Iterator[str]:
    run("migrate", database_url=sqlite_database_url)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")}
    env |= {"CHAINROUTER_DATABASE_URL": sqlite_database_url, "CHAINROUTER_API_PORT": str(port)}
    process = subprocess.Popen(
        [CHAINROUTER, "serve", "--role", "api"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{base}/health", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_served_api_takes_no_forwarded_for_from_a_peer_it_was_not_told_to_trust(
    served: str,
) -> None:
    """No trusted proxies are configured: a new X-Forwarded-For per request, from loopback, must
    not reset the per-IP limit of the price lists (30 per minute by default)."""
    statuses = [
        httpx.get(
            f"{served}/prices", headers={"X-Forwarded-For": f"203.0.113.{n}"}, timeout=5
        ).status_code
        for n in range(31)
    ]
    assert statuses == [200] * 30 + [429]


def test_serve_answers_health_with_the_database_state(served: str) -> None:
    response = httpx.get(f"{served}/health", timeout=5)
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


def test_serve_all_runs_router_and_api_and_stops_both(sqlite_database_url: str) -> None:
    run("migrate", database_url=sqlite_database_url)
    rpc_port, api_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAINROUTER_")}
    env |= {
        "CHAINROUTER_DATABASE_URL": sqlite_database_url,
        "CHAINROUTER_RPC_PORT": str(rpc_port),
        "CHAINROUTER_API_PORT": str(api_port),
    }
    process = subprocess.Popen(
        [CHAINROUTER, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for port in (rpc_port, api_port):
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).is_success
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, f"nothing answers on {port}"
                    time.sleep(0.1)
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0
    for port in (rpc_port, api_port):
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)


def test_serve_refuses_a_database_without_the_schema(sqlite_database_url: str) -> None:
    result = run("serve", "--role", "rpc", database_url=sqlite_database_url)
    assert result.returncode == 1
    assert "migrate" in result.stderr


def _raw_exchange(base: str, head: bytes, first_bytes: bytes) -> bytes:
    """Send a request's head and the start of its body, and read what comes back at once."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(head + first_bytes)
        return connection.recv(4096)


def test_the_served_api_refuses_a_large_or_unauthenticated_body_before_reading_it(
    served: str,
) -> None:
    # 200 MB announced: refused on the announcement, nothing of it sent.
    declared = _raw_exchange(
        served,
        b"POST /chains/requests HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
        b"Content-Length: 200000000\r\n\r\n",
        b"",
    )
    assert declared.startswith(b"HTTP/1.1 413")
    # No length, no token: refused as soon as the head is in, the body never read.
    streamed = _raw_exchange(
        served,
        b"POST /api-keys HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n",
        b"400\r\n" + b" " * 1024 + b"\r\n",
    )
    assert streamed.startswith(b"HTTP/1.1 401")
