"""The router's background capability probes (screening/probes.py), one node at a time.

A program like the health checker (contract.py): it sends with `Forward` and paces itself with
`Wait`, so the executor that serves requests runs it. A node is probed once its health check
has found its head, and again every `interval_s`; between probes, what the node's own errors
teach narrows what was found (router/capabilities.py), and the next probe replaces that. A node
whose error taught something is probed again within about a minute, so that a router that
learned only "not block N" soon knows the oldest block it does keep.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from chainrouter.domain.routing import NodeInfo
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.contract import Failure, Forward, Wait
from chainrouter.router.health import HealthMonitor
from chainrouter.screening.probes import (
    Ask,
    ProbeUnanswered,
    call_body,
    probe_capabilities,
    read_answer,
)

log = logging.getLogger(__name__)

_MIN_TICK_S = 1.0
_MAX_TICK_S = 10.0
_REPROBE_AFTER_LESSON_S = 60.0  # a node that taught something is probed again this soon


def forwarding_ask(url: str, timeout_s: float) -> Ask:
    """`ask` over the executor: one JSON-RPC call to `url` per probe."""
    ids = itertools.count(1)

    async def ask(method: str, params: list[Any]) -> Any:
        call_id = next(ids)
        answer = await Forward(url, call_body(call_id, method, params), timeout_s)
        if isinstance(answer, Failure):
            raise ProbeUnanswered(answer.detail)
        return read_answer(answer, call_id)

    return ask


class CapabilityProber:
    def __init__(
        self, book: CapabilityBook, health: HealthMonitor, *, interval_s: float, timeout_s: float
    ) -> None:
        self._book = book
        self._health = health
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self._probed_at: dict[int, float] = {}  # node id -> monotonic time of its last probe
        self._stopping = False

    async def probe(self, node: NodeInfo) -> bool:
        """Probe one node now; False when its head is not known yet."""
        head = self._health.node_head(node.node_id)
        if head is None:
            return False
        ask = forwarding_ask(node.url, self._timeout_s)
        found = await probe_capabilities(ask, head, self._book.probed_of(node.node_id))
        self._book.probed(node.node_id, found)
        self._probed_at[node.node_id] = time.monotonic()
        return True

    def due(self, nodes: Sequence[NodeInfo]) -> NodeInfo | None:
        """The node whose probe is most overdue, if any is due (never probed comes first)."""
        now = time.monotonic()
        best: NodeInfo | None = None
        best_at = now - self._interval_s
        taught = self._book.taught
        for node in nodes:
            at = self._probed_at.get(node.node_id, float("-inf"))
            if node.node_id in taught and at <= now - _REPROBE_AFTER_LESSON_S:
                at = min(at, best_at)  # due now, behind the never-probed and the overdue
            if at <= best_at and self._health.node_head(node.node_id) is not None:
                best, best_at = node, at
        return best

    async def run(self, current_nodes: Callable[[], Sequence[NodeInfo]]) -> None:
        """Until `stop`ped: each tick, probe the most overdue node (a program: run it with an
        executor's `spawn`)."""
        while not self._stopping:
            nodes = current_nodes()
            live = {node.node_id for node in nodes}
            for gone in [n for n in self._probed_at if n not in live]:
                del self._probed_at[gone]
            self._book.forget_except(live)
            node = self.due(nodes)
            if node is not None:
                try:
                    await self.probe(node)
                except Exception:  # a bug in one probe must not stop the prober
                    log.exception("capability probe of node %d crashed", node.node_id)
                    self._probed_at[node.node_id] = time.monotonic()
            tick = self._interval_s / max(len(nodes), 1)
            await Wait(min(max(tick, _MIN_TICK_S), _MAX_TICK_S))

    def stop(self) -> None:
        self._stopping = True
