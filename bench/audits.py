"""What audits cost the pipeline (docs/integrity.md, "Audits"): CPU per call with audits off and
at the default 1 %, in the same run: the ways in turn, 500 calls each, so that they share the
machine's load alike.

In process, as bench/pipeline.py steps it: the router's own set-up (the whole registry, a key
with credits), one call at a time, every node answering at once with the static answer. The call
is one audits compare: `eth_getBalance` pinned to block 1, final (each node of the chain has
told a head of 1,000). With audits on, the auditor's own work, asking the sampled calls again
(each referee answering at once, and agreeing), is stepped in the same measured time: the figure
is everything the 1 % costs the worker, the sampling of every call and the audits themselves.
Also counted: the node calls per 1,000 client calls.

Figures are CPU microseconds per call (the thread's time), medians of BENCH_ROUNDS rounds.
Results: bench/results/audits.{json,md}.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.rounds import ROUNDS
from bench.router import CHAIN, ORIGIN, RESULTS, big_world
from bench.upstreams import STATIC_BODY
from chainrouter.router.contract import Forward, HttpRequest, Program, Race, Wait
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.http_face import RouterFace
from chainrouter.router.runtime import RouterRuntime, build_runtime
from chainrouter.settings import load_settings
from chainrouter.stores.sql.engine import create_database_engine

CALLS = int(os.environ.get("BENCH_AUDITS_CALLS", "20000"))
BODY = (
    b'{"jsonrpc":"2.0","method":"eth_getBalance",'
    b'"params":["0x00000000000000000000000000000000000000aa","0x1"],"id":1}'
)
_ANSWER = STATIC_BODY.encode()
PRICES = {"eth_getBalance": "0.0000003", "eth_blockNumber": "0.0000003"}


class _Stepper:
    """Steps programs as an executor would, each node answering at once; counts node calls."""

    def __init__(self) -> None:
        self.forwards = 0

    def drive(self, program: Program) -> Any:
        value: Any = None
        while True:
            try:
                command = program.send(value)
            except StopIteration as done:
                return done.value
            if isinstance(command, Forward):
                self.forwards += 1
                value = _ANSWER
            elif isinstance(command, Race):
                value = (0, self.drive(command.programs[0]))
                for later in command.programs[1:]:
                    later.close()
            elif isinstance(command, Wait):
                value = None
            else:
                raise RuntimeError(f"the pipeline awaited {command!r}")


def _runtime(database_url: str, rate: float) -> RouterRuntime:
    journal_dir = tempfile.mkdtemp(prefix="bench-usage-journal-")
    # No response cache, no coalescing: the call, final, would be a cache hit from the second on,
    # and a hit is no node's answer to audit.
    settings = load_settings(
        database_url=database_url,
        usage_journal_dir=journal_dir,
        audit_rate=rate,
        audit_watched_rate=rate,  # its nodes are registered in the run: young, but not watched
        cache_max_bytes=0,
        coalesce=False,
    )
    runtime = build_runtime(settings, create_database_engine(settings.database_url))
    for node in runtime.current_nodes():
        if node.chain_id == CHAIN:
            runtime.health.record_head(node, 1000)  # block 1 final: its answers compared
    return runtime


class _Mode:
    """One router set up for one way of running: its face, its stepper, what it has spent."""

    def __init__(self, database_url: str, key: str, rate: float, *, record: bool) -> None:
        self.runtime = _runtime(database_url, rate)
        if not record:  # what the record of answers since a clean audit costs (router/cordon.py)
            self.runtime.ledger.cordons = None
        executor = PythonExecutor(
            self.runtime.limiter, max_response_bytes=1 << 20, connect_timeout_s=5
        )
        self.face: RouterFace = self.runtime.face([], executor)  # its programs stepped here
        self.request = HttpRequest(
            "POST",
            f"/rpc/{CHAIN}/{key}",
            ORIGIN["Origin"],
            None,
            None,
            "application/json",
            "127.0.0.1",
            BODY,
        )
        self.stepper = _Stepper()
        self.seconds = 0.0
        self.calls = 0
        self.block(500)  # warm
        self.seconds, self.calls, self.stepper.forwards = 0.0, 0, 0
        auditor = self.runtime.auditor
        self.audited_before = 0 if auditor is None else auditor.audited

    def block(self, calls: int) -> None:
        """`calls` calls, and the audits of the calls sampled, in the measured time."""
        face, request, stepper, auditor = (
            self.face,
            self.request,
            self.stepper,
            self.runtime.auditor,
        )
        started = time.thread_time()
        for _ in range(calls):
            answer = stepper.drive(face.respond(request))
            if answer.status != 200:
                raise RuntimeError(f"the router answered {answer.status}: {answer.body!r}")
        if auditor is not None:
            stepper.drive(auditor.drain())
        self.seconds += time.thread_time() - started
        self.calls += calls

    def figures(self) -> dict[str, float]:
        auditor = self.runtime.auditor
        audited = 0 if auditor is None else auditor.audited - self.audited_before
        self.runtime.engine.dispose()
        return {
            "us": self.seconds / self.calls * 1e6,
            "node_calls_per_1000": self.stepper.forwards / self.calls * 1000,
            "audits": audited,
        }


_BLOCK = 500  # calls of one way before the next way's: the ways share the machine's load alike


def _round(database_url: str, key: str) -> dict[str, dict[str, float]]:
    modes = {
        "bare": _Mode(database_url, key, 0.0, record=False),
        "off": _Mode(database_url, key, 0.0, record=True),
        "on": _Mode(database_url, key, 0.01, record=True),
    }
    for _ in range(CALLS // _BLOCK):
        for mode in modes.values():
            mode.block(_BLOCK)
    return {name: mode.figures() for name, mode in modes.items()}


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        setup = big_world(Path(directory), "http://127.0.0.1:9/", PRICES)
        rounds = [_round(setup.database_url, setup.key) for _ in range(ROUNDS)]
    medians = {
        side: {what: statistics.median(r[side][what] for r in rounds) for what in rounds[0][side]}
        for side in ("bare", "off", "on")
    }
    when = datetime.now(UTC).isoformat(timespec="seconds")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "audits.json").write_text(
        json.dumps({"when": when, "calls": CALLS, "rounds": rounds, "median": medians}, indent=2)
        + "\n"
    )
    off, on = medians["off"], medians["on"]
    cost = on["us"] - off["us"]
    lines = [
        "# Audits: what 1 % costs the pipeline",
        "",
        f"{when}. {CALLS} calls per figure (`eth_getBalance` at a final block, a call audits "
        f"compare), the whole registry loaded, no response cache nor coalescing (each call a "
        "node's), stepped in process, every node answering at once; "
        f"medians of {len(rounds)} rounds, each way in turn, {_BLOCK} calls at a time, in the "
        "same run (lowest to highest in brackets). With audits on, the audits of the sampled calls "
        "(their referees asked, agreeing) are stepped in the measured time.",
        "",
        "| audits | CPU µs per call | node calls per 1,000 calls | audits |",
        "|---|---|---|---|",
    ]
    sides = (
        ("bare", "off, and no record of answers for disputes"),
        ("off", "off (answers recorded for disputes: a failed proof cordons too)"),
        ("on", "1 %"),
    )
    for side, name in sides:
        values = [r[side]["us"] for r in rounds]
        lines.append(
            f"| {name} | {medians[side]['us']:.1f} ({min(values):.1f} to {max(values):.1f}) | "
            f"{medians[side]['node_calls_per_1000']:.0f} | {medians[side]['audits']:.0f} |"
        )
    lines += [
        "",
        f"1 % audits cost {cost:+.1f} µs per call ({cost / off['us'] * 100:+.1f} %) and "
        f"{on['node_calls_per_1000'] - off['node_calls_per_1000']:.0f} node calls per 1,000 "
        "(one referee per audit when it agrees; up to `AUDIT_REFEREES` on a disagreement). "
        f"The record of each node's answers since its last clean audit costs "
        f"{off['us'] - medians['bare']['us']:+.1f} µs per call, audits on or off.",
    ]
    (RESULTS / "audits.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
