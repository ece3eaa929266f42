"""Whether a router can serve, for load balancers (`GET /health`; docs/router.md, "Health").

Ready means: storage answered within `stale_after_s` (the snapshot of keys, prices and nodes is
as fresh as that, and usage is being written), and, when chains are configured, at least one has
a healthy node: one seen to answer since the router started (a health check or a call), in sync
and not cooling down. Chains with no such node are counted, not fatal: the router still serves
the others. A router that has just started is not ready until its first health checks find a
node that answers, so a load balancer sends it nothing it can only guess about. A router with no
chain configured yet (a new installation) is ready: nothing it should serve is failing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.health import HealthMonitor


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    storage_ok: bool
    storage_contact_age_s: float | None  # since storage last answered; None: never
    chains: int  # chains with a healthy (enabled) node configured
    chains_without_healthy_node: int  # of those, the ones with none answering, in sync, available

    def reasons(self) -> list[str]:
        found = []
        if not self.storage_ok:
            found.append("storage has not answered recently")
        if self.chains and self.chains == self.chains_without_healthy_node:
            found.append("no chain has a node that answers, in sync and available")
        return found


def readiness(
    snapshot: RouterSnapshot,
    health: HealthMonitor,
    cooldowns: MemoryCooldowns,
    last_contact: float | None,
    *,
    stale_after_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Readiness:
    age = None if last_contact is None else clock() - last_contact
    storage_ok = age is not None and age <= stale_after_s
    out_of_sync, answered = health.out_of_sync, health.latency_ms
    chains = snapshot.routes.nodes_by_chain
    without = sum(
        1
        for nodes in chains.values()
        if not any(
            n.node_id in answered
            and n.node_id not in out_of_sync
            and cooldowns.available(n.node_id)
            for n in nodes
        )
    )
    ready = storage_ok and (not chains or without < len(chains))
    return Readiness(ready, storage_ok, age, len(chains), without)
