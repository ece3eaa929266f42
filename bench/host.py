"""How fast this shared machine is right now, told apart from how fast our code is.

Two short probes in a fresh interpreter: the time of one turn of a plain Python arithmetic loop
(the processor as the interpreter sees it) and of one lookup, in random order, in a dict far
larger than any cache (memory latency, the cost of a cache and TLB miss). The benchmarks record
them at the start and the end of a run. Within one hour of 2026-11-23 the loop turn took 92
to 155 ns and the lookup 690 to 980 ns on this machine; the Python servers then kept a quarter to
a half of the throughput they had had in a run earlier that day, nginx a half to 0.85 of its own.
A run's ratios are read with these beside them. `python -m bench.host` prints one probe as JSON.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from dataclasses import dataclass

_LOOP_TURNS = 2_000_000
_ENTRIES = 2_000_000  # about 200 MB of entries and strings: no cache holds them


@dataclass(frozen=True, slots=True)
class HostState:
    python_loop_ns: float
    random_lookup_ns: float

    def describe(self) -> str:
        return (
            f"a Python loop turn {self.python_loop_ns:.0f} ns, a random lookup in a "
            f"2-million-entry dict {self.random_lookup_ns:.0f} ns"
        )


def measure_here() -> HostState:
    started = time.perf_counter()
    total = 0
    for i in range(_LOOP_TURNS):
        total += i * i
    loop_ns = (time.perf_counter() - started) / _LOOP_TURNS * 1e9
    table = {i: str(i) for i in range(_ENTRIES)}
    order = list(table)
    random.Random(7).shuffle(order)
    started = time.perf_counter()
    for key in order:
        total += len(table[key])
    lookup_ns = (time.perf_counter() - started) / _ENTRIES * 1e9
    return HostState(round(loop_ns, 1), round(lookup_ns, 1))


def probe() -> HostState:
    """One measurement in a child interpreter, away from the caller's heap."""
    found = subprocess.run(
        [sys.executable, "-m", "bench.host"], capture_output=True, text=True, check=True
    )
    return HostState(**json.loads(found.stdout))


if __name__ == "__main__":
    state = measure_here()
    print(
        json.dumps(
            {"python_loop_ns": state.python_loop_ns, "random_lookup_ns": state.random_lookup_ns}
        )
    )
