"""`make demo` as a new user runs it: the key it prints works on both routers, and Ctrl-C, or the
loss of any process it started, stops everything it started (anvil binaries under their npm
launchers included), with the usage of the calls written on the way out."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect

ROOT = Path(__file__).resolve().parents[1]
PORTS = (18545, 18546, 18547, 18548, 8545, 8546, 8080)
CHAIN_ID_CALL = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}


API = "http://127.0.0.1:8080"


@dataclass
class RunningDemo:
    process: subprocess.Popen[str]
    key: str
    started: set[int]  # every process below the demo's once it is serving
    guide: str = ""  # what it printed


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _processes() -> dict[int, tuple[int, str]]:
    """Every live process: its parent and its command line. Zombies count as gone."""
    found: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # it ended meanwhile
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            found[int(entry.name)] = (int(parent), command)
    return found


def _descendants(pid: int) -> set[int]:
    processes = _processes()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, (parent, _) in processes.items() if parent in frontier} - found
        found |= frontier
    return found


def _still_running(pids: set[int]) -> dict[int, str]:
    processes = _processes()
    return {pid: processes[pid][1] for pid in pids if pid in processes}


def _wait_until_gone(pids: set[int], timeout_s: float) -> dict[int, str]:
    deadline = time.monotonic() + timeout_s
    while (left := _still_running(pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def demo() -> Iterator[RunningDemo]:
    deadline = time.monotonic() + 10  # the demo of the test before may still be letting go
    while (busy := [port for port in PORTS if _port_taken(port)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    if busy:
        pytest.skip(f"the demo's ports {busy} are in use (a demo running?)")
    # A session of its own, as a terminal gives the command it runs: Ctrl-C is then a SIGINT
    # to this group.
    process = subprocess.Popen(
        [sys.executable, "scripts/demo.py"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    output = process.stdout
    assert output is not None
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in output:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    printed = ""
    deadline = time.monotonic() + 120
    started: set[int] = set()
    try:
        while "Stop with Ctrl-C" not in printed:
            try:
                printed += lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the demo printed no guide within 120 s:\n{printed}")
        key = re.search(r"economy\s+(crk_\S+)", printed)
        assert key is not None, printed
        started = _descendants(process.pid)
        yield RunningDemo(process, key.group(1), started, printed)
    finally:
        # Whatever a test left behind goes, and so does anything the demo failed to stop.
        left = {process.pid} | started
        for pid in _still_running(left):
            os.kill(pid, signal.SIGKILL)
        process.wait()
        _wait_until_gone(left, 10)  # their ports free for the next test
        reader.join(5)  # it ends at the end of the output
        output.close()


def test_the_demo_key_works_on_both_routers_and_ctrl_c_stops_everything_it_started(
    demo: RunningDemo,
) -> None:
    assert len(demo.started) >= 7  # four anvils (and their binaries), two routers, the API
    for port in (8545, 8546):  # the router and the backup router
        answer = httpx.post(
            f"http://127.0.0.1:{port}/rpc/31337/{demo.key}", json=CHAIN_ID_CALL, timeout=10
        )
        assert answer.status_code == 200
        assert answer.json()["result"] == hex(31337)
        assert answer.headers["x-batch-id"]
    # WebSocket at the same URL: heads as anvil mines them (every 2 s), on the native server.
    asyncio.run(_one_head(f"ws://127.0.0.1:8545/rpc/31337/{demo.key}"))
    # The dashboard it prints is served, and offers sign-up with a free credit.
    assert httpx.get("http://127.0.0.1:8080/dashboard", timeout=10).status_code == 200
    made = httpx.post(
        "http://127.0.0.1:8080/signup",
        json={"name": "Visitor", "email": "visitor@demo.example"},
        timeout=10,
    )
    assert made.status_code == 201
    assert made.json()["balance"] == 1
    os.killpg(demo.process.pid, signal.SIGINT)  # Ctrl-C
    assert demo.process.wait(60) == 0
    assert _wait_until_gone(demo.started, 5) == {}
    with sqlite3.connect(ROOT / "var" / "demo" / "demo.db") as database:
        (calls,) = database.execute("SELECT sum(request_count) FROM usage_aggregates").fetchone()
    assert calls >= 2  # written on the way out


def test_the_printed_cast_send_to_the_deposit_address_tops_up_the_balance(
    demo: RunningDemo,
) -> None:
    command = re.search(r"(\S+/cast) send (0x[0-9a-fA-F]{40}) --value", demo.guide)
    token = re.search(r"customer\s+(crm_\S+)", demo.guide)
    assert command is not None, demo.guide
    assert token is not None, demo.guide
    account = {"X-Api-Key": token.group(1)}
    answer = httpx.get(f"{API}/account", headers=account, timeout=10)
    before = Decimal(str(answer.json()["balance"]))
    sent = subprocess.run(
        [
            command.group(1),
            "send",
            command.group(2),
            "--value",
            "0.01ether",
            "--from",
            "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266",
            "--unlocked",
            "--rpc-url",
            "http://127.0.0.1:18545",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert sent.returncode == 0, sent.stderr
    deadline = time.monotonic() + 30  # two blocks of 2 s, and the watcher's round
    while True:
        balance = httpx.get(f"{API}/account", headers=account, timeout=10).json()["balance"]
        if Decimal(str(balance)) == before + 20:  # 0.01 ETH at 2000 credits
            break
        assert time.monotonic() < deadline, balance
        time.sleep(0.25)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_supervisors_term_or_a_closed_terminal_stops_everything_it_started(
    demo: RunningDemo, signum: signal.Signals
) -> None:
    os.killpg(demo.process.pid, signum)  # to its whole group, as a supervisor or a terminal does
    assert demo.process.wait(60) == 0
    assert _wait_until_gone(demo.started, 5) == {}


def test_the_file_of_the_demos_secrets_is_readable_by_its_owner_only(demo: RunningDemo) -> None:
    mode = (ROOT / "var" / "demo" / "demo.yaml").stat().st_mode
    assert mode & 0o777 == 0o600


def test_when_one_of_its_processes_dies_the_demo_stops_all_the_others(demo: RunningDemo) -> None:
    processes = _processes()
    launcher = next(
        pid
        for pid in demo.started
        if "18545" in processes[pid][1] and processes[pid][0] == demo.process.pid
    )
    binaries = {pid for pid in demo.started if processes[pid][0] == launcher}
    assert binaries, "anvil's npm launcher runs the anvil binary as its child"
    os.kill(launcher, signal.SIGKILL)  # the launcher alone, as a crash would: its binary lives on
    assert demo.process.wait(60) != 0  # the demo says a process stopped unexpectedly
    assert _wait_until_gone(demo.started, 5) == {}


async def _one_head(url: str) -> None:
    async with connect(url) as ws:
        await ws.send('{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}')
        subscription = json.loads(await asyncio.wait_for(ws.recv(), 10))["result"]
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if message.get("method") == "eth_subscription":
                assert message["params"]["subscription"] == subscription
                assert message["params"]["result"]["number"].startswith("0x")
                return
