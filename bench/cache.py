"""The response cache and coalescing (docs/cache.md): what a hit costs, what it saves, and how
many calls still reach a node.

One go, on one machine:

1. **Hits against nginx.** The static nginx upstream and nginx `proxy_pass` in front of it (the
   baseline), and `chainrouter serve --role rpc` (native executor, one worker) whose only node of
   chain 1 is that upstream. The router answers a call about a final block (`eth_getBlockByNumber`
   of block 1; the upstream's head is 0x10d4f) from its cache: the same call, and a batch of ten
   such calls, loaded in interleaved rounds against nginx proxying the same bodies. The router
   gives a repeated free hit again without the pipeline (a replay, docs/cache.md); a second
   router with replays off answers the same hits through the pipeline (what replays save), and a
   third with the cache and coalescing off forwards the same single call to the node (what a
   hit saves). Full load (64 connections) and one connection (the added latency, nothing queued).
2. **A repeated-read workload** against a real node (anvil, 3,200 blocks, relayed by the
   fault-injecting upstream, which counts what reaches it): an indexer reads blocks 1 to 2,000
   with their receipts, twice; then 10,000 calls of which 90 % repeat a read of those blocks and
   10 % read a block not read before. Node calls per 1,000 client calls in each phase; the
   router's resident memory and the bytes its cache holds, against the configured bound.
3. **1,000 identical calls at once** on a node that takes 200 ms to answer, on each executor:
   how many reach the node.

Results: bench/results/cache.{json,md}; docs/benchmarks.md summarises them.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench import worlds
from bench.cpu import rss_mb
from bench.host import probe
from bench.rounds import CONNECTIONS, DURATION_S, ROUNDS, WARM_UP_S
from bench.upstreams import STATIC_BODY, anvil, free_port, nginx, require_tools, wait_until_ready
from bench.wrk import WrkResult, run_wrk
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# The static upstream answers every call at its root with 0x10d4f: as a node of chain 0x10d4f its
# chain ID is right, its head is block 68,943, and every block below 68,815 is final to the
# router (128 blocks deep: it does not answer the `finalized` tag with a block).
CHAIN = 0x10D4F
ANVIL_CHAIN = 31337
CACHE_BYTES = 64 << 20  # the default bound
SMALL_BOUND = 4 << 20  # a bound the memory test fills
INDEXED = 2_000  # blocks the indexer reads
MINED = 3_200  # anvil's head: blocks up to 3,136 are final
MIX_CALLS = 10_000
IDENTICAL = 1_000
SLOW_MS = 1000  # longer than a Python client takes to send 1,000 requests


def _call(method: str, params: list[Any], call_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}


HIT = json.dumps(_call("eth_getBlockByNumber", ["0x1", False]), separators=(",", ":"))
BATCH = json.dumps(
    [_call("eth_getBlockByNumber", [hex(n), False], n) for n in range(1, 11)],
    separators=(",", ":"),
)


@contextmanager
def _router(
    directory: Path, node_url: str, chain_id: int, executor: str = "native", **settings: str
) -> Iterator[tuple[str, int]]:
    """A served router over one node: its RPC URL and its process id."""
    key = generate_secret(SecretKind.API_KEY)
    work = Path(tempfile.mkdtemp(dir=directory))
    database_url = f"sqlite:///{work / 'cache-bench.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    methods = ["eth_getBlockByNumber", "eth_getBlockReceipts", "eth_blockNumber", "eth_chainId"]
    priced = [{"method": method, "cost": "0.000001"} for method in methods]
    world = worlds.world(
        chain_id, {"bench": worlds.plan("bench", priced, [node_url], chain_id)}, key
    )
    apply_config(engine, validate_document(world))
    engine.dispose()
    port = free_port()
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_RPC_PORT": str(port),
        "CHAINROUTER_LOG_LEVEL": "warning",
        "CHAINROUTER_RPC_SERVER": executor,
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its node is on loopback
        "CHAINROUTER_USAGE_JOURNAL_DIR": str(work / "journal"),
        # One health check at the start (heads, finality), none while the node calls are counted.
        "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",
        "CHAINROUTER_MAX_CONNECTIONS": "4096",
        "CHAINROUTER_CACHE_MAX_BYTES": str(CACHE_BYTES),
        # One provider: with answers proven or agreed first (the default), nothing would be kept.
        # This measures the cache; what proofs cost: bench/verification.py.
        "CHAINROUTER_VERIFY": "off",
        **settings,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"], env=env, cwd=work
    )
    url = f"http://127.0.0.1:{port}/rpc/{chain_id}/{key}"
    try:
        wait_until_ready(f"http://127.0.0.1:{port}")
        yield url, process.pid
    finally:
        process.terminate()
        process.wait(30)


_JSON = {"content-type": "application/json"}
_LOOPBACK = '["127.0.0.0/8"]'  # may read /metrics


def _until_cached(url: str, call: dict[str, Any]) -> None:
    """Ask until the router answers `call` from its cache: its first health check (heads and the
    finalized block) may still be out."""
    deadline = time.monotonic() + 60
    while True:
        answer = httpx.post(url, json=call, timeout=10)
        if answer.headers.get("x-cache") == "HIT":
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"never cached: {answer.status_code} {answer.text[:200]}")
        time.sleep(0.2)


def _cache_bytes(url: str) -> int:
    return _metric_sum(url, "chainrouter_cache_bytes")


def _metric_sum(url: str, name: str) -> int:
    """The sum of a series of the router's /metrics over its labels."""
    base = url.split("/rpc/")[0]
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return sum(
        int(float(line.rsplit(" ", 1)[1]))
        for line in text.splitlines()
        if line.startswith(name + "{")
    )


def _until_answered(url: str) -> None:
    """Ask until the router answers (its first health check done)."""
    deadline = time.monotonic() + 60
    while httpx.post(url, json=_call("eth_blockNumber", []), timeout=10).status_code != 200:
        if time.monotonic() > deadline:
            raise RuntimeError("the router never answered")
        time.sleep(0.2)


# -- 1. hits against nginx ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HitRow:
    requests_per_s: float
    calls_per_s: float
    vs_nginx: float  # median of the per-round ratios to nginx with the same body
    vs_nginx_low: float
    vs_nginx_high: float
    p50_ms: float
    p99_ms: float
    one_connection_p50_ms: float
    one_connection_p99_ms: float
    errors: int


def _load(url: str, body: str, connections: int) -> WrkResult:
    run_wrk(url, body, connections=connections, duration_s=WARM_UP_S)
    return run_wrk(url, body, connections=connections, duration_s=DURATION_S)


def _hits(directory: Path) -> dict[str, HitRow]:
    static_port, proxy_port = free_port(), free_port()
    node = f"http://127.0.0.1:{static_port}/node"
    proxy = f"http://127.0.0.1:{proxy_port}/node"
    with (
        nginx(static_port, proxy_port),
        _router(directory, node, CHAIN, CHAINROUTER_METRICS_NETWORKS=_LOOPBACK) as (cached, _),
        _router(directory, node, CHAIN, CHAINROUTER_CACHE_REPLAY_MAX_BYTES="0") as (piped, _),
        _router(
            directory, node, CHAIN, CHAINROUTER_CACHE_MAX_BYTES="0", CHAINROUTER_COALESCE="false"
        ) as (uncached, _),
    ):
        # The upstream answers under id 1 only: each block is read once under it, and the
        # batch's items (ids 1 to 10) are then all answered from the cache.
        for router in (cached, piped):
            for block in range(1, 11):
                _until_cached(router, _call("eth_getBlockByNumber", [hex(block), False]))
            batch = httpx.post(router, content=BATCH, headers=_JSON)
            assert batch.headers["x-cache"] == "HIT", batch.text
        for body in (HIT, BATCH):  # spelled as wrk sends it: handed over, then replayed
            httpx.post(cached, content=body, headers=_JSON)
            httpx.post(cached, content=body, headers=_JSON)
        time.sleep(0.1)  # the replays' counts are drained every 20 ms
        replayed = _metric_sum(cached, "chainrouter_cache_replayed_total")
        assert replayed == 1 + 10, f"{replayed} calls replayed, not the 11 sent again"
        targets = {
            "nginx proxy_pass, one call": (proxy, HIT, 1),
            "chainrouter, cache hit, one call": (cached, HIT, 1),
            "chainrouter, cache hit through the pipeline (replays off), one call": (piped, HIT, 1),
            "chainrouter, cache off, one call (to the node)": (uncached, HIT, 1),
            "nginx proxy_pass, batch of 10": (proxy, BATCH, 10),
            "chainrouter, cache hits, batch of 10": (cached, BATCH, 10),
            "chainrouter, cache hits through the pipeline (replays off), batch of 10": (
                piped,
                BATCH,
                10,
            ),
        }
        baseline = {1: "nginx proxy_pass, one call", 10: "nginx proxy_pass, batch of 10"}
        full: list[dict[str, WrkResult]] = []
        single: list[dict[str, WrkResult]] = []
        for _ in range(ROUNDS):
            full.append(
                {name: _load(url, body, CONNECTIONS) for name, (url, body, _) in targets.items()}
            )
            single.append({name: _load(url, body, 1) for name, (url, body, _) in targets.items()})
    rows = {}
    for name, (_, _, calls) in targets.items():
        ratios = [r[name].requests_per_s / r[baseline[calls]].requests_per_s for r in full]
        rate = statistics.median(r[name].requests_per_s for r in full)
        rows[name] = HitRow(
            requests_per_s=rate,
            calls_per_s=rate * calls,
            vs_nginx=statistics.median(ratios),
            vs_nginx_low=min(ratios),
            vs_nginx_high=max(ratios),
            p50_ms=statistics.median(r[name].p50_ms for r in full),
            p99_ms=statistics.median(r[name].p99_ms for r in full),
            one_connection_p50_ms=statistics.median(r[name].p50_ms for r in single),
            one_connection_p99_ms=statistics.median(r[name].p99_ms for r in single),
            errors=sum(r[name].errors for r in full + single),
        )
    return rows


# -- 2. the repeated-read workload --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Phase:
    client_calls: int
    node_calls: int
    seconds: float

    @property
    def node_calls_per_1000(self) -> float:
        return 1000 * self.node_calls / self.client_calls


async def _read_all(url: str, calls: list[dict[str, Any]], concurrency: int = 16) -> None:
    queue = list(reversed(calls))
    async with httpx.AsyncClient(timeout=60) as client:

        async def worker() -> None:
            while queue:
                response = await client.post(url, json=queue.pop())
                response.raise_for_status()
                assert "result" in response.json(), response.text

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def _phase(url: str, upstream: FaultyUpstream, path: str, calls: list[dict[str, Any]]) -> Phase:
    before, started = upstream.requests[path], time.monotonic()
    asyncio.run(_read_all(url, calls))
    return Phase(len(calls), upstream.requests[path] - before, time.monotonic() - started)


def _block_reads(block: int) -> list[dict[str, Any]]:
    return [
        _call("eth_getBlockByNumber", [hex(block), True], block),
        _call("eth_getBlockReceipts", [hex(block)], block),
    ]


@contextmanager
def _indexed_chain() -> Iterator[tuple[str, int]]:
    """An anvil node mined to MINED blocks, a transaction in every tenth of the first INDEXED."""
    with anvil(ANVIL_CHAIN) as (url, port):
        account = httpx.post(url, json=_call("eth_accounts", [])).json()["result"][0]
        for n in range(0, INDEXED, 10):  # a transaction every tenth block: receipts to read
            transfer = {"from": account, "to": account, "value": hex(n + 1)}
            httpx.post(url, json=_call("eth_sendTransaction", [transfer])).raise_for_status()
            httpx.post(url, json=_call("anvil_mine", ["0x9"])).raise_for_status()
        head = int(httpx.post(url, json=_call("eth_blockNumber", [])).json()["result"], 16)
        mine = _call("anvil_mine", [hex(MINED - head)])
        httpx.post(url, json=mine, timeout=300).raise_for_status()
        yield url, port


def _repeated_reads(directory: Path) -> dict[str, Any]:
    rng = random.Random(7)
    with _indexed_chain() as (_, port), FaultyUpstream() as upstream:
        path = f"/relay/{port}/full/indexer"
        with _router(directory, upstream.url(path), ANVIL_CHAIN) as (url, pid):
            _until_cached(url, _call("eth_getBlockByNumber", [hex(MINED - 64), False]))
            rss_start = rss_mb(pid)
            first = [call for block in range(1, INDEXED + 1) for call in _block_reads(block)]
            phases = {"first read": _phase(url, upstream, path, first)}
            phases["second read"] = _phase(url, upstream, path, first)
            # One call in ten is new: a block or its receipts not read before.
            fresh = iter(call for b in range(INDEXED + 1, MINED - 64) for call in _block_reads(b))
            mix = [
                next(fresh)
                if rng.random() < 0.1
                else rng.choice(_block_reads(rng.randint(1, INDEXED)))
                for _ in range(MIX_CALLS)
            ]
            phases["90 % repeated, 10 % new"] = _phase(url, upstream, path, mix)
            held = _cache_bytes(url)
            rss_end = rss_mb(pid)
        bounded = _memory_at_the_bound(directory, upstream, port)
    return {
        "phases": {
            name: {**asdict(p), "node_calls_per_1000": p.node_calls_per_1000}
            for name, p in phases.items()
        },
        "cache_bytes_held": held,
        "cache_bound_bytes": CACHE_BYTES,
        "rss_mb_start": rss_start,
        "rss_mb_end": rss_end,
        "at_the_bound": bounded,
    }


def _memory_at_the_bound(directory: Path, upstream: FaultyUpstream, port: int) -> dict[str, Any]:
    """Every final block read three ways (with and without its transactions, its receipts) by
    a router whose cache is bounded well below what that holds, and by one without a cache: the
    difference in their growth is what the cache costs in memory."""
    calls = [
        call
        for block in range(1, MINED - 63)
        for call in (*_block_reads(block), _call("eth_getBlockByNumber", [hex(block), False]))
    ]
    found: dict[str, Any] = {"bound_bytes": SMALL_BOUND, "calls": len(calls)}
    for name, bound in (("bounded", SMALL_BOUND), ("no cache", 0)):
        path = f"/relay/{port}/full/memory-{bound}"
        with _router(
            directory,
            upstream.url(path),
            ANVIL_CHAIN,
            **{"CHAINROUTER_CACHE_MAX_BYTES": str(bound)},
        ) as (url, pid):
            _until_answered(url)
            before = rss_mb(pid)
            _phase(url, upstream, path, calls)
            found[name] = {"rss_mb_before": before, "rss_mb_after": rss_mb(pid)}
            if bound:
                found[name]["held_bytes"] = _cache_bytes(url)
                found[name]["evictions"] = _metric_sum(url, "chainrouter_cache_evictions_total")
    return found


# -- 3. identical calls at once ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes


async def _identical(url: str) -> tuple[list[Answer], float]:
    """IDENTICAL identical calls sent at once, each on a connection of its own opened before (a
    hundred at a time: the listen backlog holds them), written in one loop so that they arrive
    within a few milliseconds of each other; their answers and the seconds until the last came."""
    address, path = url.removeprefix("http://").split("/", 1)
    host, port = address.split(":")
    streams = []
    for first in range(0, IDENTICAL, 100):
        streams += await asyncio.gather(
            *(asyncio.open_connection(host, int(port)) for _ in range(first, first + 100))
        )
    started = time.monotonic()
    for n, (_, writer) in enumerate(streams):
        body = json.dumps(_call("eth_getBlockByNumber", ["latest", False], n)).encode()
        writer.write(
            f"POST /{path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
    answers = await asyncio.gather(*(_answer(reader) for reader, _ in streams))
    seconds = time.monotonic() - started
    for _, writer in streams:
        writer.close()
    return answers, seconds


async def _answer(reader: asyncio.StreamReader) -> Answer:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    lengths = [
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    if lengths:
        return Answer(status, await reader.readexactly(lengths[0]))
    body = b""  # chunked
    while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
        body += await reader.readexactly(size)
        await reader.readexactly(2)
    await reader.readexactly(2)
    return Answer(status, body)


def _coalescing(directory: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    with anvil(ANVIL_CHAIN) as (_, port), FaultyUpstream() as upstream:
        for executor in ("native", "python"):
            path = f"/relay/{port}/slow/{SLOW_MS}/{executor}"
            with _router(directory, upstream.url(path), ANVIL_CHAIN, executor) as (url, _):
                # The router's first health check (chain ID, head, finalized block) is three
                # slow calls to the node: over before the node's calls are counted.
                time.sleep(4 * SLOW_MS / 1000)
                before = upstream.requests[path]
                replies, seconds = asyncio.run(_identical(url))
                found[executor] = {
                    "client_calls": IDENTICAL,
                    "node_calls": upstream.requests[path] - before,
                    "answered": sum(r.status == 200 for r in replies),
                    "distinct_ids_back": len({json.loads(r.body)["id"] for r in replies}),
                    "seconds": seconds,
                }
    return found


def main() -> None:
    require_tools()
    host = [probe()]
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        hits = _hits(work)
        reads = _repeated_reads(work)
        coalesced = _coalescing(work)
    host.append(probe())
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "rounds": ROUNDS,
        "duration_s": DURATION_S,
        "connections": CONNECTIONS,
        "static_answer": STATIC_BODY,
        "hits": {name: asdict(row) for name, row in hits.items()},
        "repeated_reads": reads,
        "identical_calls": coalesced,
        "host": [asdict(state) for state in host],
    }
    (RESULTS / "cache.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "cache.md").write_text(_markdown(result))
    print((RESULTS / "cache.md").read_text())


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# Response cache and coalescing ({result['when']})",
        "",
        f"{result['rounds']} interleaved rounds of {result['duration_s']} s per target; ratios "
        "are medians of per-round ratios to nginx `proxy_pass` with the same body (low-high).",
        "",
        f"## Hits at full load ({result['connections']} connections) and on one connection",
        "",
        "| target | requests/s | calls/s | vs nginx | p50 ms | p99 ms | 1 conn p50 ms "
        "| 1 conn p99 ms | errors |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in result["hits"].items():
        lines.append(
            f"| {name} | {row['requests_per_s']:,.0f} | {row['calls_per_s']:,.0f} | "
            f"{row['vs_nginx']:.2f}x ({row['vs_nginx_low']:.2f}-{row['vs_nginx_high']:.2f}) | "
            f"{row['p50_ms']:.2f} | {row['p99_ms']:.2f} | {row['one_connection_p50_ms']:.3f} | "
            f"{row['one_connection_p99_ms']:.3f} | {row['errors']} |"
        )
    reads = result["repeated_reads"]
    lines += [
        "",
        f"## Repeated reads: {INDEXED:,} blocks with receipts, twice, then {MIX_CALLS:,} calls "
        "(90 % repeated, 10 % new)",
        "",
        "| phase | client calls | node calls | node calls per 1,000 | seconds |",
        "|---|---|---|---|---|",
    ]
    for name, phase in reads["phases"].items():
        lines.append(
            f"| {name} | {phase['client_calls']:,} | {phase['node_calls']:,} | "
            f"{phase['node_calls_per_1000']:.0f} | {phase['seconds']:.1f} |"
        )
    lines += [
        "",
        f"Cache held {reads['cache_bytes_held'] / 2**20:.1f} MiB of its "
        f"{reads['cache_bound_bytes'] / 2**20:.0f} MiB bound; the router's resident memory went "
        f"from {reads['rss_mb_start']:.0f} to {reads['rss_mb_end']:.0f} MiB.",
        "",
        _bound_line(reads["at_the_bound"]),
        "",
        f"## {IDENTICAL:,} identical calls at once, node answering in {SLOW_MS} ms",
        "",
        "| executor | client calls | node calls | answered | ids back | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for executor, row in result["identical_calls"].items():
        lines.append(
            f"| {executor} | {row['client_calls']:,} | {row['node_calls']} | {row['answered']:,} "
            f"| {row['distinct_ids_back']:,} | {row['seconds']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def _bound_line(found: dict[str, Any]) -> str:
    bounded, bare = found["bounded"], found["no cache"]
    grew = bounded["rss_mb_after"] - bounded["rss_mb_before"]
    grew_bare = bare["rss_mb_after"] - bare["rss_mb_before"]
    return (
        f"**Memory at the bound**: {found['calls']:,} reads of final blocks (with and without "
        f"transactions, receipts) through a router whose cache is bounded at "
        f"{found['bound_bytes'] / 2**20:.0f} MiB: it held {bounded['held_bytes'] / 2**20:.2f} MiB "
        f"after {bounded['evictions']:,} evictions, and its resident memory grew "
        f"{grew:.1f} MiB, against {grew_bare:.1f} MiB for the same reads without a cache: "
        f"{grew - grew_bare:.1f} MiB for the cache."
    )


if __name__ == "__main__":
    main()
