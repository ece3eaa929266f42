"""The router's full pipeline under load, against nginx, with the whole registry loaded.

One go, on one machine: a static JSON-RPC upstream (nginx) hit directly, the same through nginx
`proxy_pass` (the baseline), and through `chainrouter serve --role rpc` on each of its executors:
the native one (Rust, the default) with one and with two worker processes, and the Python one
(uvicorn and aiohttp) with one. The
router runs with 1,940 chains x 3 nodes (5,820 nodes, all pointing at the static upstream) and
serves a key restricted to one domain, with credits to check and bill: every request goes through
key, domain, credit check, routing, forwarding and metering. The targets are loaded in interleaved
rounds (BENCH_ROUNDS, 3 by default); the file shows medians, and each ratio to nginx is the median
of the ratios within a round, so a slow spell of this shared machine counts against every target
alike. The half-load runs are interleaved rounds too.

Then latency at half load: the native router's one-worker maximum, halved, offered to each target
by wrk connections that each pause a random while (exponential, 10 ms on average) after every
answer, so that requests arrive spread out rather than in step; the added p50 is a target's minus
the upstream's own, within the same round. Each half-load round runs twice: once with every
process free to run on either core, and once with the target alone on one core and wrk, the
upstream and everything else on the other (`taskset`; the upstream's own row has it beside wrk,
as in every other row), the nearest this one machine gets to the separate machines a proxy, its
clients and its nodes run on in production. Memory is the resident size of each router worker
with the snapshot loaded, before and after the load.
Results: bench/results/router.{json,md}."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.cpu import CpuUse, pin, process_tree, rss_mb
from bench.host import HostState, probe
from bench.rounds import (
    BASELINE,
    BODY,
    CONNECTIONS,
    DURATION_S,
    ROUNDS,
    Target,
    load_in_rounds,
    summarise,
)
from bench.transport import forwarder
from bench.upstreams import free_port, nginx, require_tools, wait_until_serving
from bench.wrk import WrkResult, run_wrk
from chainrouter.catalog.importer import import_catalog
from chainrouter.catalog.parse import parse_catalog
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.router.sync import load_snapshot
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine

ROOT = Path(__file__).resolve().parents[1]
CHAINS_JSON = ROOT.parent / "shared" / "data" / "chains.json"
RESULTS = ROOT / "bench" / "results"
HALF_LOAD_DELAY_MS = 10
# Latency differences of a tenth of a millisecond need more rounds than throughput ratios.
HALF_LOAD_ROUNDS = max(ROUNDS, 5)
CHAIN = 1
ORIGIN = {"Origin": "https://app.example.com"}
BARE = "bare Python forwarder (uvicorn + aiohttp, no pipeline), 1 worker"
BARE_NATIVE = "bare native forwarder (Rust server and client, no pipeline), 1 worker"
PYTHON_ONE_WORKER = "chainrouter python, 1 worker(s)"
NATIVE_ONE_WORKER = "chainrouter native, 1 worker(s)"
NATIVE_PIPELINE = (
    "chainrouter native, 1 worker(s), decisions off: every request through the pipeline"
)
UPSTREAM = "static upstream, direct"
ECHO = "uvicorn echo server (answers itself, no upstream), 1 worker"
NATIVE_HALF = "chainrouter native, 1 worker"
PYTHON_HALF = "chainrouter python, 1 worker"
# For the pinned half-load runs: the target alone on the last CPU, the rest of the machine on
# the others.
ALL_CPUS = os.sched_getaffinity(0)
TARGET_CPU = {max(ALL_CPUS)}
OTHER_CPUS = ALL_CPUS - TARGET_CPU


@dataclass(frozen=True, slots=True)
class Setup:
    database_url: str
    key: str
    nodes: int


def big_world(directory: Path, static_url: str, prices: dict[str, str] | None = None) -> Setup:
    """The whole registry, 3 nodes a chain at `static_url`, in two plans pricing `prices`
    (method -> credits; the second plan dearer)."""
    database_url = f"sqlite:///{directory / 'router-bench.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    import_catalog(engine, str(CHAINS_JSON), max_bytes=64 << 20, timeout_s=60)
    chain_ids = sorted({c.chain_id for c in parse_catalog(CHAINS_JSON.read_bytes()).chains})
    prices = prices or {"eth_blockNumber": "0.0000003", "eth_call": "0.0000005"}
    methods = [{"method": method, "cost": cost} for method, cost in prices.items()]
    plans: list[dict[str, Any]] = [
        {"name": "economy", "methods": methods, "nodes": []},
        {"name": "fast", "methods": [{**m, "cost": "0.000001"} for m in methods], "nodes": []},
    ]
    n = 0
    for chain_id in chain_ids:
        for _ in range(3):
            n += 1
            url = f"{static_url}chain/{chain_id:x}/n{n}"
            plans[n % 2]["nodes"].append({"url": url, "chain_id": chain_id})
    key = generate_secret(SecretKind.API_KEY)
    config = {
        "version": 1,
        "providers": [{"slug": "bench", "name": "Bench", "plans": plans}],
        "customers": [
            {
                "email": "bench@example.com",
                "name": "Bench",
                "credits": [{"reference": "bench", "amount": "1000000"}],
                "api_keys": [
                    {"name": "bench", "secret": key, "allowed_domains": ["app.example.com"]}
                ],
            }
        ],
    }
    apply_config(engine, validate_document(config))
    engine.dispose()
    return Setup(database_url, key, n)


def _snapshot_load_s(database_url: str) -> float:
    engine = create_database_engine(database_url)
    try:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            load_snapshot(engine)
            times.append(time.perf_counter() - started)
        return statistics.median(times)
    finally:
        engine.dispose()


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(p) for p in found.stdout.split()]


@contextmanager
def router(
    setup: Setup, workers: int, executor: str, settings: dict[str, str] | None = None
) -> Iterator[tuple[str, list[int]]]:
    """A served router on `executor` (native or python) with `workers` worker processes, and
    `settings` (environment variables) beside the benchmark's own."""
    port = free_port()
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": setup.database_url,
        "CHAINROUTER_RPC_PORT": str(port),
        "CHAINROUTER_RPC_WORKERS": str(workers),
        "CHAINROUTER_LOG_LEVEL": "warning",
        "CHAINROUTER_RPC_SERVER": executor,
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its nodes are the local nginx
        # Every request is the same call: coalesced, or answered from a cache, it would not
        # measure the pipeline and its forwarding (those: bench/cache.py).
        "CHAINROUTER_COALESCE": "false",
        "CHAINROUTER_CACHE_MAX_BYTES": "0",
        **(settings or {}),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"], env=env
    )
    url = f"http://127.0.0.1:{port}/rpc/{CHAIN}/{setup.key}"
    # A single worker is the process itself; more are its children.
    in_process = workers == 1
    try:
        deadline = time.monotonic() + 60
        while (
            not in_process and len(_children(process.pid)) < workers and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        wait_until_serving(url, timeout_s=60)
        probe = httpx.post(
            url, content=BODY, headers={**ORIGIN, "content-type": "application/json"}, timeout=5
        )
        if probe.status_code != 200:
            raise RuntimeError(f"router answered {probe.status_code}: {probe.text}")
        running = httpx.get(f"http://127.0.0.1:{port}/health").json()["executor"]
        if running != executor:
            raise RuntimeError(f"the router runs the {running} executor, not {executor}")
        yield url, [process.pid] if in_process else _children(process.pid)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _half_load(
    url: str, rate: float, headers: dict[str, str] | None = None, cpus: set[int] | None = None
) -> WrkResult:
    connections = max(1, round(rate * HALF_LOAD_DELAY_MS / 1000))
    return run_wrk(
        url,
        BODY,
        connections=connections,
        duration_s=DURATION_S,
        headers=headers,
        mean_delay_ms=HALF_LOAD_DELAY_MS,
        cpus=cpus,
    )


@contextmanager
def _alone_on_a_core(target: list[int]) -> Iterator[None]:
    """`target`'s processes on a core of their own; every other process of the benchmark (the
    upstream, the other targets, wrk once started with OTHER_CPUS) on the rest."""
    everything = process_tree(os.getpid())[1:]
    pin(everything, OTHER_CPUS)
    pin(target, TARGET_CPU)
    try:
        yield
    finally:
        pin(everything, ALL_CPUS)


def _half_load_alone(
    where: tuple[str, dict[str, str] | None], rate: float, target: list[int]
) -> WrkResult:
    url, headers = where
    with _alone_on_a_core(target):
        return _half_load(url, rate, headers, cpus=OTHER_CPUS)


def main() -> None:
    require_tools()
    static_port, proxy_port = free_port(), free_port()
    static_root = f"http://127.0.0.1:{static_port}/"
    # Every target gets the answer of a chain-1 node, as the router's nodes of chain 1 give it.
    static = f"{static_root}chain/{CHAIN:x}/direct"
    proxy = f"http://127.0.0.1:{proxy_port}/chain/{CHAIN:x}/direct"
    half: list[dict[str, WrkResult]] = []
    half_alone: list[dict[str, WrkResult]] = []
    memory: dict[str, list[float]] = {}
    host = [probe()]
    with (
        tempfile.TemporaryDirectory() as directory,
        nginx(static_port, proxy_port) as nginxes,
        ExitStack() as running,
    ):
        setup = big_world(Path(directory), static_root)
        snapshot_s = _snapshot_load_s(setup.database_url)
        # The least any forwarder on the Python executor's server and client does: read, POST,
        # answer.
        bare = running.enter_context(forwarder("uvicorn asgi", "aiohttp", static))
        # The same on the native executor: its Rust server and client, a one-line handler.
        bare_native = running.enter_context(forwarder("native", "native", static))
        python = running.enter_context(router(setup, 1, "python"))
        natives = {
            workers: running.enter_context(router(setup, workers, "native")) for workers in (1, 2)
        }
        # The same request again and again is what the native server answers itself from the
        # pipeline's decision (docs/router.md, "Scoped decisions"): with decisions off, the
        # pipeline serves every one, as it does each first request and every call out of scope.
        pipeline_only = running.enter_context(
            router(setup, 1, "native", {"CHAINROUTER_REPEAT_FORWARDS": "false"})
        )
        time.sleep(1)  # let the snapshots settle and the first health checks go out
        memory["python, 1 worker(s), loaded"] = [rss_mb(p) for p in python[1]]
        for workers, (_, pids) in natives.items():
            memory[f"native, {workers} worker(s), loaded"] = [rss_mb(p) for p in pids]
        targets = {
            UPSTREAM: Target(static, None, process_tree(nginxes.upstream)),
            BASELINE: Target(proxy, None, process_tree(nginxes.proxy)),
            BARE: Target(bare.url, None, process_tree(bare.pid)),
            BARE_NATIVE: Target(bare_native.url, None, process_tree(bare_native.pid)),
            PYTHON_ONE_WORKER: Target(python[0], ORIGIN, python[1]),
            **{
                f"chainrouter native, {w} worker(s)": Target(url, ORIGIN, pids)
                for w, (url, pids) in natives.items()
            },
            NATIVE_PIPELINE: Target(pipeline_only[0], ORIGIN, pipeline_only[1]),
        }
        # Interleaved rounds: a slow spell of this shared machine hits every target of a round
        # alike, and the medians of the per-round ratios set it aside.
        rounds, cpu_rounds = load_in_rounds(targets)
        memory["python, 1 worker(s), after load"] = [rss_mb(p) for p in python[1]]
        for workers, (_, pids) in natives.items():
            memory[f"native, {workers} worker(s), after load"] = [rss_mb(p) for p in pids]
        rate = statistics.median(r[NATIVE_ONE_WORKER].requests_per_s for r in rounds) / 2
        # The floor of this server on this machine at the same load: answering without any
        # upstream, and forwarding without the pipeline.
        echo = running.enter_context(forwarder("uvicorn asgi", "echo", static))
        half_targets: dict[str, tuple[str, dict[str, str] | None]] = {
            UPSTREAM: (static, None),
            BASELINE: (proxy, None),
            ECHO: (echo.url, None),
            BARE: (bare.url, None),
            BARE_NATIVE: (bare_native.url, None),
            PYTHON_HALF: (python[0], ORIGIN),
            NATIVE_HALF: (natives[1][0], ORIGIN),
        }
        alone_targets = {
            # The upstream where it is in every other row, beside wrk: a difference between
            # two rows is then the proxy's alone, not also the upstream's change of core.
            UPSTREAM: [],
            BASELINE: process_tree(nginxes.proxy),
            BARE_NATIVE: process_tree(bare_native.pid),
            NATIVE_HALF: natives[1][1],
        }
        for _ in range(HALF_LOAD_ROUNDS):
            half.append({name: _half_load(url, rate, h) for name, (url, h) in half_targets.items()})
            if OTHER_CPUS:  # a machine of one CPU has no core to leave a target alone on
                half_alone.append(
                    {
                        name: _half_load_alone(half_targets[name], rate, pids)
                        for name, pids in alone_targets.items()
                    }
                )
    host.append(probe())
    _write(
        rounds,
        cpu_rounds,
        {"shared": half, "alone": half_alone},
        memory,
        rate,
        snapshot_s,
        setup.nodes,
        host,
    )


def _half_load_table(half: list[dict[str, WrkResult]]) -> list[str]:
    def added(name: str, base: str) -> str:
        if base not in half[0]:  # not loaded in this layout
            return ""
        return f"{statistics.median(r[name].p50_ms - r[base].p50_ms for r in half):+.3f} ms"

    lines = [
        "| target | achieved requests/s | p50 ms | p99 ms | p50 added over the upstream "
        "| over nginx proxy_pass | over its server's bare forwarder |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in half[0]:
        runs = [r[name] for r in half]
        router_row = name.startswith("chainrouter")
        lines.append(
            f"| {name} | {statistics.median(h.requests_per_s for h in runs):.0f} "
            f"| {statistics.median(h.p50_ms for h in runs):.3f} "
            f"| {statistics.median(h.p99_ms for h in runs):.3f} "
            f"| {added(name, UPSTREAM)} | {added(name, BASELINE) if router_row else ''} "
            f"| {added(name, BARE_NATIVE if 'native' in name else BARE) if router_row else ''} |"
        )
    return lines


def _alone_section(half: list[dict[str, WrkResult]]) -> list[str]:
    return [
        "",
        "### The target alone on a core",
        "",
        f"In the same rounds, each of these targets again, alone on CPU {min(TARGET_CPU)}, with "
        f"wrk, the upstream and every other process of the benchmark on CPU "
        f"{', '.join(map(str, sorted(OTHER_CPUS)))} (`taskset`): the nearest this one machine gets "
        "to the separate machines a proxy, its clients and its nodes run on in production. The "
        "upstream's own row has it where it is in the others, beside wrk, so a difference "
        "between two rows is the proxy's alone. The added latencies compare rows of this table "
        "only.",
        "",
        *_half_load_table(half),
    ]


def _write(
    rounds: list[dict[str, WrkResult]],
    cpu_rounds: list[dict[str, CpuUse]],
    half_load: dict[str, list[dict[str, WrkResult]]],
    memory: dict[str, list[float]],
    rate: float,
    snapshot_s: float,
    nodes: int,
    host: list[HostState],
) -> None:
    rows = summarise(rounds, cpu_rounds)
    natives = [
        r[NATIVE_ONE_WORKER].requests_per_s / r[PYTHON_ONE_WORKER].requests_per_s for r in rounds
    ]
    native_gain = statistics.median(natives)
    pipelines = [
        r[NATIVE_ONE_WORKER].requests_per_s / r[BARE_NATIVE].requests_per_s for r in rounds
    ]
    pipeline_share = statistics.median(pipelines)
    repeats = [r[NATIVE_PIPELINE].requests_per_s / r[BARE_NATIVE].requests_per_s for r in rounds]
    repeat_share = statistics.median(repeats)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "router.json").write_text(
        json.dumps(
            {
                "when": when,
                "python": f"{sys.version} (from {sys.base_prefix})",
                "nodes": nodes,
                "snapshot_load_s": round(snapshot_s, 3),
                "rounds": [{k: asdict(v) for k, v in r.items()} for r in rounds],
                "cpu_rounds": [{k: asdict(v) for k, v in r.items()} for r in cpu_rounds],
                "max_load": {k: asdict(v) for k, v in rows.items()},
                "native_vs_python": round(native_gain, 3),
                "native_vs_bare_native": round(pipeline_share, 3),
                "native_pipeline_only_vs_bare_native": round(repeat_share, 3),
                "half_load_rate": round(rate),
                **{
                    key: [{k: asdict(v) for k, v in r.items()} for r in half_load[layout]]
                    for key, layout in (
                        ("half_load_rounds", "shared"),
                        ("half_load_alone_rounds", "alone"),
                    )
                },
                "rss_mb": {k: [round(v, 1) for v in vs] for k, vs in memory.items()},
                "host_start_end": [asdict(h) for h in host],
            },
            indent=2,
        )
        + "\n"
    )
    lines = [
        "# Router benchmark: full pipeline against nginx",
        "",
        f"{when}. wrk, {CONNECTIONS} connections, {DURATION_S} s after a 2 s warm-up, on the same "
        f"2-core machine as everything else; {len(rounds)} interleaved rounds over all targets, "
        "medians shown, with the lowest and highest per-round ratio to nginx. The router holds "
        f"{nodes} nodes over the whole registry; each request is decided by key, domain (Origin "
        "checked against a one-domain list), credit check, routing, forwarding and billing. "
        "Every request is the same `eth_blockNumber` call: the native rows apply the pipeline's "
        'decision in the server once the pipeline has made it (docs/router.md, "Scoped '
        'decisions"; settled by the one ledger in groups before the answers leave), and the row '
        "with decisions off runs the whole pipeline for every request, as for a first request or "
        "one out of every decision's scope. Upstream: "
        "nginx returning a fixed JSON-RPC result. The bare forwarders are the transport "
        "benchmark's: the minimal ASGI app on uvicorn with aiohttp, and the minimal handler on "
        "the native executor (`bench/native_forwarder.py`); each is the ceiling of its server "
        "and client on this machine. The chainrouter native rows run the default executor: the "
        "HTTP server, the driver and the client to nodes in Rust, stepping the Python pipeline; "
        "the python row runs `CHAINROUTER_RPC_SERVER=python`, uvicorn and aiohttp, all in Python "
        "on an asyncio event loop. "
        f"Python {sys.version.split()[0]} from `{sys.base_prefix}`.",
        "",
        f"The machine at the start: {host[0].describe()}; at the end: {host[-1].describe()} "
        "(`bench/host.py`: the slower these, the more every Python server loses against nginx).",
        "",
        "## Maximum throughput",
        "",
        "| target | requests/s | vs nginx proxy_pass (range) | per worker vs nginx | p50 ms "
        "| p99 ms | errors | CPU µs per request | busiest thread, µs per request |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        workers = 2 if "2 worker" in name else 1
        lines.append(
            f"| {name} | {r.requests_per_s:.0f} | {r.vs_nginx:.2f}x "
            f"({r.vs_nginx_low:.2f} to {r.vs_nginx_high:.2f}) | {r.vs_nginx / workers:.2f}x "
            f"| {r.p50_ms:.2f} | {r.p99_ms:.2f} | {r.errors} "
            f"| {r.cpu_us:.1f} | {r.busiest_thread_us:.1f} |"
        )
    lines += [
        "",
        "CPU per request: user and system time of the target's processes over the measured run, "
        "divided by the requests served (medians over the rounds). The upstream and the proxy are "
        "two nginx instances of one worker each, so the proxy, like the routers, reaches its "
        "upstream in another process; no row but the upstream's counts the upstream. The busiest "
        "thread of a Python-executor worker is its event loop, of a native worker "
        "its server thread: near a full second per second, it is what limits the worker.",
        "",
        f"Native against Python executor, one worker: {native_gain:.2f}x the requests/s "
        f"(rounds {min(natives):.2f} to {max(natives):.2f}); all threads "
        f"{rows[NATIVE_ONE_WORKER].cpu_us:.1f} against "
        f"{rows[PYTHON_ONE_WORKER].cpu_us:.1f} µs CPU per request.",
        "",
        f"One native worker against the bare native forwarder: {pipeline_share:.2f}x the "
        f"requests/s (rounds {min(pipelines):.2f} to {max(pipelines):.2f}); server thread "
        f"{rows[NATIVE_ONE_WORKER].busiest_thread_us:.1f} against "
        f"{rows[BARE_NATIVE].busiest_thread_us:.1f} µs per request: what applying decisions "
        "costs beside forwarding (the look-up, the answer's check, settling in groups). With "
        f"decisions off, {repeat_share:.2f}x (rounds {min(repeats):.2f} to "
        f"{max(repeats):.2f}); server thread "
        f"{rows[NATIVE_PIPELINE].busiest_thread_us:.1f} µs per request: what the "
        "pipeline and its glue cost (key, domain, credits, validation, routing, the answer's "
        "check, billing, stepping the program from Rust).",
        "",
        f"## Latency at half load ({rate:.0f} requests/s offered, "
        "half the native one-worker maximum)",
        "",
        f"{len(half_load['shared'])} interleaved rounds. Each wrk connection pauses a random "
        f"while (exponential, {HALF_LOAD_DELAY_MS} ms on average) after every answer, so "
        "requests arrive spread out, not in bursts. Each added latency is the median of the "
        "differences within a round.",
        "",
        "### Sharing the cores",
        "",
        "Every process may run on either core, as in the throughput runs: wrk, the upstream and "
        "the target take turns on the same two cores and evict each other's caches.",
        "",
        *_half_load_table(half_load["shared"]),
    ]
    if half_load["alone"]:
        lines += _alone_section(half_load["alone"])
    lines += [
        "",
        "## Memory (resident size per worker process)",
        "",
        f"Snapshot of {nodes} nodes loaded from SQLite in {snapshot_s:.3f} s (median of 3).",
        "",
        "| router | RSS per worker, MB |",
        "|---|---|",
    ]
    for name, sizes in memory.items():
        lines.append(f"| {name} | {', '.join(f'{s:.0f}' for s in sizes)} |")
    (RESULTS / "router.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
