"""The router on a realistic mix of calls, every one unlike the last, against nginx `proxy_pass`.

Each request is drawn from a pool of distinct calls: an `eth_call` with its own call data, a
balance or the code of an address of its own, and, one call in five, `eth_blockNumber` (a client
polling the head). Singles, and batches of 10 such calls. Both nginx and the routers reach an
upstream that reads each request and echoes every call's id (nginx's JavaScript module:
bench/upstreams.py), so a router answers each call with an answer of its own, as a node gives it.

The router holds the whole registry (1,940 chains x 3 nodes, bench/router.py's world) and runs
as by default: the native executor, the response cache and coalescing on, decisions applied
(docs/architecture.md, "Scoped decisions"). Beside it, the same router with decisions off (every
request through the pipeline), and, for the same-call rows of bench/router.py, the same
`eth_blockNumber` again and again. Targets are loaded in interleaved rounds; each ratio to nginx
is the median of the ratios within a round (bench/rounds.py). Per worker: one router worker
against one nginx worker. Results: bench/results/mixed.{json,md}.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.cpu import CpuUse, cpu_use, process_tree, thread_ticks
from bench.host import probe
from bench.rounds import BASELINE, BODY, CONNECTIONS, DURATION_S, ROUNDS, WARM_UP_S
from bench.router import CHAIN, ORIGIN, big_world, router
from bench.upstreams import echo_nginx, free_port, require_tools
from bench.wrk import WrkResult, run_wrk

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
POOL = 2000  # distinct calls of each workload's pool
BATCH = 10
PRICES = {
    "eth_blockNumber": "0.0000003",
    "eth_call": "0.0000005",
    "eth_getBalance": "0.0000004",
    "eth_getCode": "0.0000004",
}
UPSTREAM = "echo upstream, direct"
DECISIONS = "chainrouter native, 1 worker"
PIPELINE = "chainrouter native, 1 worker, decisions off: every request through the pipeline"
DEFAULTS = {"CHAINROUTER_COALESCE": "true", "CHAINROUTER_CACHE_MAX_BYTES": str(16 << 20)}


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    bodies: list[str]
    calls_per_request: int


def _hex(rng: random.Random, size: int) -> str:
    return "0x" + rng.randbytes(size).hex()


def _call(rng: random.Random, call_id: int) -> dict[str, Any]:
    """One call unlike the others: a fifth `eth_blockNumber`, the rest on an address or call
    data of their own, at the head."""
    draw = rng.random()
    if draw < 0.2:
        method, params = "eth_blockNumber", []
    elif draw < 0.5:
        params = [{"to": _hex(rng, 20), "data": "0x70a08231" + rng.randbytes(32).hex()}, "latest"]
        method = "eth_call"
    elif draw < 0.8:
        method, params = "eth_getBalance", [_hex(rng, 20), "latest"]
    else:
        method, params = "eth_getCode", [_hex(rng, 20), "latest"]
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}


def workloads() -> list[Workload]:
    rng = random.Random(1)
    singles = [json.dumps(_call(rng, n % 1000), separators=(",", ":")) for n in range(POOL)]
    batches = [
        json.dumps([_call(rng, i) for i in range(BATCH)], separators=(",", ":"))
        for _ in range(POOL // 4)
    ]
    return [
        Workload("distinct single calls", singles, 1),
        Workload(f"batches of {BATCH} distinct calls", batches, BATCH),
        Workload("the same eth_blockNumber again and again", [BODY], 1),
    ]


def _check(url: str, headers: dict[str, str] | None, workload: Workload) -> None:
    """Every answer is the calls' own: a result under each call's id, never an error."""
    for body in workload.bodies[:50]:
        reply = httpx.post(url, content=body, headers={**(headers or {}), **_JSON}, timeout=10)
        assert reply.status_code == 200, reply.text
        sent, got = json.loads(body), reply.json()
        sent, got = (sent, got) if isinstance(sent, list) else ([sent], [got])
        assert [a["id"] for a in got] == [c["id"] for c in sent], reply.text
        assert all("result" in a for a in got), reply.text


_JSON = {"content-type": "application/json"}


def _load(
    url: str, headers: dict[str, str] | None, pids: list[int], workload: Workload
) -> tuple[WrkResult, CpuUse]:
    def run(seconds: int) -> WrkResult:
        return run_wrk(
            url,
            BODY,
            connections=CONNECTIONS,
            duration_s=seconds,
            headers=headers,
            bodies=workload.bodies,
        )

    run(WARM_UP_S)
    before, started = thread_ticks(pids), datetime.now(UTC)
    result = run(DURATION_S)
    wall = (datetime.now(UTC) - started).total_seconds()
    return result, cpu_use(before, thread_ticks(pids), wall)


def main() -> None:
    require_tools()
    echo_port, proxy_port = free_port(), free_port()
    chain_path = f"chain/{CHAIN:x}/direct"
    echo_root = f"http://127.0.0.1:{echo_port}/"
    host = [probe()]
    rounds: list[dict[str, dict[str, tuple[WrkResult, CpuUse]]]] = []
    with tempfile.TemporaryDirectory() as directory, ExitStack() as running:
        nginxes = running.enter_context(echo_nginx(echo_port, proxy_port))
        setup = big_world(Path(directory), echo_root, PRICES)
        decided = running.enter_context(router(setup, 1, "native", DEFAULTS))
        piped = running.enter_context(
            router(setup, 1, "native", {**DEFAULTS, "CHAINROUTER_CACHE_REPLAY_MAX_BYTES": "0"})
        )
        targets: dict[str, tuple[str, dict[str, str] | None, list[int]]] = {
            UPSTREAM: (echo_root + chain_path, None, process_tree(nginxes.upstream)),
            BASELINE: (
                f"http://127.0.0.1:{proxy_port}/{chain_path}",
                None,
                process_tree(nginxes.proxy),
            ),
            DECISIONS: (decided[0], ORIGIN, decided[1]),
            PIPELINE: (piped[0], ORIGIN, piped[1]),
        }
        loads = workloads()
        for workload in loads:
            for url, headers, _ in targets.values():
                _check(url, headers, workload)
        for _ in range(ROUNDS):
            rounds.append(
                {
                    workload.name: {
                        name: _load(url, headers, pids, workload)
                        for name, (url, headers, pids) in targets.items()
                    }
                    for workload in loads
                }
            )
    host.append(probe())
    _write(rounds, loads, [h.describe() for h in host])


def _write(
    rounds: list[dict[str, dict[str, tuple[WrkResult, CpuUse]]]],
    loads: list[Workload],
    host: list[str],
) -> None:
    when = datetime.now(UTC).isoformat(timespec="seconds")
    summary: dict[str, dict[str, dict[str, float]]] = {}
    lines = [
        "# Router benchmark: distinct calls against nginx",
        "",
        f"{when}. wrk, {CONNECTIONS} connections, {DURATION_S} s after a {WARM_UP_S} s warm-up, "
        f"{len(rounds)} interleaved rounds over every workload and target, medians shown, each "
        "ratio the median of the ratios within a round (the lowest and highest in brackets). "
        "The upstream echoes every call's id (nginx's JavaScript module); nginx `proxy_pass` "
        "and each router reach it alike. One worker each: per worker, the ratio is the row's. "
        f"Python {sys.version.split()[0]}.",
        "",
        f"The machine at the start: {host[0]}; at the end: {host[-1]}.",
    ]
    for workload in loads:
        name = workload.name
        rows: dict[str, dict[str, float]] = {}
        for target in rounds[0][name]:
            results = [r[name][target] for r in rounds]
            ratios = [
                r[name][target][0].requests_per_s / r[name][BASELINE][0].requests_per_s
                for r in rounds
            ]
            rates = [result.requests_per_s for result, _ in results]
            cpu = [use.per_request_us(result.requests_per_s)[0] for result, use in results]
            rows[target] = {
                "requests_per_s": statistics.median(rates),
                "calls_per_s": statistics.median(rates) * workload.calls_per_request,
                "vs_nginx": statistics.median(ratios),
                "vs_nginx_low": min(ratios),
                "vs_nginx_high": max(ratios),
                "p50_ms": statistics.median(result.p50_ms for result, _ in results),
                "p99_ms": statistics.median(result.p99_ms for result, _ in results),
                "errors": sum(result.errors for result, _ in results),
                "cpu_us_per_request": statistics.median(cpu),
            }
        summary[name] = rows
        lines += [
            "",
            f"## {name[0].upper()}{name[1:]}",
            "",
            "| target | requests/s | calls/s | vs nginx proxy_pass (range) | p50 ms | p99 ms "
            "| errors | CPU µs per request |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for target, row in rows.items():
            lines.append(
                f"| {target} | {row['requests_per_s']:.0f} | {row['calls_per_s']:.0f} "
                f"| {row['vs_nginx']:.2f}x ({row['vs_nginx_low']:.2f} to "
                f"{row['vs_nginx_high']:.2f}) | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} "
                f"| {row['errors']:.0f} | {row['cpu_us_per_request']:.1f} |"
            )
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw = [
        {
            workload: {
                target: {"wrk": asdict(result), "cpu": asdict(use)}
                for target, (result, use) in targets.items()
            }
            for workload, targets in round_.items()
        }
        for round_ in rounds
    ]
    (RESULTS / "mixed.json").write_text(
        json.dumps({"when": when, "host": host, "summary": summary, "rounds": raw}, indent=2) + "\n"
    )
    (RESULTS / "mixed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
