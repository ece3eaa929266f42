"""Where a router worker's CPU goes, in process: the pipeline, and the Python executor's client.

No server in front, the router's own process set-up (the whole registry, a domain-restricted key
with credits):

- the whole request as an executor runs it (`RouterFace.respond`, the program stepped by hand,
  each `Forward` answered at once with the static upstream's answer, so that a hedged call's
  `Race` is won by its first attempt), one call at a time: with
  the caches warm from the call before, and with the caches emptied before each call (8 MiB
  written). A served router is between the two: each call's code and data compete for the caches
  with the HTTP server's, the kernel's and the other processes'. This is the pipeline's own CPU,
  the same on either executor;
- the Python executor's client alone (aiohttp), `Forward` to the static upstream, 64 in flight;
- the whole request on the Python executor against the static upstream, 64 in flight, with
  coalescing off (the calls are identical: joined, they would not each be forwarded).

The stepped rows run the default settings, the response cache and coalescing on: their stages
run for every call, as in production (the call, `eth_blockNumber`, is never kept).

Figures are CPU microseconds per call (`time.process_time`, or the thread's time for the stepped
rows), medians of BENCH_ROUNDS rounds.
Results: bench/results/pipeline.{json,md}.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop

from bench.rounds import BODY, ROUNDS
from bench.router import CHAIN, ORIGIN, RESULTS, big_world
from bench.upstreams import STATIC_BODY, free_port, nginx, require_tools
from chainrouter.logs import JsonLines
from chainrouter.router.contract import Forward, HttpAnswer, HttpRequest, Program, Race
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.http_face import RouterFace
from chainrouter.router.runtime import RouterRuntime, build_runtime
from chainrouter.settings import load_settings
from chainrouter.stores.sql.engine import create_database_engine

CALLS = int(os.environ.get("BENCH_PIPELINE_CALLS", "40000"))
IN_FLIGHT = 64
COLD_CALLS = 2000
_EVICTING = bytearray(8 << 20)  # larger than this machine's last-level cache
_ANSWER = STATIC_BODY.encode()


def _runtime(database_url: str, *, coalesce: bool = True) -> RouterRuntime:
    # The journal on, as in production, in a directory of its own: this runtime is never stopped.
    journal_dir = tempfile.mkdtemp(prefix="bench-usage-journal-")
    settings = load_settings(
        database_url=database_url, usage_journal_dir=journal_dir, coalesce=coalesce
    )
    return build_runtime(settings, create_database_engine(settings.database_url))


def _request(key: str) -> HttpRequest:
    return HttpRequest(
        "POST",
        f"/rpc/{CHAIN}/{key}",
        ORIGIN["Origin"],
        None,
        None,
        "application/json",
        "127.0.0.1",
        BODY.encode(),
    )


def _executor(runtime: RouterRuntime) -> PythonExecutor:
    return PythonExecutor(runtime.limiter, max_response_bytes=1 << 20, connect_timeout_s=5)


async def _cpu_us_per_call(call: Callable[[], Awaitable[object]]) -> float:
    async def caller(calls: int) -> None:
        for _ in range(calls):
            await call()

    await asyncio.gather(*(caller(50) for _ in range(IN_FLIGHT)))  # warm-up: connections, caches
    started = time.process_time()
    await asyncio.gather(*(caller(CALLS // IN_FLIGHT) for _ in range(IN_FLIGHT)))
    return (time.process_time() - started) / CALLS * 1e6


async def _forward(url: str) -> bytes:
    answer = await Forward(url, BODY.encode(), 10)
    if not isinstance(answer, bytes):
        raise RuntimeError(f"the upstream failed: {answer}")
    return answer


async def _python_round(database_url: str, static: str, key: str) -> dict[str, float]:
    # 64 identical calls in flight would share attempts: this row measures each one forwarded.
    runtime = _runtime(database_url, coalesce=False)
    executor = _executor(runtime)
    face = runtime.face([], executor)
    request = _request(key)

    async def whole() -> None:
        answer = await executor.run(face.respond(request))
        if answer.status != 200:
            raise RuntimeError(f"the router answered {answer.status}: {answer.body!r}")

    figures = {
        "Python executor: its client alone (aiohttp), 64 in flight": await _cpu_us_per_call(
            lambda: executor.run(_forward(f"{static}chain/{CHAIN:x}/n1"))
        ),
        "Python executor: the whole request against the static upstream, 64 in flight": (
            await _cpu_us_per_call(whole)
        ),
    }
    await executor.close()
    await runtime.stop()
    return figures


def _evict_caches() -> None:
    _EVICTING[::64] = b"\x01" * (len(_EVICTING) // 64)  # one write per cache line


def _stepped(face: RouterFace, request: HttpRequest) -> HttpAnswer:
    """One request through the pipeline, stepped as an executor steps it; every `Forward` is
    answered at once, so a `Race` is won by its first program before any other starts."""
    answer: HttpAnswer = _drive(face.respond(request))
    if answer.status != 200:
        raise RuntimeError(f"the router answered {answer.status}: {answer.body!r}")
    return answer


def _drive(program: Program) -> Any:
    value: Any = None
    while True:
        try:
            command = program.send(value)
        except StopIteration as done:
            return done.value
        if isinstance(command, Forward):
            value = _ANSWER
        elif isinstance(command, Race):
            value = (0, _drive(command.programs[0]))
            for later in command.programs[1:]:
                later.close()
        else:
            raise RuntimeError(f"the pipeline awaited {command!r}")


def _stepped_round(database_url: str, key: str) -> dict[str, float]:
    runtime = _runtime(database_url)
    face = runtime.face([], _executor(runtime))
    request = _request(key)
    for _ in range(500):
        _stepped(face, request)
    started = time.thread_time()
    for _ in range(CALLS):
        _stepped(face, request)
    warm = (time.thread_time() - started) / CALLS * 1e6
    cold_ns = 0
    for _ in range(COLD_CALLS):
        _evict_caches()
        started_ns = time.thread_time_ns()
        _stepped(face, request)
        cold_ns += time.thread_time_ns() - started_ns
    runtime.engine.dispose()
    return {
        "pipeline, the whole request stepped in process, caches warm": warm,
        "pipeline, the whole request stepped in process, caches emptied before each call": (
            cold_ns / COLD_CALLS / 1000
        ),
        "pipeline, caches warm, a JSON log line per request (to /dev/null)": _logged_round(
            database_url, key
        ),
    }


def _logged_round(database_url: str, key: str) -> float:
    """The warm figure with the router's request log on (router/request_log.py), its JSON lines
    written to /dev/null: what a line per request costs."""
    requests = logging.getLogger("chainrouter.requests")
    with open(os.devnull, "w") as sink:
        handler = logging.StreamHandler(sink)
        handler.setFormatter(JsonLines())
        requests.addHandler(handler)
        requests.setLevel(logging.INFO)
        requests.propagate = False
        try:
            journal_dir = tempfile.mkdtemp(prefix="bench-usage-journal-")
            settings = load_settings(
                database_url=database_url, usage_journal_dir=journal_dir, request_log_level="info"
            )
            runtime = build_runtime(settings, create_database_engine(settings.database_url))
            face = runtime.face([], _executor(runtime))
            request = _request(key)
            for _ in range(500):
                _stepped(face, request)
            started = time.thread_time()
            for _ in range(CALLS):
                _stepped(face, request)
            runtime.engine.dispose()
            return (time.thread_time() - started) / CALLS * 1e6
        finally:
            requests.removeHandler(handler)
            requests.propagate = True


def main() -> None:
    require_tools()
    static_port, proxy_port = free_port(), free_port()
    static = f"http://127.0.0.1:{static_port}/"
    with tempfile.TemporaryDirectory() as directory, nginx(static_port, proxy_port):
        setup = big_world(Path(directory), static)
        rounds = [
            {
                **_stepped_round(setup.database_url, setup.key),
                **uvloop.run(_python_round(setup.database_url, static, setup.key)),
            }
            for _ in range(ROUNDS)
        ]
    medians = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    when = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "pipeline.json").write_text(
        json.dumps(
            {
                "when": when,
                "calls": CALLS,
                "rounds": rounds,
                "median": medians,
            },
            indent=2,
        )
        + "\n"
    )
    lines = [
        "# Router pipeline: CPU per call, in process",
        "",
        f"{when}. {CALLS} calls per figure, the whole registry loaded; medians of {len(rounds)} "
        "rounds (lowest to highest in brackets). No server in front. The stepped rows: one call "
        f"at a time, each node answering at once; emptied caches: {COLD_CALLS} calls, each after "
        f"{len(_EVICTING) >> 20} MiB written. The Python executor rows: {IN_FLIGHT} in flight on "
        "uvloop.",
        "",
        "| what | CPU µs per call |",
        "|---|---|",
    ]
    for name, median in medians.items():
        low, high = min(r[name] for r in rounds), max(r[name] for r in rounds)
        lines.append(f"| {name} | {median:.1f} ({low:.1f} to {high:.1f}) |")
    (RESULTS / "pipeline.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
