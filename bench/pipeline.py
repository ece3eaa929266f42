"""Where a router worker's CPU goes, in process: the HTTP client, the pipeline, and both.

The router benchmark shows that a worker is limited by its event-loop thread. This one splits
that thread's work without any server in front, in the router's own process set-up (the whole
registry, a domain-restricted key with credits), with 64 calls in flight as under load:

- the HTTP client alone, POSTing to the static upstream (what any Python forwarder pays);
- the pipeline with an upstream client that answers at once (key, domain, credits, validation,
  routing, answer check, billing, metering: the pipeline's own CPU);
- the pipeline with the real client against the static upstream (both, interleaved as in a
  loaded router);
- the whole request as the native server runs it (`RouterFace.respond`, its coroutine stepped
  by hand as the Rust driver steps it, the node's answer handed in at once), one call at a time:
  with the caches warm from the call before, and with the caches emptied before each call (8 MiB
  written). A served router is between the two: each call's code and data compete for the caches
  with the HTTP server's, the kernel's and the other processes'.

Figures are CPU microseconds per call (`time.process_time`, or the thread's time for the native
rows), medians of BENCH_ROUNDS rounds.
Results: bench/results/pipeline.{json,md}.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import uvloop

from bench.rounds import BODY, ROUNDS
from bench.router import CHAIN, ORIGIN, RESULTS, big_world
from bench.transport import free_port
from bench.upstreams import STATIC_BODY, nginx, require_tools
from chainrouter import hot_path
from chainrouter.router.http1 import Http1Upstream
from chainrouter.router.http_face import Answer, RouterFace
from chainrouter.router.native_io import UpstreamPost
from chainrouter.router.runtime import RouterRuntime, build_runtime
from chainrouter.router.service import RpcService
from chainrouter.router.upstream import UpstreamReply
from chainrouter.settings import load_settings
from chainrouter.stores.sql.engine import create_database_engine

CALLS = int(os.environ.get("BENCH_PIPELINE_CALLS", "40000"))
IN_FLIGHT = 64
COLD_CALLS = 2000
_EVICTING = bytearray(8 << 20)  # larger than this machine's last-level cache
_ANSWER = UpstreamReply(STATIC_BODY.encode())


class InstantUpstream:
    """An upstream client that answers every call at once with the static answer."""

    async def post(self, url: str, body: bytes, *, timeout_s: float) -> UpstreamReply:
        return _ANSWER

    async def close(self) -> None:
        return None


async def _cpu_us_per_call(call: Callable[[], Awaitable[object]]) -> float:
    async def caller(calls: int) -> None:
        for _ in range(calls):
            await call()

    await asyncio.gather(*(caller(50) for _ in range(IN_FLIGHT)))  # warm-up: connections, caches
    started = time.process_time()
    await asyncio.gather(*(caller(CALLS // IN_FLIGHT) for _ in range(IN_FLIGHT)))
    return (time.process_time() - started) / CALLS * 1e6


async def _keyed(service: RpcService, key: str, body: bytes) -> None:
    reply = await service.handle_keyed(str(CHAIN), key, body, origin=ORIGIN["Origin"])
    if reply.status != 200:
        raise RuntimeError(f"the router answered {reply.status}: {reply.body!r}")


def _runtime(database_url: str, client: InstantUpstream | None) -> RouterRuntime:
    settings = load_settings(database_url=database_url)
    return build_runtime(settings, create_database_engine(settings.database_url), client=client)


async def _round(database_url: str, static: str, key: str) -> dict[str, float]:
    body = BODY.encode()
    client = Http1Upstream(max_response_bytes=1 << 20)
    figures = {
        "HTTP client alone": await _cpu_us_per_call(
            lambda: client.post(f"{static}n1", body, timeout_s=10)
        )
    }
    await client.close()
    for name, upstream in (
        ("pipeline, upstream answering at once", InstantUpstream()),
        ("pipeline and HTTP client", None),
    ):
        runtime = _runtime(database_url, upstream)
        figures[name] = await _cpu_us_per_call(partial(_keyed, runtime.service, key, body))
        await runtime.stop()
    return figures


def _evict_caches() -> None:
    _EVICTING[::64] = b"\x01" * (len(_EVICTING) // 64)  # one write per cache line


def _stepped(face: RouterFace, path: str, body: bytes) -> Answer:
    """One request through the pipeline, stepped as the Rust driver steps it."""
    coroutine = face.respond("POST", path, ORIGIN["Origin"], None, None, "127.0.0.1", body)
    request = coroutine.send(None)
    if not isinstance(request, UpstreamPost):
        raise RuntimeError(f"the pipeline awaited {request!r}, not a POST")
    try:
        coroutine.send(STATIC_BODY.encode())
    except StopIteration as answered:
        answer: Answer = answered.value
        if answer[0] != 200:
            raise RuntimeError(f"the router answered {answer[0]}: {answer[2]!r}") from None
        return answer
    raise RuntimeError("the pipeline awaited a second POST")


def _native_round(database_url: str, key: str) -> dict[str, float]:
    settings = load_settings(database_url=database_url)
    engine = create_database_engine(settings.database_url)
    face = RouterFace(build_runtime(settings, engine, native=True), [])
    path, body = f"/rpc/{CHAIN}/{key}", BODY.encode()
    for _ in range(500):
        _stepped(face, path, body)
    started = time.thread_time()
    for _ in range(CALLS):
        _stepped(face, path, body)
    warm = (time.thread_time() - started) / CALLS * 1e6
    cold_ns = 0
    for _ in range(COLD_CALLS):
        _evict_caches()
        started_ns = time.thread_time_ns()
        _stepped(face, path, body)
        cold_ns += time.thread_time_ns() - started_ns
    engine.dispose()
    return {
        "native pipeline stepped in process, caches warm": warm,
        "native pipeline stepped in process, caches emptied before each call": (
            cold_ns / COLD_CALLS / 1000
        ),
    }


def main() -> None:
    require_tools()
    static_port, proxy_port = free_port(), free_port()
    static = f"http://127.0.0.1:{static_port}/"
    with tempfile.TemporaryDirectory() as directory, nginx(static_port, proxy_port):
        setup = big_world(Path(directory), static)
        rounds = [
            {
                **uvloop.run(_round(setup.database_url, static, setup.key)),
                **_native_round(setup.database_url, setup.key),
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
                "hot_path": hot_path.state.value,
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
        f"{when}. {CALLS} calls per figure, {IN_FLIGHT} in flight, uvloop, the whole registry "
        f"loaded; medians of {len(rounds)} rounds (lowest to highest in brackets). No server in "
        "front: this is the worker's event-loop thread without the HTTP server's share. The "
        f"native rows: one call at a time; emptied caches: {COLD_CALLS} calls, each after "
        f"{len(_EVICTING) >> 20} MiB written. "
        f"Hot path: {hot_path.state.value}.",
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
