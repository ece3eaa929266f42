"""The fault table: how the router answers when some of a chain's nodes misbehave.

Three providers (cheap, mid, dear: economy tries them in that order) each have one node on the
fault-injecting upstream (`chainrouter.testing.faulty_upstream`, a process of its own). For each
row, one or two of the three (the cheapest first) misbehave in one way, on every call or on 30 %
of them (`/some/30/...`), and a router (`chainrouter serve --role rpc`, native executor, one
worker, a fresh database) gets REQUESTS calls from CONCURRENCY clients at once, half
`eth_blockNumber` and half `eth_chainId`. A call succeeds when it is answered 200 with the right
result (`eth_chainId` must name the chain: a node of another chain fails it). The healthy row
runs first; each row's p99 is compared with it. The hang rows run again with hedging off
(`CHAINROUTER_HEDGE_MAX=0`) to show what hedging does.

Every row starts its router afresh and counts every call from its first: nothing is warmed up,
so what the router learns about its nodes at the start (their latency, that one hangs) is in the
numbers (the clients' own connections to the router are opened before, with `/health`, which
asks no node). The table is run ROUNDS times (BENCH_FAULT_ROUNDS, 3 by default), every row once per
round: a row's p99 is the median of its rounds, and its ratio to the healthy p99 the median of
the ratios within each round, so that a slow spell of this shared machine counts against the
rows of that round alike. The healthy row runs three times a round (start, middle, end) and
the round's healthy figures are the medians of the three: one row lasts a tenth of a second, and
a single healthy run is too small a sample of the machine's state to divide every row by.
Results: bench/results/faults.{json,md}.
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
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import httpx

from bench.host import HostState, probe
from bench.upstreams import free_port
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import CHAIN_ID, OK_RESULT

REQUESTS = int(os.environ.get("BENCH_FAULT_REQUESTS", "1500"))
ONLY = os.environ.get("BENCH_FAULT_ROWS", "")  # rows whose name contains this, and healthy
ROUNDS = int(os.environ.get("BENCH_FAULT_ROUNDS", "3"))
CONCURRENCY = 16
SHARE = 30  # percent of calls a "30 %" row's nodes misbehave on
RESULTS = Path(__file__).parent / "results"

MODES = {  # name: the upstream path of a node misbehaving that way
    "5xx": "status/503",
    "429": "status/429",
    "hang": "hang",
    "slow body": "drip/20",  # one byte every 20 ms: about a second for an answer
    "truncated JSON": "cut-json",
    "wrong id": "wrong-id",
    "reset": "reset",
    "wrong chain": "chain/1",
}
EXPECTED = {"eth_blockNumber": OK_RESULT, "eth_chainId": hex(CHAIN_ID)}


@dataclass(frozen=True, slots=True)
class Row:
    mode: str
    faulty: int  # how many of the three nodes misbehave
    always: bool  # on every call, or on SHARE % of them
    hedging: bool = True

    @property
    def name(self) -> str:
        if self.mode == "healthy":
            return "healthy"
        share = "always" if self.always else f"{SHARE} %"
        hedged = "" if self.hedging else ", hedging off"
        return f"{self.mode}, {self.faulty} of 3, {share}{hedged}"

    def paths(self, tag: str) -> list[str]:
        inner = MODES.get(self.mode, "ok")
        bad = inner if self.always else f"some/{SHARE}/{inner}"
        return [f"/{bad if i < self.faulty else 'ok'}/{tag}/n{i}" for i in range(3)]


@dataclass(slots=True)
class Outcome:
    row: str
    calls: int
    succeeded: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    seconds: float
    warm_p99_ms: float  # leaving out the first CONCURRENCY calls: the router's own cold start
    p99_to_healthy: float = 0.0
    warm_p99_to_healthy: float = 0.0

    @property
    def success_pct(self) -> float:
        return 100 * self.succeeded / self.calls


def rows() -> list[Row]:
    table = [Row("healthy", 0, True)]
    for mode in MODES:
        for faulty in (1, 2):
            for always in (True, False):
                table.append(Row(mode, faulty, always))
    for faulty in (1, 2):
        for always in (True, False):
            table.append(Row("hang", faulty, always, hedging=False))
    return table


@contextmanager
def faulty_upstream() -> Iterator[int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "chainrouter.testing.faulty_upstream"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield int(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(10)


def _world(directory: Path, upstream_port: int, paths: list[str]) -> tuple[str, str]:
    database_url = f"sqlite:///{directory / 'faults.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    methods = ["eth_blockNumber", "eth_chainId"]
    providers = [
        {
            "slug": slug,
            "name": slug.title(),
            "plans": [
                {
                    "name": f"{slug}-plan",
                    "methods": [{"method": m, "cost": cost} for m in methods],
                    "nodes": [
                        {"url": f"http://127.0.0.1:{upstream_port}{path}", "chain_id": CHAIN_ID}
                    ],
                }
            ],
        }
        for slug, cost, path in zip(
            ("cheap", "mid", "dear"), ("0.000001", "0.000002", "0.000003"), paths, strict=True
        )
    ]
    key = generate_secret(SecretKind.API_KEY)
    config = {
        "version": 1,
        "chains": [
            {
                "chain_id": CHAIN_ID,
                "name": "Fault table",
                "short_name": "faults",
                "native_currency": {"name": "Ether", "symbol": "ETH"},
            }
        ],
        "providers": providers,
        "customers": [
            {
                "email": "faults@example.com",
                "name": "Faults",
                "credits": [{"reference": "bench", "amount": "1000"}],
                "api_keys": [{"name": "bench", "secret": key, "allowed_domains": ["*"]}],
            }
        ],
    }
    apply_config(engine, validate_document(config))
    engine.dispose()
    return database_url, key


@contextmanager
def router(directory: Path, database_url: str, hedging: bool) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_RPC_PORT": str(port),
        "CHAINROUTER_RPC_WORKERS": "1",
        "CHAINROUTER_LOG_LEVEL": "error",
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its nodes are on loopback
        "CHAINROUTER_USAGE_JOURNAL_DIR": str(directory / "journal"),
        # The same calls over and over: coalesced, fewer would reach the faulty nodes.
        "CHAINROUTER_COALESCE": "false",
        "CHAINROUTER_CACHE_MAX_BYTES": "0",
    }
    if not hedging:
        env["CHAINROUTER_HEDGE_MAX"] = "0"
    process = subprocess.Popen(
        [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"], env=env
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # ready: its first health checks have found a healthy node
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the router did not become ready")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/rpc/{CHAIN_ID}"
    finally:
        process.terminate()
        process.wait(30)


async def _load(url: str) -> tuple[list[float], int, float]:
    """Latencies (ms) of REQUESTS calls from CONCURRENCY clients, and how many succeeded."""
    latencies: list[float] = [0.0] * REQUESTS  # by call number, the order the calls were sent
    succeeded = 0
    next_call = 0
    timeout = aiohttp.ClientTimeout(total=120)

    async def client(session: aiohttp.ClientSession) -> None:
        nonlocal succeeded, next_call
        while next_call < REQUESTS:
            number = next_call
            next_call += 1
            method = "eth_chainId" if number % 2 else "eth_blockNumber"
            body = {"jsonrpc": "2.0", "id": number, "method": method, "params": []}
            started = time.perf_counter()
            try:
                async with session.post(url, json=body) as response:
                    answer = await response.read()
                    ok = response.status == 200
            except aiohttp.ClientError:
                ok, answer = False, b""
            latencies[number] = (time.perf_counter() - started) * 1000
            if ok:
                try:
                    ok = json.loads(answer).get("result") == EXPECTED[method]
                except ValueError:
                    ok = False
            succeeded += ok

    async def connect(session: aiohttp.ClientSession) -> None:
        async with session.get(health) as response:
            await response.read()

    # The clients' own connections are opened first, with /health (no node is asked): what a
    # client's TCP handshake costs is not the router's doing.
    health = url.split("/rpc/", 1)[0] + "/health"
    connector = aiohttp.TCPConnector(limit=CONCURRENCY)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        await asyncio.gather(*(connect(session) for _ in range(CONCURRENCY)))
        began = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(CONCURRENCY)))
    return latencies, succeeded, time.perf_counter() - began


def run_row(row: Row, upstream_port: int, tag: str) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="faults-") as temp:
        directory = Path(temp)
        database_url, key = _world(directory, upstream_port, row.paths(tag))
        with router(directory, database_url, row.hedging) as base:
            latencies, succeeded, seconds = asyncio.run(_load(f"{base}/{key}"))
    ordered, warm = sorted(latencies), sorted(latencies[CONCURRENCY:])
    return Outcome(
        row=row.name,
        calls=len(latencies),
        succeeded=succeeded,
        p50_ms=statistics.median(ordered),
        p99_ms=_p99(ordered),
        max_ms=ordered[-1],
        seconds=seconds,
        warm_p99_ms=_p99(warm),
    )


def _p99(ordered: list[float]) -> float:
    return ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)]


def main() -> None:
    host = probe()
    chosen = [
        row for number, row in enumerate(rows()) if not ONLY or not number or ONLY in row.name
    ]
    rounds: list[list[Outcome]] = []
    with faulty_upstream() as port:
        for round_number in range(ROUNDS):
            faulty = chosen[1:]
            # The healthy row runs at the start, in the middle and at the end of the round, and
            # the round's baseline is their median: one run of 0.1 s is one sample of a machine
            # whose load changes from one second to the next.
            order = [chosen[0], *faulty[: len(faulty) // 2], chosen[0]]
            order += [*faulty[len(faulty) // 2 :], chosen[0]]
            healthy: list[Outcome] = []
            outcomes: list[Outcome] = []
            for number, row in enumerate(order):
                outcome = run_row(row, port, f"r{round_number}-{number}")
                (healthy if row is chosen[0] else outcomes).append(outcome)
                print(
                    f"{round_number + 1}/{ROUNDS} {outcome.row:<40} "
                    f"{outcome.success_pct:6.1f} %  p50 {outcome.p50_ms:7.2f} ms"
                    f"  p99 {outcome.p99_ms:8.2f} ms",
                    flush=True,
                )
            baseline = _median_of(healthy)
            outcomes.insert(0, baseline)
            for outcome in outcomes:
                outcome.p99_to_healthy = outcome.p99_ms / baseline.p99_ms
                outcome.warm_p99_to_healthy = outcome.warm_p99_ms / baseline.warm_p99_ms
            rounds.append(outcomes)
    _write([_median_of(list(each)) for each in zip(*rounds, strict=True)], host)


def _median_of(outcomes: list[Outcome]) -> Outcome:
    """One row over its rounds: every call counted, medians of the rest, the worst maximum."""
    return Outcome(
        row=outcomes[0].row,
        calls=sum(o.calls for o in outcomes),
        succeeded=sum(o.succeeded for o in outcomes),
        p50_ms=statistics.median(o.p50_ms for o in outcomes),
        p99_ms=statistics.median(o.p99_ms for o in outcomes),
        max_ms=max(o.max_ms for o in outcomes),
        seconds=statistics.median(o.seconds for o in outcomes),
        warm_p99_ms=statistics.median(o.warm_p99_ms for o in outcomes),
        p99_to_healthy=statistics.median(o.p99_to_healthy for o in outcomes),
        warm_p99_to_healthy=statistics.median(o.warm_p99_to_healthy for o in outcomes),
    )


def _write(outcomes: list[Outcome], host: HostState) -> None:
    RESULTS.mkdir(exist_ok=True)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    hedged = [o for o in outcomes[1:] if "hedging off" not in o.row]
    met = [o for o in hedged if o.success_pct == 100 and o.p99_to_healthy <= 1.5]
    met_warm = [o for o in hedged if o.success_pct == 100 and o.warm_p99_to_healthy <= 1.5]
    data = {
        "when": when,
        "host": asdict(host),
        "requests": REQUESTS,
        "concurrency": CONCURRENCY,
        "rounds": ROUNDS,
        "rows": [asdict(o) | {"success_pct": o.success_pct} for o in outcomes],
    }
    (RESULTS / "faults.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# Fault table",
        "",
        f"Run {when} by `python -m bench.faults` (`make bench`); how it is made: the module's "
        "docstring. Three nodes, economy order cheap, mid, dear; the faulty ones are the "
        f"cheapest; {REQUESTS} calls from {CONCURRENCY} clients at once per row and round, "
        f"nothing warmed up in the router; {ROUNDS} rounds, the healthy row three times in "
        "each (at its start, middle and end; the round's healthy figures are their medians) "
        "(success over all of them; p50, p99, seconds: medians; the ratios: the median of "
        "each round's ratio to that round's healthy figure; max: the worst). Machine state: "
        f"{host.describe()}.",
        "",
        f"Target: 100 % success and p99 within 1.5x the healthy row's, with hedging on. Over "
        f"all calls, {len(met)} of {len(hedged)} rows meet it. The first {CONCURRENCY} calls "
        "reach a router that has just started, all at once: they open its connections to the "
        "nodes, and only the health checks of its first round are known (a node whose first "
        "check has not come back, a hung one, is tried after the others); at "
        f"{REQUESTS} calls they are more than 1 % and so are the p99 of every row, the healthy "
        'one too. Leaving them out ("warm"), '
        f"{len(met_warm)} of {len(hedged)} rows meet it.",
        "",
        "| row | success | p50 ms | p99 ms | p99 / healthy | warm p99 ms | warm p99 / healthy "
        "| max ms | seconds per round |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for o in outcomes:
        lines.append(
            f"| {o.row} | {o.success_pct:.1f} % | {o.p50_ms:.2f} | {o.p99_ms:.2f} "
            f"| {o.p99_to_healthy:.2f}x | {o.warm_p99_ms:.2f} | {o.warm_p99_to_healthy:.2f}x "
            f"| {o.max_ms:.0f} | {o.seconds:.1f} |"
        )
    (RESULTS / "faults.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
