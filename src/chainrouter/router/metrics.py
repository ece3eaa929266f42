"""The router's metrics, for Prometheus (`GET /metrics`; docs/operations.md, "Metrics").

The request path only adds to plain dictionaries here (one look-up and one store per event, no
lock: each worker's requests run on one thread), and only for what nothing else counts: keyed
calls are counted by the usage meter already and read from it when Prometheus scrapes
(`with_metered`), as is everything else. Labels come from bounded sets only: the chains and
nodes of the configuration, the kinds of work (`domain/requirements.py`), the usage scenarios,
HTTP statuses. Never a key, an IP address, a customer or a method name a caller chose.

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

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import work_of
from chainrouter.router.metering import UNSUPPORTED_METHOD_NAME, UsageMeter

log = logging.getLogger(__name__)

# Upper bounds of the answer-time histogram, seconds: a loopback node answers in about a
# millisecond, a distant one in tens, a heavy call in seconds.
LATENCY_BOUNDS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SUFFIX = ".metrics.json"
_UNKNOWN = "unknown"


# A node's counts: attempts answered, attempts failed, answers per histogram bucket (the last:
# above every bound), then the answers' total time in seconds.
_ANSWERED, _FAILED, _BUCKETS = 0, 1, 2
_NODE_SLOTS = _BUCKETS + len(LATENCY_BOUNDS_S) + 2


class RouterMetrics:
    """What one worker counted since it started."""

    __slots__ = (
        "cache",
        "calls",
        "credits_nano",
        "epochs",
        "nodes",
        "notifications",
        "repeated",
        "requests",
        "seen_heads",
        "verified",
        "verified_nodes",
        "websocket",
    )

    def __init__(self) -> None:
        # (route: "keyed" | "free" | "other", HTTP status) -> requests
        self.requests: dict[tuple[str, int], int] = {}
        # (chain, tier: "keyed" | "free", kind of work, scenario) -> calls
        self.calls: dict[tuple[int, str, str, str], int] = {}
        self.credits_nano: dict[int, int] = {}  # chain -> nano-credits billed
        self.nodes: dict[int, list[float]] = {}  # node -> its counts (_NODE_SLOTS)
        # (chain, subscription kind) -> WebSocket notifications sent (billed ones: the meter's)
        self.notifications: dict[tuple[int, str], int] = {}
        # "connections" | "feeds" -> open now (gauges, set when counts are read or exported)
        self.websocket: dict[str, int] = {}
        # (series, chain, method) -> n: the response cache's hits, misses, evictions, bytes held
        # and calls coalesced (read from the cache when counts are read or exported)
        self.cache: dict[tuple[str, int, str], int] = {}
        # (chain, method) -> calls the native server sent again itself (router/forwards.py)
        self.repeated: dict[tuple[int, str], int] = {}
        # Finality epochs shared through Redis (router/shared_epochs.py), read from it when
        # counts are read or exported: ("adopted" | "published", chain) -> regresses, and
        # ("read", 0) -> 1 once the worker has read the shared epochs.
        self.epochs: dict[tuple[str, int], int] = {}
        # (chain, method, outcome: "proof" | "agreement" | "unproven" | "false") -> answers
        # checked before they were served (router/proving.py)
        self.verified: dict[tuple[int, str, str], int] = {}
        # (chain, node, outcome) -> the same, by the node whose answer was checked
        self.verified_nodes: dict[tuple[int, int, str], int] = {}
        # The keys' seen heads shared through Redis (router/shared_heads.py), read when counts
        # are read or exported: "published" | "adopted" | "failures" -> n.
        self.seen_heads: dict[str, int] = {}

    def request(self, route: str, status: int, count: int = 1) -> None:
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + count

    def call(
        self, chain_id: int, tier: str, work: str, scenario: str, cost_nano: int, count: int = 1
    ) -> None:
        key = (chain_id, tier, work, scenario)
        self.calls[key] = self.calls.get(key, 0) + count
        if cost_nano:
            self.credits_nano[chain_id] = self.credits_nano.get(chain_id, 0) + cost_nano

    def attempt(self, node_id: int, answered: bool, seconds: float) -> None:
        counts = self.nodes.get(node_id)
        if counts is None:
            counts = self.nodes[node_id] = [0.0] * _NODE_SLOTS
        if answered:
            counts[_ANSWERED] += 1
            counts[_BUCKETS + bisect.bisect_left(LATENCY_BOUNDS_S, seconds)] += 1
            counts[-1] += seconds
        else:
            counts[_FAILED] += 1

    def answered(self, node_id: int, times: list[float]) -> None:
        """`attempt(node_id, True, seconds)` for each of `times` (repeated forwards, in groups)."""
        counts = self.nodes.get(node_id)
        if counts is None:
            counts = self.nodes[node_id] = [0.0] * _NODE_SLOTS
        counts[_ANSWERED] += len(times)
        for seconds in times:
            counts[_BUCKETS + bisect.bisect_left(LATENCY_BOUNDS_S, seconds)] += 1
        counts[-1] += sum(times)

    def checked(self, chain_id: int, method: str, node_id: int, outcome: str) -> None:
        key = (chain_id, method, outcome)
        self.verified[key] = self.verified.get(key, 0) + 1
        by_node = (chain_id, node_id, outcome)
        self.verified_nodes[by_node] = self.verified_nodes.get(by_node, 0) + 1

    def attempts(self) -> dict[tuple[int, str], int]:
        """(node, "answered" | "failed") -> attempts."""
        found = {}
        for node_id, counts in list(self.nodes.items()):
            found[(node_id, "answered")] = int(counts[_ANSWERED])
            found[(node_id, "failed")] = int(counts[_FAILED])
        return found

    def latency(self) -> dict[int, tuple[list[float], float]]:
        """node -> (answers per histogram bucket, their total time): nodes that answered."""
        return {
            node_id: (list(counts[_BUCKETS:-1]), counts[-1])
            for node_id, counts in list(self.nodes.items())
            if counts[_ANSWERED]
        }

    # -- sharing between workers ---------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        """The counts as JSON-able lists (tuple keys do not survive JSON). Safe beside the
        thread that counts (the native server's): each `list(...)` copy is one step that
        holds the interpreter lock, where iterating a dictionary another thread grows is not."""
        return {
            "requests": [[*key, n] for key, n in list(self.requests.items())],
            "calls": [[*key, n] for key, n in list(self.calls.items())],
            "credits_nano": [[chain, n] for chain, n in list(self.credits_nano.items())],
            "nodes": [[node, list(counts)] for node, counts in list(self.nodes.items())],
            "notifications": [[*key, n] for key, n in list(self.notifications.items())],
            "websocket": [[name, n] for name, n in list(self.websocket.items())],
            "cache": [[*key, n] for key, n in list(self.cache.items())],
            "repeated": [[*key, n] for key, n in list(self.repeated.items())],
            "epochs": [[*key, n] for key, n in list(self.epochs.items())],
            "verified": [[*key, n] for key, n in list(self.verified.items())],
            "verified_nodes": [[*key, n] for key, n in list(self.verified_nodes.items())],
            "seen_heads": [[name, n] for name, n in list(self.seen_heads.items())],
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
        for node, counts in data.get("nodes", ()):
            mine = self.nodes.setdefault(node, [0.0] * _NODE_SLOTS)
            for index, value in enumerate(counts[:_NODE_SLOTS]):
                mine[index] += value
        for chain, kind, n in data.get("notifications", ()):
            self.notifications[(chain, kind)] = self.notifications.get((chain, kind), 0) + n
        for name, n in data.get("websocket", ()):
            self.websocket[name] = self.websocket.get(name, 0) + n
        for series, chain, method, n in data.get("cache", ()):
            stat = (series, chain, method)
            self.cache[stat] = self.cache.get(stat, 0) + n
        for chain, method, n in data.get("repeated", ()):
            self.repeated[(chain, method)] = self.repeated.get((chain, method), 0) + n
        for series, chain, n in data.get("epochs", ()):
            self.epochs[(series, chain)] = self.epochs.get((series, chain), 0) + n
        for chain, method, outcome, n in data.get("verified", ()):
            checked = (chain, method, outcome)
            self.verified[checked] = self.verified.get(checked, 0) + n
        for chain, node, outcome, n in data.get("verified_nodes", ()):
            by_node = (chain, node, outcome)
            self.verified_nodes[by_node] = self.verified_nodes.get(by_node, 0) + n
        for name, n in data.get("seen_heads", ()):
            self.seen_heads[name] = self.seen_heads.get(name, 0) + n

    def copy(self) -> RouterMetrics:
        merged = RouterMetrics()
        merged.add(self.as_json())
        return merged


def with_metered(
    metrics: RouterMetrics,
    meter: UsageMeter,
    websocket: dict[str, int] | None = None,
    cache: dict[tuple[str, int, str], int] | None = None,
    epochs: dict[tuple[str, int], int] | None = None,
    seen_heads: dict[str, int] | None = None,
) -> RouterMetrics:
    """A copy of `metrics` with the keyed calls, WebSocket notifications and credits the usage
    meter counted, and the WebSocket gauges, cache counts and shared epochs' counts as they are
    now."""
    counts = metrics.copy()
    for (chain_id, method, scenario), (calls, credits) in meter.totals().items():
        # The method is the subscription kind; a subscription held counts credits, no call.
        if scenario in (Scenario.SUBSCRIPTION, Scenario.SUBSCRIPTION_HELD):
            key = (chain_id, method)
            counts.notifications[key] = counts.notifications.get(key, 0) + calls
            counts.credits_nano[chain_id] = counts.credits_nano.get(chain_id, 0) + credits
            continue
        work = _UNKNOWN if method == UNSUPPORTED_METHOD_NAME else work_of(method).value
        counts.call(chain_id, "keyed", work, scenario, credits, calls)
    if websocket is not None:
        counts.websocket = dict(websocket)
    if cache is not None:
        counts.cache = dict(cache)
    if epochs is not None:
        counts.epochs = dict(epochs)
    if seen_heads is not None:
        counts.seen_heads = dict(seen_heads)
    return counts


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
