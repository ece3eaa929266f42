"""Which ASGI server and which HTTP client the Python executor should use, beside the native one.

For each ASGI server (uvicorn with uvloop and httptools; granian) and well-kept client (aiohttp,
pyreqwest, httpx), the minimal forwarder of `bench.forwarders` runs as one worker process in front
of a static nginx upstream, loaded by wrk; so does the minimal forwarder on the native executor,
Rust's server, driver and client with a one-line Python handler (`bench.native_forwarder`).
nginx `proxy_pass` in front of the same upstream is the baseline, and the upstream hit directly is
the ceiling. All setups run at once and are loaded in interleaved rounds (`bench.rounds`), so that
a slow spell of the machine counts against them alike. Results: bench/results/transport.{json,md}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.cpu import process_tree
from bench.rounds import (
    BASELINE,
    CONNECTIONS,
    DURATION_S,
    WARM_UP_S,
    Target,
    load_in_rounds,
    summarise,
)
from bench.upstreams import STATIC_BODY, free_port, nginx, require_tools, wait_until_serving

RESULTS = Path(__file__).resolve().parent / "results"
PYTHON_SERVERS = ("uvicorn asgi", "granian asgi")
PYTHON_CLIENTS = ("echo", "aiohttp", "pyreqwest", "httpx")
# The native server has its own client, in Rust: no Python client goes with it.
SETUPS = [
    *((server, client) for server in PYTHON_SERVERS for client in PYTHON_CLIENTS),
    ("native", "echo"),
    ("native", "native"),
]


def _command(server: str, port: int) -> list[str]:
    if server == "native":
        return [sys.executable, "-m", "bench.native_forwarder", str(port)]
    if server == "uvicorn asgi":
        return [
            sys.executable, "-m", "uvicorn", "bench.forwarders:app", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools", "--no-access-log", "--log-level", "warning",
        ]  # fmt: skip
    # One runtime thread: on two cores more threads only contend (measured: 10.5k vs 15k req/s).
    return [
        sys.executable, "-m", "granian", "--interface", "asgi", "bench.forwarders:app",
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


def main() -> None:
    require_tools()
    static_port, proxy_port = free_port(), free_port()
    with nginx(static_port, proxy_port) as nginxes, ExitStack() as running:
        upstream = f"http://127.0.0.1:{static_port}/"
        targets = {
            "static upstream, direct": Target(upstream, None, process_tree(nginxes.upstream)),
            BASELINE: Target(f"http://127.0.0.1:{proxy_port}/", None, process_tree(nginxes.proxy)),
        }
        # Every forwarder runs for the whole benchmark, so that each round loads them all.
        for server, client in SETUPS:
            started = running.enter_context(forwarder(server, client, upstream))
            pids = process_tree(started.pid)
            targets[f"{server} + {client}"] = Target(started.url, None, pids)
        rounds, cpu_rounds = load_in_rounds(targets)
    rows = summarise(rounds, cpu_rounds)
    RESULTS.mkdir(parents=True, exist_ok=True)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    (RESULTS / "transport.json").write_text(
        json.dumps(
            {
                "when": when,
                "rounds": [{k: asdict(v) for k, v in r.items()} for r in rounds],
                "cpu_rounds": [{k: asdict(v) for k, v in r.items()} for r in cpu_rounds],
                "summary": {k: asdict(v) for k, v in rows.items()},
            },
            indent=2,
        )
        + "\n"
    )
    lines = [
        "# Transport choice: the Python executor's server and client, beside the native one",
        "",
        f"{when}; one worker process each; wrk, {CONNECTIONS} connections, {DURATION_S} s after a "
        f"{WARM_UP_S} s warm-up; {len(rounds)} interleaved rounds over all setups, medians shown, "
        "with the lowest and highest per-round ratio to nginx. Upstream: nginx returning a fixed "
        f"{len(STATIC_BODY)}-byte JSON-RPC result. `echo` answers without any upstream: the "
        "server's own ceiling. `native` is the router's default executor: HTTP server, driver "
        "and client in Rust (`chainrouter._native`), stepping a one-line Python handler.",
        "",
        "| setup | requests/s | vs nginx proxy_pass (range) | p50 ms | p99 ms | errors "
        "| CPU µs per request | busiest thread, µs per request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r.requests_per_s:.0f} | {r.vs_nginx:.2f}x "
            f"({r.vs_nginx_low:.2f} to {r.vs_nginx_high:.2f}) | {r.p50_ms:.2f} | {r.p99_ms:.2f} "
            f"| {r.errors} | {r.cpu_us:.1f} | {r.busiest_thread_us:.1f} |"
        )
    lines += [
        "",
        "CPU per request: user and system time of the setup's processes over the measured run, "
        "divided by the requests served. The upstream and the proxy are two nginx instances of "
        "one worker each; no row but the upstream's counts the upstream. The busiest thread of "
        "a Python server's worker is its event loop, of the native server its server thread.",
    ]
    (RESULTS / "transport.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
