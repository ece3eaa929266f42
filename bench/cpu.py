"""CPU time that processes spend while a load runs, read from /proc.

Requests per second on this shared 2-core machine move with whatever else runs; the CPU time a
server spends per request moves much less, and it shows where the limit is: a Python worker
whose event-loop thread is busy all the time cannot go faster, whatever the load generator does.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class CpuUse:
    """CPU seconds over one measured run, of all threads and of the busiest one."""

    wall_s: float
    total_s: float
    busiest_thread_s: float

    def per_request_us(self, requests_per_s: float) -> tuple[float, float]:
        """(all threads, busiest thread) in microseconds per request."""
        requests = requests_per_s * self.wall_s
        return self.total_s / requests * 1e6, self.busiest_thread_s / requests * 1e6


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it (granian and nginx run their workers as children)."""
    found = [pid]
    children = subprocess.run(
        ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
    ).stdout.split()
    for child in children:
        found += process_tree(int(child))
    return found


def pin(pids: list[int], cpus: set[int]) -> None:
    """Keep every thread of `pids` on `cpus`; threads they start later inherit it."""
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                os.sched_setaffinity(int(task.name), cpus)
            except ProcessLookupError:  # the thread ended meanwhile
                continue


def thread_ticks(pids: list[int]) -> dict[int, int]:
    """User plus system clock ticks of every thread of `pids`, by thread id."""
    ticks: dict[int, int] = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
            ticks[int(task.name)] = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks


def cpu_use(before: dict[int, int], after: dict[int, int], wall_s: float) -> CpuUse:
    spent = [ticks - before.get(tid, 0) for tid, ticks in after.items()]
    return CpuUse(
        wall_s=wall_s,
        total_s=sum(spent) * _TICK_S,
        busiest_thread_s=max(spent, default=0) * _TICK_S,
    )


def rss_mb(pid: int) -> float:
    """A process's resident memory now, MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")
