"""Loading targets in interleaved rounds, and summarising the rounds against nginx.

This machine is shared and its speed drifts by the minute: one target run after another would
compare machine states as much as targets. So every target is loaded once per round, the rounds
repeat, and each target's ratio to nginx is taken within its round before the median is.
CPU time per request, read from /proc, moves far less with the machine's state than requests
per second, so it is reported too.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass

from bench.cpu import CpuUse, cpu_use, thread_ticks
from bench.wrk import WrkResult, run_wrk

BODY = '{"jsonrpc":"2.0","method":"eth_blockNumber","params":[],"id":1}'
CONNECTIONS = 64
DURATION_S = int(os.environ.get("BENCH_DURATION_S", "8"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
WARM_UP_S = 2
BASELINE = "nginx proxy_pass"


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    headers: dict[str, str] | None
    pids: list[int]  # whose CPU time the request costs: the server's processes


@dataclass(frozen=True, slots=True)
class Summary:
    """One target over all rounds: medians, and the spread of its ratio to nginx."""

    requests_per_s: float
    vs_nginx: float  # median of the per-round ratios
    vs_nginx_low: float
    vs_nginx_high: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us: float  # CPU time per request, all threads of the target's processes
    busiest_thread_us: float  # of the one busiest thread: a Python worker's event loop


def load(target: Target) -> tuple[WrkResult, CpuUse]:
    """Full load on `target` after a warm-up, with the CPU its processes spent meanwhile."""
    run_wrk(target.url, BODY, connections=CONNECTIONS, duration_s=WARM_UP_S, headers=target.headers)
    before, started = thread_ticks(target.pids), time.monotonic()
    result = run_wrk(
        target.url, BODY, connections=CONNECTIONS, duration_s=DURATION_S, headers=target.headers
    )
    return result, cpu_use(before, thread_ticks(target.pids), time.monotonic() - started)


def load_in_rounds(
    targets: dict[str, Target],
) -> tuple[list[dict[str, WrkResult]], list[dict[str, CpuUse]]]:
    """ROUNDS rounds, each loading every target once; `targets` must include the baseline."""
    rounds: list[dict[str, WrkResult]] = []
    cpu_rounds: list[dict[str, CpuUse]] = []
    for _ in range(ROUNDS):
        loads = {name: load(target) for name, target in targets.items()}
        rounds.append({name: result for name, (result, _) in loads.items()})
        cpu_rounds.append({name: use for name, (_, use) in loads.items()})
    return rounds, cpu_rounds


def summarise(
    rounds: list[dict[str, WrkResult]], cpu_rounds: list[dict[str, CpuUse]]
) -> dict[str, Summary]:
    summaries = {}
    for name in rounds[0]:
        runs = [r[name] for r in rounds]
        ratios = [r[name].requests_per_s / r[BASELINE].requests_per_s for r in rounds]
        cpu = [
            use[name].per_request_us(run[name].requests_per_s)
            for run, use in zip(rounds, cpu_rounds, strict=True)
        ]
        summaries[name] = Summary(
            requests_per_s=statistics.median(run.requests_per_s for run in runs),
            vs_nginx=statistics.median(ratios),
            vs_nginx_low=min(ratios),
            vs_nginx_high=max(ratios),
            p50_ms=statistics.median(run.p50_ms for run in runs),
            p99_ms=statistics.median(run.p99_ms for run in runs),
            errors=sum(run.errors for run in runs),
            cpu_us=statistics.median(total for total, _ in cpu),
            busiest_thread_us=statistics.median(busiest for _, busiest in cpu),
        )
    return summaries
