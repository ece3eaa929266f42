"""How fast each chain's nodes answer, as the routers measure them: for customers choosing a
chain and reading where their calls spend time.

What is stored is each node's latency as the routers last reported it (`node_health`, every
5 s): smoothed over the node's recent quick calls and health checks. Per-call answer times are
kept only in each router's memory (hedging) and its Prometheus histogram, never in storage, so
the spread here is across a chain's nodes now, not across calls over time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import groupby

from sqlalchemy import Engine

from chainrouter.stores.sql.node_health import measured_latencies

_PLACES = Decimal("0.001")


@dataclass(frozen=True, slots=True)
class ChainLatency:
    chain_id: int
    name: str
    nodes: int  # enabled, in-sync nodes with a measured latency
    fastest_ms: Decimal
    median_ms: Decimal
    slowest_ms: Decimal
    as_of: datetime  # the latest report among them


def chain_latencies(engine: Engine, chain_id: int | None = None) -> list[ChainLatency]:
    """Per chain with a measured node, by chain ID: its nodes' fastest, median, slowest."""
    with engine.connect() as connection:
        measured = measured_latencies(connection, chain_id)
    found = []
    for chain, group in groupby(measured, key=lambda m: m.chain_id):
        nodes = list(group)
        times = sorted(m.latency_ms for m in nodes)
        middle = len(times) // 2
        median = times[middle] if len(times) % 2 else (times[middle - 1] + times[middle]) / 2
        found.append(
            ChainLatency(
                chain_id=chain,
                name=nodes[0].chain_name,
                nodes=len(times),
                fastest_ms=times[0].quantize(_PLACES),
                median_ms=median.quantize(_PLACES),
                slowest_ms=times[-1].quantize(_PLACES),
                as_of=max(m.checked_at for m in nodes),
            )
        )
    return found
