"""The router's metrics, for Prometheus (`GET /metrics`; docs/operations.md, "Metrics").

The request path only adds to plain dictionaries here (one look-up and one store per event, no
lock: each worker's requests run on one thread); everything else is read when Prometheus
scrapes. Labels come from bounded sets only: the chains and nodes of the configuration, the
kinds of work (`domain/requirements.py`), the usage scenarios, HTTP statuses. Never a key, an
IP address, a customer or a method name a caller chose.

With several workers, each one writes what it counted to a file of its own in the metrics
directory every few seconds (`export`), and a scrape that reaches any of them answers for all:
its own counts as they are now, and the files of the others (`merged`). A file whose worker is
gone is dropped, which Prometheus reads as a counter reset.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Upper bounds of the answer-time histogram, seconds: a loopback node answers in about a
# millisecond, a distant one in tens, a heavy call in seconds.
LATENCY_BOUNDS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SUFFIX = ".metrics.json"


class RouterMetrics:
    """What one worker counted since it started."""

    __slots__ = ("attempts", "calls", "credits_nano", "latency", "requests")

    def __init__(self) -> None:
        # (route: "keyed" | "free" | "other", HTTP status) -> requests
        self.requests: dict[tuple[str, int], int] = {}
        # (chain, tier: "keyed" | "free", kind of work, scenario) -> calls
        self.calls: dict[tuple[int, str, str, str], int] = {}
        self.credits_nano: dict[int, int] = {}  # chain -> nano-credits billed
        # (node, "answered" | "failed") -> attempts
        self.attempts: dict[tuple[int, str], int] = {}
        # node -> answers per histogram bucket (the last: above every bound), then the sum, s
        self.latency: dict[int, list[float]] = {}

    def request(self, route: str, status: int) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1

    def call(self, chain_id: int, tier: str, work: str, scenario: str, cost_nano: int) -> None:
        key = (chain_id, tier, work, scenario)
        self.calls[key] = self.calls.get(key, 0) + 1
        if cost_nano:
            self.credits_nano[chain_id] = self.credits_nano.get(chain_id, 0) + cost_nano

    def attempt(self, node_id: int, answered: bool, seconds: float) -> None:
        key = (node_id, "answered" if answered else "failed")
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if answered:
            buckets = self.latency.get(node_id)
            if buckets is None:
                buckets = self.latency[node_id] = [0.0] * (len(LATENCY_BOUNDS_S) + 2)
            buckets[bisect.bisect_left(LATENCY_BOUNDS_S, seconds)] += 1
            buckets[-1] += seconds

    # -- sharing between workers ---------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        """The counts as JSON-able lists (tuple keys do not survive JSON). Safe beside the
        thread that counts (the native server's): each `list(...)` copy is one step that
        holds the interpreter lock, where iterating a dictionary another thread grows is not."""
        return {
            "requests": [[*key, n] for key, n in list(self.requests.items())],
            "calls": [[*key, n] for key, n in list(self.calls.items())],
            "credits_nano": [[chain, n] for chain, n in list(self.credits_nano.items())],
            "attempts": [[*key, n] for key, n in list(self.attempts.items())],
            "latency": [[node, list(buckets)] for node, buckets in list(self.latency.items())],
        }

    def add(self, data: dict[str, Any]) -> None:
        """Add another worker's counts (`as_json`) to these."""
        for route, status, n in data.get("requests", ()):
            self.requests[(route, status)] = self.requests.get((route, status), 0) + n
        for chain, tier, work, scenario, n in data.get("calls", ()):
            key = (chain, tier, work, scenario)
            self.calls[key] = self.calls.get(key, 0) + n
        for chain, n in data.get("credits_nano", ()):
            self.credits_nano[chain] = self.credits_nano.get(chain, 0) + n
        for node, outcome, n in data.get("attempts", ()):
            self.attempts[(node, outcome)] = self.attempts.get((node, outcome), 0) + n
        for node, buckets in data.get("latency", ()):
            mine = self.latency.setdefault(node, [0.0] * len(buckets))
            for index, value in enumerate(buckets):
                mine[index] += value

    def copy(self) -> RouterMetrics:
        merged = RouterMetrics()
        merged.add(self.as_json())
        return merged


class MetricsShare:
    """The metrics directory several workers of one router share (`export`, `merged`)."""

    def __init__(self, directory: Path, pid: int | None = None) -> None:
        self.directory = directory
        self.pid = os.getpid() if pid is None else pid
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def own_file(self) -> Path:
        return self.directory / f"{self.pid}{_SUFFIX}"

    def export(self, metrics: RouterMetrics) -> None:
        """Write this worker's counts for the others (atomically: a reader sees all or none)."""
        temporary = self.own_file.with_suffix(".tmp")
        try:
            temporary.write_text(json.dumps(metrics.as_json()))
            temporary.replace(self.own_file)
        except OSError as exc:
            log.warning("cannot write the worker's metrics to %s: %s", self.directory, exc)

    def merged(self, own: RouterMetrics) -> RouterMetrics:
        """This worker's counts now plus every other live worker's last export."""
        total = own.copy()
        for data in self._others():
            total.add(data)
        return total

    def _others(self) -> Iterator[dict[str, Any]]:
        for path in self.directory.glob(f"*{_SUFFIX}"):
            pid_text = path.name.removesuffix(_SUFFIX)
            if not pid_text.isdigit() or int(pid_text) == self.pid:
                continue
            if not _alive(int(pid_text)):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            try:
                yield json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being replaced, or gone: counted at the next scrape

    def remove_own(self) -> None:
        with contextlib.suppress(OSError):
            self.own_file.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
