"""Where a router worker's CPU goes, in process: the HTTP client, the pipeline, and both.

The router benchmark shows that a worker is limited by its event-loop thread. This one splits
that thread's work without any server in front, in the router's own process set-up (the whole
registry, a domain-restricted key with credits), with 64 calls in flight as under load:

- the HTTP client alone, POSTing to the static upstream (what any Python forwarder pays);
- the pipeline with an upstream client that answers at once (key, domain, credits, validation,
  routing, answer check, billing, metering: the pipeline's own CPU);
- the pipeline with the real client against the static upstream (both, interleaved as in a
  loaded router).

Figures are CPU microseconds per call (`time.process_time`), medians of BENCH_ROUNDS rounds.
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
from chainrouter.router.runtime import RouterRuntime, build_runtime
from chainrouter.router.service import RpcService
from chainrouter.router.upstream import UpstreamReply
from chainrouter.settings import load_settings
from chainrouter.stores.sql.engine import create_database_engine

CALLS = int(os.environ.get("BENCH_PIPELINE_CALLS", "40000"))
IN_FLIGHT = 64
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


def main() -> None:
    require_tools()
    static_port, proxy_port = free_port(), free_port()
    static = f"http://127.0.0.1:{static_port}/"
    with tempfile.TemporaryDirectory() as directory, nginx(static_port, proxy_port):
        setup = big_world(Path(directory), static)
        rounds = [uvloop.run(_round(setup.database_url, static, setup.key)) for _ in range(ROUNDS)]
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
        "front: this is the worker's event-loop thread without the HTTP server's share. "
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
