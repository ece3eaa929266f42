"""WebSocket fan-out (issue 31): one upstream subscription feeding many clients.

One go, on one machine: an anvil node (blocks mined on demand), `chainrouter serve --role rpc`
(native executor, one worker) with the node registered as a WebSocket node, and in this process:
a client subscribed to anvil's `newHeads` directly (the baseline), and CLIENTS clients subscribed
through the router. BLOCKS blocks are mined one at a time; for each, the time from the direct
client's notification to each router client's is taken. Reported: p50 and p99 over blocks of
that delay to the median client and to the last one; the router's resident memory before the
clients connect and with all of them subscribed (per connection: the difference over CLIENTS).
The clients share this process's two cores with the router: the delays include their own work.
Results: bench/results/websocket.{json,md}.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import ClientConnection, connect

from bench.cpu import rss_mb
from bench.host import probe
from bench.upstreams import anvil, free_port, wait_until_ready
from bench.worlds import plan, world
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CHAIN = 31337
CLIENTS = int(os.environ.get("BENCH_WS_CLIENTS", "1000"))
BLOCKS = int(os.environ.get("BENCH_WS_BLOCKS", "30"))
_SUBSCRIBE = '{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["newHeads"]}'


def _world(node: str, key: str) -> dict[str, Any]:
    methods = [
        {"method": "eth_chainId", "cost": "0"},
        {"method": "newHeads", "node_target_type": "ws", "cost": "0.000000001"},
    ]
    return world(CHAIN, {"bench": plan("ws", methods, [node], CHAIN)}, key, credits="1000")


@contextmanager
def _service(work: Path, key: str) -> Iterator[tuple[str, str, int]]:
    rpc_port = free_port()
    with anvil(CHAIN) as (node, _):
        database_url = f"sqlite:///{work / 'bench.db'}"
        engine = create_database_engine(database_url)
        migrate.upgrade(engine)
        apply_config(engine, validate_document(_world(node, key)))
        engine.dispose()
        env = {
            **os.environ,
            "CHAINROUTER_DATABASE_URL": database_url,
            "CHAINROUTER_RPC_PORT": str(rpc_port),
            "CHAINROUTER_LOG_LEVEL": "warning",
            "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its node is a local anvil
            "CHAINROUTER_WS_MAX_CONNECTIONS_PER_ADDRESS": str(CLIENTS + 10),
            "CHAINROUTER_USAGE_JOURNAL_DIR": str(work / "journal"),
        }
        router = subprocess.Popen(
            [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"], env=env
        )
        try:
            base = f"http://127.0.0.1:{rpc_port}"
            wait_until_ready(base)
            yield node, base, router.pid
        finally:
            router.terminate()
            router.wait(30)


async def _subscribed(url: str) -> ClientConnection:
    ws = await connect(url, max_queue=None, ping_interval=None)
    await ws.send(_SUBSCRIBE)
    await ws.recv()  # the subscription id
    return ws


async def _arrival(ws: ClientConnection, arrivals: dict[int, float]) -> None:
    async for message in ws:
        params = json.loads(message).get("params")
        if params:
            arrivals[int(params["result"]["number"], 16)] = time.perf_counter()


async def _run(node: str, base: str, key: str, router_pid: int) -> dict[str, Any]:
    rss_before = rss_mb(router_pid)
    direct_arrivals: dict[int, float] = {}
    direct = await _subscribed(node.replace("http://", "ws://"))
    url = base.replace("http://", "ws://") + f"/rpc/{CHAIN}/{key}"
    clients: list[ClientConnection] = []
    for first in range(0, CLIENTS, 100):  # a hundred at a time: the listen backlog holds them
        clients += await asyncio.gather(
            *(_subscribed(url) for _ in range(first, min(first + 100, CLIENTS)))
        )
    await asyncio.sleep(1.0)
    rss_with = rss_mb(router_pid)
    arrivals: list[dict[int, float]] = [{} for _ in clients]
    readers = [asyncio.create_task(_arrival(direct, direct_arrivals))]
    readers += [
        asyncio.create_task(_arrival(ws, got)) for ws, got in zip(clients, arrivals, strict=True)
    ]
    async with httpx.AsyncClient() as http:
        for _ in range(BLOCKS):
            body = {"jsonrpc": "2.0", "id": 1, "method": "anvil_mine", "params": ["0x1"]}
            await http.post(node, json=body)
            await asyncio.sleep(0.25)  # every client has it well before the next block
    await asyncio.sleep(1.0)
    for reader in readers:
        reader.cancel()
    median_delays, last_delays, missing = [], [], 0
    for number, at in direct_arrivals.items():
        delays = []
        for got in arrivals:
            if number in got:
                delays.append((got[number] - at) * 1000)
            else:
                missing += 1
        if delays:
            median_delays.append(statistics.median(delays))
            last_delays.append(max(delays))
    for ws in [direct, *clients]:
        await ws.close()
    return {
        "blocks": len(direct_arrivals),
        "missing_notifications": missing,
        "median_client_ms": _quantiles(median_delays),
        "last_client_ms": _quantiles(last_delays),
        "router_rss_mb_before": round(rss_before, 1),
        "router_rss_mb_with_clients": round(rss_with, 1),
        "kib_per_connection": round((rss_with - rss_before) * 1024 / CLIENTS, 1),
    }


def _quantiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"p50": 0.0, "p99": 0.0}
    return {
        "p50": round(statistics.median(ordered), 2),
        "p99": round(ordered[min(int(len(ordered) * 0.99), len(ordered) - 1)], 2),
    }


def main() -> None:
    host = probe()
    key = generate_secret(SecretKind.API_KEY)
    with tempfile.TemporaryDirectory() as temp, _service(Path(temp), key) as (node, base, pid):
        figures = asyncio.run(_run(node, base, key, pid))
    when = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"when": when, "host": host.describe(), "clients": CLIENTS, **figures}
    (RESULTS / "websocket.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# WebSocket fan-out",
        "",
        f"Run {when} by `python -m bench.websocket` (`make bench`); how it is made: the module's "
        f"docstring. {CLIENTS} clients subscribed to `newHeads` through the router (native "
        f"executor, one worker), one upstream subscription; {figures['blocks']} blocks mined one "
        f"at a time; a client subscribed to anvil directly is the baseline. Machine state: "
        f"{host.describe()}.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| notifications missing | {figures['missing_notifications']} |",
        f"| node to the median client, p50 / p99 | {figures['median_client_ms']['p50']} / "
        f"{figures['median_client_ms']['p99']} ms after the direct client |",
        f"| node to the last client, p50 / p99 | {figures['last_client_ms']['p50']} / "
        f"{figures['last_client_ms']['p99']} ms after the direct client |",
        f"| router memory, before the clients / with them | {figures['router_rss_mb_before']} / "
        f"{figures['router_rss_mb_with_clients']} MB |",
        f"| per idle subscribed connection | {figures['kib_per_connection']} KiB |",
    ]
    (RESULTS / "websocket.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
