"""Real EVM nodes for tests: anvil processes (installed from npm by `make setup`)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
CHAIN_A = 31337
CHAIN_B = 31338
# A topic, and init code that emits LOG1(LOG_TOPIC) over the word 42 then deploys a 10-byte
# contract: each deployment (eth_sendTransaction with it as data) logs once.
LOG_TOPIC = "0x" + "c0ffee" * 10 + "beef"
DEPLOY_LOGGING = (
    "0x602a600052" + "7f" + LOG_TOPIC[2:] + "60206000a1" + "600a6037600039" + "600a6000f3"
    "602a60005260206000f3"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def anvil_binary() -> str:
    local = REPO_ROOT / "node_modules" / ".bin" / "anvil"
    if local.exists():
        return str(local)
    found = shutil.which("anvil")
    if found is None:
        pytest.fail("anvil is missing: `make setup` installs it (npm ci)")
    return found


@dataclass
class AnvilNodes:
    """Three real nodes: two of chain A (31337), one of chain B (31338)."""

    urls: dict[str, str] = field(default_factory=dict)  # "a1", "a2", "b1" -> URL
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)


def wait_until_answering(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError(f"anvil at {url} did not start")


def start_anvil_nodes(
    names: tuple[tuple[str, int], ...] = (("a1", CHAIN_A), ("a2", CHAIN_A), ("b1", CHAIN_B)),
    extra_args: dict[str, list[str]] | None = None,
) -> Generator[AnvilNodes]:
    """Anvil processes by name and chain ID (with `extra_args` by name, e.g. a pruned node's
    `--prune-history`), stopped when the iterator is closed."""
    nodes = AnvilNodes()
    binary = anvil_binary()
    taken: set[int] = set()
    for name, chain_id in names:
        # The kernel may hand out a port again once its probe socket is closed, before the anvil
        # given it has bound it: never two of one set on the same port.
        port = free_port()
        while port in taken:
            port = free_port()
        taken.add(port)
        process = subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--chain-id",
                str(chain_id),
                "--silent",
                *(extra_args or {}).get(name, []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        nodes.processes.append(process)
        nodes.urls[name] = f"http://127.0.0.1:{port}"
    try:
        for url in nodes.urls.values():
            wait_until_answering(url)
        yield nodes
    finally:
        for process in nodes.processes:
            process.terminate()
        for process in nodes.processes:
            process.wait(10)


def node_result(url: str, method: str, params: list[Any]) -> Any:
    """The `result` a node at `url` answers `method` with (anvil's own methods included)."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, timeout=30).json()["result"]
