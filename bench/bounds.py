"""What the bounds of issue 52 cost, short (under 3 minutes): memory per WebSocket connection and
per filter entry, and the answer-size bound on the fast path.

One anvil node and `chainrouter serve --role rpc` (native executor, one worker), started twice
with everything the same but `CHAINROUTER_MAX_ANSWER_BYTES`: 16 MiB (the default) and 0 (no
bound), in turns (on, off, on, off), each loaded by wrk for ROUND_S seconds with a batch of
BATCH `eth_getBalance` calls at `latest`, which the native server serves under decisions after
the first (the path the bound adds a sum to). Reported: requests a second and the router's CPU
per request, each the median of its turns, and the ratio on / off.

On the first router, before its load: its resident memory before any client, with CLIENTS idle
connections of one key (per connection: the difference over CLIENTS), and with each of them
holding one `logs` subscription of ADDRESSES addresses that no log matches (per filter entry:
the difference over CLIENTS x ADDRESSES). The clients run in this process on the same two cores.
Results: bench/results/bounds.{json,md}.
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

from websockets.asyncio.client import ClientConnection, connect

from bench.cpu import cpu_use, process_tree, rss_mb, thread_ticks
from bench.host import probe
from bench.upstreams import anvil, free_port, wait_until_ready
from bench.worlds import plan, world
from bench.wrk import run_wrk
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CHAIN = 31337
CLIENTS = int(os.environ.get("BENCH_BOUNDS_CLIENTS", "200"))
ADDRESSES = int(os.environ.get("BENCH_BOUNDS_ADDRESSES", "1000"))
ROUND_S = int(os.environ.get("BENCH_BOUNDS_ROUND_S", "8"))
BATCH = 10
CONNECTIONS = 16


def _world(node: str, key: str) -> dict[str, Any]:
    methods = [
        {"method": "eth_chainId", "cost": "0"},
        {"method": "eth_getBalance", "cost": "0.000000001"},
        {"method": "logs", "node_target_type": "ws", "cost": "0.000000001"},
    ]
    return world(CHAIN, {"bench": plan("bounds", methods, [node], CHAIN)}, key)


@contextmanager
def _router(database_url: str, work: Path, max_answer_bytes: int) -> Iterator[tuple[str, int]]:
    port = free_port()
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_RPC_PORT": str(port),
        "CHAINROUTER_LOG_LEVEL": "warning",
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its node is a local anvil
        "CHAINROUTER_MAX_ANSWER_BYTES": str(max_answer_bytes),
        "CHAINROUTER_WS_MAX_CONNECTIONS_PER_ADDRESS": str(CLIENTS + 10),
        "CHAINROUTER_USAGE_JOURNAL_DIR": str(work / f"journal-{max_answer_bytes}"),
    }
    router = subprocess.Popen(
        [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"], env=env
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_ready(base)
        yield base, router.pid
    finally:
        router.terminate()
        router.wait(30)


async def _memory(base: str, key: str, pid: int) -> dict[str, float]:
    url = base.replace("http://", "ws://") + f"/rpc/{CHAIN}/{key}"
    before = rss_mb(pid)
    clients: list[ClientConnection] = []
    for first in range(0, CLIENTS, 50):
        clients += await asyncio.gather(
            *(connect(url, ping_interval=None) for _ in range(first, min(first + 50, CLIENTS)))
        )
    await asyncio.sleep(1.0)
    connected = rss_mb(pid)
    for n, ws in enumerate(clients):
        # Distinct addresses per client: nothing shared between the filters.
        addresses = [f"0x{n:08x}{a:032x}" for a in range(ADDRESSES)]
        params = ["logs", {"address": addresses}]
        await ws.send(
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": params})
        )
        answer = json.loads(await ws.recv())
        if "result" not in answer:
            raise RuntimeError(f"subscription refused: {answer}")
    await asyncio.sleep(1.0)
    subscribed = rss_mb(pid)
    for ws in clients:
        await ws.close()
    return {
        "rss_mb_before": round(before, 1),
        "rss_mb_connected": round(connected, 1),
        "rss_mb_subscribed": round(subscribed, 1),
        "kib_per_connection": round((connected - before) * 1024 / CLIENTS, 2),
        "bytes_per_filter_entry": round(
            (subscribed - connected) * 1024 * 1024 / (CLIENTS * ADDRESSES), 1
        ),
    }


def _load(base: str, key: str, pid: int) -> dict[str, float]:
    calls = [
        {"jsonrpc": "2.0", "id": i, "method": "eth_getBalance", "params": [f"0x{i:040x}", "latest"]}
        for i in range(BATCH)
    ]
    body = json.dumps(calls)
    url = f"{base}/rpc/{CHAIN}/{key}"
    run_wrk(url, body, connections=CONNECTIONS, duration_s=1)  # decisions made, connections warm
    pids = process_tree(pid)
    ticks, started = thread_ticks(pids), time.monotonic()
    result = run_wrk(url, body, connections=CONNECTIONS, duration_s=ROUND_S)
    use = cpu_use(ticks, thread_ticks(pids), time.monotonic() - started)
    total_us, _ = use.per_request_us(result.requests_per_s)
    return {"requests_per_s": result.requests_per_s, "cpu_us": total_us, "errors": result.errors}


def main() -> None:
    host = probe()
    key = generate_secret(SecretKind.API_KEY)
    turns: dict[int, list[dict[str, float]]] = {16 * 1024 * 1024: [], 0: []}
    memory: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as temp, anvil(CHAIN) as (node, _):
        work = Path(temp)
        database_url = f"sqlite:///{work / 'bench.db'}"
        engine = create_database_engine(database_url)
        migrate.upgrade(engine)
        apply_config(engine, validate_document(_world(node, key)))
        engine.dispose()
        for turn in range(4):
            bound = 16 * 1024 * 1024 if turn % 2 == 0 else 0
            with _router(database_url, work, bound) as (base, pid):
                if turn == 0:
                    memory = asyncio.run(_memory(base, key, pid))
                turns[bound].append(_load(base, key, pid))
    on, off = turns[16 * 1024 * 1024], turns[0]

    def median(runs: list[dict[str, float]], field: str) -> float:
        return round(statistics.median(run[field] for run in runs), 1)

    bound_on = {"requests_per_s": median(on, "requests_per_s"), "cpu_us": median(on, "cpu_us")}
    bound_off = {"requests_per_s": median(off, "requests_per_s"), "cpu_us": median(off, "cpu_us")}
    errors = sum(run["errors"] for run in on + off)
    rps_ratio = round(bound_on["requests_per_s"] / bound_off["requests_per_s"], 3)
    cpu_ratio = round(bound_on["cpu_us"] / bound_off["cpu_us"], 3)
    share_mib = round(
        10_000 * memory["kib_per_connection"] / 1024
        + 200_000 * memory["bytes_per_filter_entry"] / 1024 / 1024
    )
    when = datetime.now(UTC).isoformat(timespec="seconds")
    data = {
        "when": when,
        "host": host.describe(),
        "clients": CLIENTS,
        "addresses": ADDRESSES,
        "memory": memory,
        "bound_on": bound_on,
        "bound_off": bound_off,
        "errors": errors,
        "rps_ratio_on_off": rps_ratio,
        "cpu_ratio_on_off": cpu_ratio,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bounds.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# What the bounds cost",
        "",
        f"Run {when} by `python -m bench.bounds`; how it is made: the module's docstring. Native "
        f"executor, one worker, in front of one anvil node. Machine state: {host.describe()}.",
        "",
        "## WebSocket memory",
        "",
        "| figure | value |",
        "|---|---|",
        f"| router memory before any client | {memory['rss_mb_before']} MiB |",
        f"| with {CLIENTS} idle connections of one key | {memory['rss_mb_connected']} MiB |",
        f"| with each holding a `logs` filter of {ADDRESSES} addresses | "
        f"{memory['rss_mb_subscribed']} MiB |",
        f"| per connection | {memory['kib_per_connection']} KiB |",
        f"| per filter entry | {memory['bytes_per_filter_entry']} bytes |",
        "",
        "At these figures the per-customer defaults (10,000 connections, 200,000 filter entries) "
        f"bound one customer to about {share_mib} MiB of a router process.",
        "",
        f"## The answer-size bound on the fast path (a batch of {BATCH} balances, {CONNECTIONS} "
        f"connections, {ROUND_S} s turns, 2 of each)",
        "",
        "| `CHAINROUTER_MAX_ANSWER_BYTES` | requests/s | router CPU per request |",
        "|---|---|---|",
        f"| 16 MiB (on) | {bound_on['requests_per_s']} | {bound_on['cpu_us']} µs |",
        f"| 0 (off) | {bound_off['requests_per_s']} | {bound_off['cpu_us']} µs |",
        f"| on / off | {rps_ratio} | {cpu_ratio} |",
        "",
        f"wrk errors: {errors}.",
    ]
    (RESULTS / "bounds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
