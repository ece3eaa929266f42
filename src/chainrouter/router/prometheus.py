"""`GET /metrics` on the router: what `RouterMetrics` counted and the state the router holds,
in Prometheus's text format (the `prometheus-client` library writes it). Read when scraped,
never on the request path. The series are listed in docs/operations.md."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from chainrouter.domain.money import NANO_PER_CREDIT
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.router.audits import Auditor
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.health import HealthMonitor
from chainrouter.router.metrics import LATENCY_BOUNDS_S, RouterMetrics
from chainrouter.router.sync import StorageSync

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class RouterState:
    """What a scrape reads besides the counts."""

    counts: Callable[[], RouterMetrics]  # this worker's, or every worker's merged
    snapshot: Callable[[], RouterSnapshot]
    health: HealthMonitor
    cooldowns: MemoryCooldowns
    sync: StorageSync
    auditor: Auditor | None = None  # this worker's audits (router/audits.py)


class _RouterCollector(Collector):
    def __init__(self, state: RouterState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        state = self._state
        counts = state.counts()
        yield from _traffic(counts)
        yield from _attempts(counts, state.snapshot())
        yield from _nodes(state)
        yield from _audits(state.auditor)
        yield from _websocket(counts)
        yield from _cache(counts)
        yield _repeated(counts)
        yield from _verified(counts)
        yield from _epochs(counts)
        yield from _seen_heads(counts)
        yield from _storage(state.sync)


def _traffic(counts: RouterMetrics) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "chainrouter_requests",
        "HTTP requests answered, by route (keyed, free, other) and status.",
        labels=["route", "status"],
    )
    for (route, status), n in sorted(counts.requests.items()):
        requests.add_metric([route, str(status)], n)
    yield requests
    calls = CounterMetricFamily(
        "chainrouter_calls",
        "JSON-RPC calls (a batch counts each), by chain, tier, kind of work and scenario.",
        labels=["chain", "tier", "work", "scenario"],
    )
    for (chain, tier, work, scenario), n in sorted(counts.calls.items()):
        calls.add_metric([str(chain), tier, work, scenario], n)
    yield calls
    billed = CounterMetricFamily(
        "chainrouter_credits_billed",
        "Credits charged to customers for calls and WebSocket notifications, by chain (exact "
        "to the nano-credit).",
        labels=["chain"],
    )
    for chain, nano in sorted(counts.credits_nano.items()):
        billed.add_metric([str(chain)], float(Decimal(nano) / NANO_PER_CREDIT))
    yield billed


def _attempts(counts: RouterMetrics, snapshot: RouterSnapshot) -> Iterator[Metric]:
    chain_of = {
        node.node_id: node.chain_id
        for nodes in snapshot.routes.nodes_by_chain.values()
        for node in nodes
    }
    attempts = CounterMetricFamily(
        "chainrouter_upstream_attempts",
        "Attempts sent to nodes, by node and outcome (answered, failed); failovers and hedges "
        "are the calls' scenarios.",
        labels=["chain", "node", "outcome"],
    )
    for (node, outcome), n in sorted(counts.attempts().items()):
        attempts.add_metric([str(chain_of.get(node, 0)), str(node), outcome], n)
    yield attempts
    latency = HistogramMetricFamily(
        "chainrouter_upstream_latency_seconds",
        "Time nodes took to answer, by node.",
        labels=["chain", "node"],
    )
    for node, (buckets, seconds) in sorted(counts.latency().items()):
        cumulative, total = [], 0.0
        for bound, count in zip((*LATENCY_BOUNDS_S, float("inf")), buckets, strict=True):
            total += count
            cumulative.append(("+Inf" if bound == float("inf") else str(bound), total))
        latency.add_metric([str(chain_of.get(node, 0)), str(node)], cumulative, seconds)
    yield latency


def _websocket(counts: RouterMetrics) -> Iterator[Metric]:
    for name, what in (
        ("connections", "WebSocket client connections open now."),
        ("feeds", "Chain feeds open now: one upstream newHeads subscription each."),
    ):
        yield GaugeMetricFamily(
            f"chainrouter_websocket_{name}", what, counts.websocket.get(name, 0)
        )
    notifications = CounterMetricFamily(
        "chainrouter_websocket_notifications",
        "WebSocket notifications sent to clients (each billed), by chain and subscription kind.",
        labels=["chain", "kind"],
    )
    for (chain, kind), n in sorted(counts.notifications.items()):
        notifications.add_metric([str(chain), kind], n)
    yield notifications


_CACHE_SERIES = (
    ("hits", "Calls answered from the response cache, by chain and method."),
    ("misses", "Calls the response cache was asked for and did not hold, by chain and method."),
    ("evictions", "Answers the response cache dropped for room, by chain and method."),
    ("coalesced", "Calls that joined an identical call in flight instead of reaching a node."),
    ("replayed", "Cache hits the native server answered again itself (hits too)."),
)


def _cache(counts: RouterMetrics) -> Iterator[Metric]:
    by_series: dict[str, list[tuple[int, str, int]]] = {}
    for (series, chain, method), n in sorted(counts.cache.items()):
        by_series.setdefault(series, []).append((chain, method, n))
    for series, what in _CACHE_SERIES:
        family = CounterMetricFamily(
            f"chainrouter_cache_{series}", what, labels=["chain", "method"]
        )
        for chain, method, n in by_series.get(series, ()):
            family.add_metric([str(chain), method], n)
        yield family
    held = GaugeMetricFamily(
        "chainrouter_cache_bytes",
        "Bytes the response cache holds in process (answers, keys, overhead), by chain and method.",
        labels=["chain", "method"],
    )
    for chain, method, n in by_series.get("bytes", ()):
        held.add_metric([str(chain), method], n)
    yield held


def _epochs(counts: RouterMetrics) -> Iterator[Metric]:
    """The finality epochs routers share through Redis (docs/cache.md)."""
    families = {
        "adopted": CounterMetricFamily(
            "chainrouter_cache_epochs_adopted",
            "Regresses of a chain's finalized block that another router saw and this one adopted "
            "(its answers of the chain held in process dropped), by chain.",
            labels=["chain"],
        ),
        "published": CounterMetricFamily(
            "chainrouter_cache_epochs_published",
            "Regresses of a chain's finalized block this router saw and published to the others "
            "through Redis, by chain.",
            labels=["chain"],
        ),
    }
    read = GaugeMetricFamily(
        "chainrouter_cache_epochs_read",
        "Workers of this router that have read the shared finality epochs from Redis (until "
        "then a worker uses no answer from Redis).",
    )
    known = 0
    for (series, chain), n in sorted(counts.epochs.items()):
        if series == "read":
            known += n
        elif series in families:
            families[series].add_metric([str(chain)], n)
    if counts.epochs:  # sharing is on
        yield from families.values()
        read.add_metric([], known)
        yield read


_SEEN_HEADS = {
    "published": "Raises of a key's seen head on this router, sent to the others through Redis.",
    "adopted": "Raises of a key's seen head on another router, adopted by this one.",
    "failures": "Calls to Redis for the keys' seen heads that failed or timed out.",
}


def _seen_heads(counts: RouterMetrics) -> Iterator[Metric]:
    """The keys' seen heads routers share through Redis (docs/deployment.md)."""
    if not counts.seen_heads:  # no Redis: nothing is shared
        return
    for name, text in _SEEN_HEADS.items():
        family = CounterMetricFamily(f"chainrouter_seen_heads_{name}", text)
        family.add_metric([], counts.seen_heads.get(name, 0))
        yield family


def _repeated(counts: RouterMetrics) -> Metric:
    repeated = CounterMetricFamily(
        "chainrouter_forwards_repeated",
        "Calls the native server sent itself, under the pipeline's decisions, to the node the "
        "pipeline chose for calls in that scope, by chain and method (billed and counted as "
        "calls too).",
        labels=["chain", "method"],
    )
    for (chain, method), n in sorted(counts.repeated.items()):
        repeated.add_metric([str(chain), method], n)
    return repeated


def _verified(counts: RouterMetrics) -> Iterator[Metric]:
    verified = CounterMetricFamily(
        "chainrouter_answers_checked",
        "Nodes' answers checked before they were served (docs/integrity.md, Proofs), by chain, "
        "method and outcome: proof (proven), agreement (two providers agreed), unproven (no "
        "proof could be made: served, not kept), false (the proof failed: the node's answer "
        "was not served and the node was reported).",
        labels=["chain", "method", "outcome"],
    )
    for (chain, method, outcome), n in sorted(counts.verified.items()):
        verified.add_metric([str(chain), method, outcome], n)
    yield verified
    by_node = CounterMetricFamily(
        "chainrouter_node_answers_checked",
        "The same, by the node whose answer was checked: a node whose answers are found false "
        "is one to cordon (docs/integrity.md).",
        labels=["chain", "node", "outcome"],
    )
    for (chain, node, outcome), n in sorted(counts.verified_nodes.items()):
        by_node.add_metric([str(chain), str(node), outcome], n)
    yield by_node


def _nodes(state: RouterState) -> Iterator[Metric]:
    health, cooldowns = state.health, state.cooldowns
    out_of_sync, smoothed = health.out_of_sync, health.latency_ms
    up = GaugeMetricFamily(
        "chainrouter_node_up",
        "1 when the node is in sync, not cooling down and has answered since the router "
        "started; else 0.",
        labels=["chain", "node"],
    )
    lag = GaugeMetricFamily(
        "chainrouter_node_head_lag_blocks",
        "Blocks the node's last reported head is behind its chain's head.",
        labels=["chain", "node"],
    )
    failures = GaugeMetricFamily(
        "chainrouter_node_consecutive_failed_checks",
        "Health checks the node failed in a row.",
        labels=["chain", "node"],
    )
    for chain_id, nodes in sorted(state.snapshot().routes.nodes_by_chain.items()):
        chain_head = health.chain_head(chain_id)
        for node in nodes:
            labels = [str(chain_id), str(node.node_id)]
            healthy = (
                node.node_id in smoothed
                and node.node_id not in out_of_sync
                and cooldowns.available(node.node_id)
            )
            up.add_metric(labels, 1.0 if healthy else 0.0)
            node_head = health.node_head(node.node_id)
            if chain_head is not None and node_head is not None:
                lag.add_metric(labels, float(max(chain_head - node_head, 0)))
            node_state = health.state(node.node_id)
            failures.add_metric(labels, float(node_state.failures if node_state else 0))
    yield up
    yield lag
    yield failures


def _audits(auditor: Auditor | None) -> Iterator[Metric]:
    if auditor is None:
        return
    audits = CounterMetricFamily(
        "chainrouter_node_audits",
        "Audits of the node's answers (docs/integrity.md, Audits), by outcome: passed (a referee "
        "agreed, or it was in the majority) or failed (outvoted: cordoned). This worker's.",
        labels=["node", "outcome"],
    )
    for node_id, standing in sorted(auditor.standings.items()):
        audits.add_metric([str(node_id), "passed"], float(standing.passed))
        audits.add_metric([str(node_id), "failed"], float(standing.failed))
    yield audits
    yield CounterMetricFamily(
        "chainrouter_audit_samples_dropped",
        "Sampled answers not audited: the audit queue was full. This worker's.",
        value=float(auditor.dropped),
    )


def _storage(sync: StorageSync) -> Iterator[Metric]:
    now = time.monotonic()
    unwritten = GaugeMetricFamily(
        "chainrouter_usage_unwritten_batches",
        "Usage flushes (and set-aside parts) not yet in storage; the journal keeps them.",
        value=float(sync.unwritten_batches),
    )
    yield unwritten
    if sync.last_flushed is not None:
        yield GaugeMetricFamily(
            "chainrouter_usage_flush_age_seconds",
            "Seconds since everything metered was last in storage.",
            value=now - sync.last_flushed,
        )
    if sync.last_contact is not None:
        yield GaugeMetricFamily(
            "chainrouter_storage_contact_age_seconds",
            "Seconds since storage last answered this router.",
            value=now - sync.last_contact,
        )
    yield GaugeMetricFamily(
        "chainrouter_configuration_version",
        "The configuration version this router serves.",
        value=float(sync.version),
    )


class RouterExposition:
    """The router's series and the process's own (CPU, memory, open files), ready to render."""

    def __init__(self, state: RouterState) -> None:
        self._registry = CollectorRegistry()
        self._registry.register(_RouterCollector(state))
        ProcessCollector(registry=self._registry)

    def render(self) -> bytes:
        return generate_latest(self._registry)
