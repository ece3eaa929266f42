"""What proving answers costs (docs/integrity.md, "Verified answers"): node calls, added
latency and the credits billed per call with `CHAINROUTER_VERIFY` off, `cache` and `always`, in
the same run.

A real node (anvil, with a transfer in each of its first blocks and mined past finality) is
served by two providers' nodes: two paths of the fault-injecting upstream, which relay to it and
count what reaches each. One router per setting (native executor, one worker, the response cache
on), each asked the same calls in turn, one at a time (so each latency is the call's own):
- balances of distinct accounts at a final block (each a cache miss: proven under `cache`);
- the same balances again (hits: nothing to prove);
- receipts of distinct transactions (each proven against its block's receipts);
- balances at a block not final yet (never kept: proven only under `always`).
Rounds interleave the settings; each figure is the median over the rounds, and each added
latency the median of the per-round differences against `off`. Every method is priced at
0.000001 credits, so the credits billed count the calls billed: the proofs' calls are billed as
calls (scenario `verification`), read from the router's metrics before and after each workload.

Results: bench/results/verification.{json,md}; docs/benchmarks.md summarises them.
"""

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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.host import probe
from bench.upstreams import anvil, free_port, wait_until_ready
from bench.worlds import plan, world
from chainrouter.domain.credentials import SecretKind, generate_secret
from chainrouter.operator_config.apply import apply_config
from chainrouter.operator_config.load import validate_document
from chainrouter.stores.sql import migrate
from chainrouter.stores.sql.engine import create_database_engine
from chainrouter.testing.faulty_upstream import FaultyUpstream

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"
CHAIN = 31337
MODES = ("off", "cache", "always")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CALLS = 100  # per workload, round and setting
TRANSFERS = 3 * CALLS  # one per block, from block 1
FINALITY_DEPTH = 64
_DIAGNOSIS = ("chainrouter_answers_checked", "chainrouter_upstream_attempts", "chainrouter_node")
METHODS = ("eth_getBalance", "eth_getTransactionReceipt", "eth_blockNumber", "eth_chainId")


def _call(method: str, params: list[Any], call_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}


def _node(url: str, method: str, params: list[Any]) -> Any:
    return httpx.post(url, json=_call(method, params), timeout=60).json()["result"]


def _world(key: str, nodes: list[str]) -> dict[str, Any]:
    methods = [{"method": m, "cost": "0.000001"} for m in METHODS]
    providers = {
        f"provider{n}": plan("bench", methods, [url], CHAIN) for n, url in enumerate(nodes, 1)
    }
    return world(CHAIN, providers, key)


@contextmanager
def _router(directory: Path, nodes: list[str], verify: str) -> Iterator[str]:
    key = generate_secret(SecretKind.API_KEY)
    work = Path(tempfile.mkdtemp(dir=directory))
    database_url = f"sqlite:///{work / 'verify-bench.db'}"
    engine = create_database_engine(database_url)
    migrate.upgrade(engine)
    apply_config(engine, validate_document(_world(key, nodes)))
    engine.dispose()
    port = free_port()
    env = {
        **os.environ,
        "CHAINROUTER_DATABASE_URL": database_url,
        "CHAINROUTER_RPC_PORT": str(port),
        "CHAINROUTER_LOG_LEVEL": "warning",
        "CHAINROUTER_OUTBOUND_ALLOW_PRIVATE": "true",  # its nodes are on loopback
        "CHAINROUTER_USAGE_JOURNAL_DIR": str(work / "journal"),
        "CHAINROUTER_HEALTH_CHECK_INTERVAL_S": "600",  # one check at the start: heads, finality
        "CHAINROUTER_CACHE_MAX_BYTES": str(64 << 20),
        "CHAINROUTER_CACHE_FINALITY_DEPTH": str(FINALITY_DEPTH),
        "CHAINROUTER_VERIFY": verify,
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "chainrouter.cli", "serve", "--role", "rpc"], env=env, cwd=work
    )
    try:
        wait_until_ready(f"http://127.0.0.1:{port}")
        url = f"http://127.0.0.1:{port}/rpc/{CHAIN}/{key}"
        deadline = time.monotonic() + 60
        while httpx.post(url, json=_call("eth_blockNumber", []), timeout=10).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("the router never answered")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(30)


def _workloads(head: int, receipts: list[str], round_no: int) -> dict[str, list[dict[str, Any]]]:
    """Each round its own accounts and transactions, so that a miss is a miss in every round."""
    final = hex(TRANSFERS)  # below head - FINALITY_DEPTH
    recent = hex(head - 1)
    accounts = [f"0x{0xB0000 + round_no * 10_000 + n:040x}" for n in range(CALLS)]
    return {
        "balance at a final block, first read": [
            _call("eth_getBalance", [a, final], n) for n, a in enumerate(accounts)
        ],
        "the same again (cache hits)": [
            _call("eth_getBalance", [a, final], n) for n, a in enumerate(accounts)
        ],
        "receipt, first read": [
            _call("eth_getTransactionReceipt", [h], n)
            for n, h in enumerate(receipts[round_no * CALLS : (round_no + 1) * CALLS])
        ],
        "balance at a block not final": [
            _call("eth_getBalance", [a, recent], n) for n, a in enumerate(accounts)
        ],
    }


def _billed(url: str) -> tuple[float, float]:
    """(calls billed under `verification`, credits billed) so far, from the router's metrics."""
    text = httpx.get(url.split("/rpc/")[0] + "/metrics", timeout=10).text
    checks = credits = 0.0
    for line in text.splitlines():
        if line.startswith("chainrouter_calls_total{") and 'scenario="verification"' in line:
            checks += float(line.rsplit(" ", 1)[1])
        elif line.startswith("chainrouter_credits_billed_total{"):
            credits += float(line.rsplit(" ", 1)[1])
    return checks, credits


def _run(
    url: str, upstream: FaultyUpstream, paths: list[str], calls: list[dict[str, Any]], mode: str
) -> dict[str, float]:
    before = sum(upstream.requests[p] for p in paths)
    checks_before, credits_before = _billed(url)
    times, verified = [], 0
    with httpx.Client(timeout=30) as client:
        for call in calls:
            started = time.perf_counter()
            answer = client.post(url, json=call)
            times.append(time.perf_counter() - started)
            if answer.status_code != 200 or "result" not in answer.json():
                metrics = httpx.get(url.split("/rpc/")[0] + "/metrics", timeout=10).text
                counts = [m for m in metrics.splitlines() if m.startswith(_DIAGNOSIS)]
                raise RuntimeError(
                    f"{mode} {call}: {answer.status_code}: {answer.text[:200]}\n"
                    + "\n".join(counts)
                )
            verified += answer.headers.get("x-verified") is not None
    node_calls = sum(upstream.requests[p] for p in paths) - before
    checks, credits = _billed(url)
    return {
        "node_calls_per_call": node_calls / len(calls),
        "p50_ms": statistics.median(times) * 1000,
        "verified_share": verified / len(calls),
        "checks_billed_per_call": (checks - checks_before) / len(calls),
        "credits_per_call": (credits - credits_before) / len(calls),
    }


def main() -> None:
    host = [probe()]
    rounds: list[dict[str, dict[str, dict[str, float]]]] = []
    with (
        tempfile.TemporaryDirectory() as directory,
        ExitStack() as running,
    ):
        url, port = running.enter_context(anvil(CHAIN))
        sender = _node(url, "eth_accounts", [])[0]
        hashes = []
        for n in range(TRANSFERS):
            transfer = {"from": sender, "to": f"0x{0xC0000 + n:040x}", "value": hex(n + 1)}
            hashes.append(_node(url, "eth_sendTransaction", [transfer]))
        _node(url, "anvil_mine", [hex(2 * FINALITY_DEPTH)])
        head = int(_node(url, "eth_blockNumber", []), 16)
        upstream = running.enter_context(FaultyUpstream())
        paths = [f"/relay/{port}/full/p{n}" for n in (1, 2)]
        nodes = [upstream.url(path) for path in paths]
        routers = {
            mode: running.enter_context(_router(Path(directory), nodes, mode)) for mode in MODES
        }
        for round_no in range(ROUNDS):
            found: dict[str, dict[str, dict[str, float]]] = {}
            for workload, calls in _workloads(head, hashes, round_no).items():
                found[workload] = {
                    mode: _run(router, upstream, paths, calls, mode)
                    for mode, router in routers.items()
                }
            rounds.append(found)
    host.append(probe())
    summary = _summary(rounds)
    result = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "summary": summary}
    result["host"] = [h.describe() for h in host]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "verification.json").write_text(json.dumps({**result, "rounds": rounds}, indent=1))
    (RESULTS / "verification.md").write_text(_markdown(result))
    print((RESULTS / "verification.md").read_text())


def _summary(rounds: list[dict[str, dict[str, dict[str, float]]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for workload in rounds[0]:
        rows = {}
        for mode in MODES:
            per_round = [r[workload][mode] for r in rounds]
            added = [r[workload][mode]["p50_ms"] - r[workload]["off"]["p50_ms"] for r in rounds]
            dearer = [
                r[workload][mode]["credits_per_call"] - r[workload]["off"]["credits_per_call"]
                for r in rounds
            ]
            rows[mode] = {
                "node_calls_per_1000": round(
                    1000 * statistics.median(p["node_calls_per_call"] for p in per_round)
                ),
                "p50_ms": round(statistics.median(p["p50_ms"] for p in per_round), 3),
                "added_p50_ms": round(statistics.median(added), 3),
                "verified_share": round(
                    statistics.median(p["verified_share"] for p in per_round), 3
                ),
                "checks_billed_per_1000": round(
                    1000 * statistics.median(p["checks_billed_per_call"] for p in per_round)
                ),
                "credits_per_1000": round(
                    1000 * statistics.median(p["credits_per_call"] for p in per_round), 6
                ),
                "added_credits_per_1000": round(1000 * statistics.median(dearer), 6),
            }
        summary[workload] = rows
    return summary


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Verified answers: what proofs cost",
        "",
        f"{result['when']}. One anvil node served by two providers' nodes (relays that count "
        f"what reaches them); one native router worker per setting, the response cache on, "
        f"finality {FINALITY_DEPTH} blocks; {CALLS} calls per workload, one at a time, "
        f"{ROUNDS} interleaved rounds, medians; added p50 and credits against `off` in the same "
        f"round. Every method priced at 0.000001 credits; a proof's calls are billed as calls "
        f"(scenario `verification`). Python {sys.version.split()[0]}.",
        "",
        f"The machine at the start: {result['host'][0]}; at the end: {result['host'][-1]}.",
        "",
        "| workload | CHAINROUTER_VERIFY | node calls per 1,000 calls | p50 ms | added p50 ms "
        "| answers with X-Verified | `verification` calls billed per 1,000 calls "
        "| credits billed per 1,000 calls | added credits per 1,000 calls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workload, rows in result["summary"].items():
        for mode, row in rows.items():
            lines.append(
                f"| {workload} | `{mode}` | {row['node_calls_per_1000']} | {row['p50_ms']:.3f} "
                f"| {row['added_p50_ms']:+.3f} | {100 * row['verified_share']:.0f} % "
                f"| {row['checks_billed_per_1000']} | {row['credits_per_1000']:.6f} "
                f"| {row['added_credits_per_1000']:+.6f} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
