"""Which ASGI server and which HTTP client the router's hot path should use.

For each server (uvicorn with uvloop and httptools; granian) and client (pyreqwest, aiohttp,
httpx), the minimal forwarder of `bench.forwarders` runs as one worker process in front of a static
nginx upstream, loaded by wrk. nginx `proxy_pass` in front of the same upstream is the baseline,
and the upstream hit directly is the ceiling. Results: bench/results/transport.{json,md}.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.upstreams import STATIC_BODY, nginx, require_tools, wait_until_serving
from bench.wrk import WrkResult, run_wrk

RESULTS = Path(__file__).resolve().parent / "results"
BODY = '{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":1}'
CONNECTIONS = 64
DURATION_S = int(os.environ.get("BENCH_DURATION_S", "8"))
SERVERS = ("uvicorn asgi", "granian asgi", "granian rsgi")
CLIENTS = ("echo", "http1", "pyreqwest", "aiohttp", "httpx")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _command(server: str, port: int) -> list[str]:
    if server == "uvicorn asgi":
        return [
            sys.executable, "-m", "uvicorn", "bench.forwarders:app", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
    interface, app = ("rsgi", "rsgi_app") if server == "granian rsgi" else ("asgi", "app")
    # One runtime thread: on two cores more threads only contend (measured: 10.5k vs 15k req/s).
    return [
        sys.executable, "-m", "granian", "--interface", interface, f"bench.forwarders:{app}",
        "--port", str(port), "--workers", "1", "--runtime-threads", "1", "--loop", "uvloop",
        "--no-ws", "--log-level", "warning",
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Running:
    """A server started for a benchmark."""

    url: str
    pid: int  # its first process; workers run below it


@contextmanager
def forwarder(server: str, client: str, upstream: str) -> Iterator[Running]:
    port = free_port()
    env = {**os.environ, "BENCH_CLIENT": client, "BENCH_UPSTREAM": upstream}
    process = subprocess.Popen(
        _command(server, port), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_serving(url)
        yield Running(url, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=10)


def measure(url: str) -> WrkResult:
    run_wrk(url, BODY, connections=CONNECTIONS, duration_s=2)  # warm-up
    return run_wrk(url, BODY, connections=CONNECTIONS, duration_s=DURATION_S)


def main() -> None:
    require_tools()
    static_port, proxy_port = free_port(), free_port()
    rows: dict[str, WrkResult] = {}
    with nginx(static_port, proxy_port):
        upstream = f"http://127.0.0.1:{static_port}/"
        rows["static upstream, direct"] = measure(upstream)
        rows["nginx proxy_pass"] = measure(f"http://127.0.0.1:{proxy_port}/")
        for server in SERVERS:
            for client in CLIENTS:
                with forwarder(server, client, upstream) as running:
                    rows[f"{server} + {client}"] = measure(running.url)
    baseline = rows["nginx proxy_pass"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    (RESULTS / "transport.json").write_text(
        json.dumps({"when": when, "rows": {k: asdict(v) for k, v in rows.items()}}, indent=2) + "\n"
    )
    lines = [
        "# Transport choice: server and HTTP client of the hot path",
        "",
        f"{when}; one worker process each; wrk, {CONNECTIONS} connections, {DURATION_S} s; "
        f"upstream: nginx returning a fixed {len(STATIC_BODY)}-byte JSON-RPC result. "
        "`echo` answers without any upstream: the server's own ceiling.",
        "",
        "| setup | requests/s | vs nginx proxy_pass | p50 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        ratio = r.requests_per_s / baseline.requests_per_s
        lines.append(
            f"| {name} | {r.requests_per_s:.0f} | {ratio:.2f}x "
            f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.errors} |"
        )
    (RESULTS / "transport.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
