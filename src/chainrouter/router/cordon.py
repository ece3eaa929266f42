"""Cordons and disputes: the one home of what happens to a node caught giving a wrong answer, by
an audit outvoting it (router/audits.py) or a failed proof (design notes, "Integrity").

`Cordons.cordon(node, reason)` is the hook both call:
- routers stop choosing the node at once (router/health.py `cordon`: out, its decisions ended);
- its answers this router served since its last clean audit are disputed: each moved, in the hour
  it was served, from its scenario to `disputed` in usage (metered and journaled as any usage:
  router/metering.py), so its plan is not paid for them, and its customer gets their price back
  in the same flush (its usage entry, under the flush's reference: credited once);
- the cordon, its reason and the disputed counts wait for storage (`take_writes`, written by
  router/sync.py: the node's status `cordoned`), which ends the node on every router; each of
  them then disputes what it served of the node since its own last clean audit (`elsewhere`).
A cordoned node comes back only by an administrator's or its provider's action, watched (audited
at the higher rate) for a day (management/nodes.py).

What the record of answers since the last clean audit holds is bounded per node
(`max_keys` usage keys); answers past it are counted in `unrecorded`, never disputed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chainrouter.domain.enums import Scenario
from chainrouter.domain.records import CordonWrite
from chainrouter.domain.routing import NodeInfo
from chainrouter.router.metering import CreditView, UsageMeter

_HOUR = 3600
# (customer, key, chain, method, scenario, hour, plan, price per call)
_Served = tuple[int, int, int, str, str, int, int, int]


class Cordons:
    def __init__(
        self,
        meter: UsageMeter,
        credits: CreditView,
        stop_choosing: Callable[[int], None],
        resume_choosing: Callable[[int], None] = lambda node_id: None,
        *,
        max_keys: int = 10_000,
        now: Callable[[], float] = time.time,
    ) -> None:
        self._meter = meter
        self._credits = credits
        self._stop_choosing = stop_choosing  # router/health.py: out at once, decisions ended
        self._resume_choosing = resume_choosing  # and back once lifted
        self._max_keys = max_keys
        self._now = now
        self._lock = threading.Lock()  # the native server books on its own thread
        self._since_clean: dict[int, dict[_Served, int]] = {}
        self._cordoned: dict[int, str] = {}
        self._writes: list[CordonWrite] = []
        self._stored: set[int] = set()  # cordoned here, and in storage
        self.unrecorded = 0

    def is_cordoned(self, node_id: int) -> bool:
        return node_id in self._cordoned

    def served(
        self,
        node_id: int,
        customer_id: int,
        key_id: int,
        chain_id: int,
        method: str,
        scenario: str,
        plan_id: int,
        cost_nano: int,
        count: int = 1,
    ) -> None:
        """The ledger booked `count` calls the node answered (router/ledger.py)."""
        hour = int(self._now()) // _HOUR * _HOUR
        key = (customer_id, key_id, chain_id, method, scenario, hour, plan_id, cost_nano)
        with self._lock:
            record = self._since_clean.get(node_id)
            if record is None:
                record = self._since_clean[node_id] = {}
            found = record.get(key)
            if found is not None:
                record[key] = found + count
            elif len(record) < self._max_keys:
                record[key] = count
            else:
                self.unrecorded += count

    def clean(self, node_id: int) -> None:
        """A clean audit: what the node answered before it is no longer disputable."""
        with self._lock:
            self._since_clean.pop(node_id, None)

    def cordon(self, node: NodeInfo, reason: str) -> bool:
        """Cordon the node for `reason` (the hook audits and proofs call); False if it already
        was."""
        node_id = node.node_id
        with self._lock:
            if node_id in self._cordoned:
                return False
            self._cordoned[node_id] = reason
            record = self._since_clean.pop(node_id, {})
        self._stop_choosing(node_id)
        calls, nano = self._dispute(record)
        with self._lock:
            self._writes.append(CordonWrite(node_id, reason, self._now(), calls, nano))
        return True

    def _dispute(self, record: dict[_Served, int]) -> tuple[int, int]:
        """Move each answer to `disputed`, in its hour: not paid to the plan, refunded."""
        calls = nano = 0
        for (customer, key, chain, method, scenario, hour, plan, cost), count in record.items():
            self._meter.record(
                customer,
                key,
                chain,
                method,
                Scenario(scenario),
                cost,
                plan,
                count=-count,
                hour=hour,
            )
            self._meter.record(
                customer, key, chain, method, Scenario.DISPUTED, 0, 0, count=count, hour=hour
            )
            refund = cost * count
            if refund:
                self._credits.settle(customer, 0, -refund)
            calls += count
            nano += refund
        return calls, nano

    def stored(self, writes: list[CordonWrite]) -> None:
        """These cordons are in storage: every router's next snapshot leaves the nodes out."""
        with self._lock:
            self._stored.update(write.node_id for write in writes)

    def present(self, node_ids: set[int]) -> None:
        """A snapshot was installed with these nodes: a node cordoned here, in storage, and
        there again was lifted (an administrator's or its provider's action)."""
        with self._lock:
            lifted = [n for n in self._stored if n in node_ids]
            for node_id in lifted:
                self._stored.discard(node_id)
                self._cordoned.pop(node_id, None)
        for node_id in lifted:
            self._resume_choosing(node_id)

    def elsewhere(self, node_ids: frozenset[int]) -> None:
        """A snapshot says these nodes are cordoned (another router's audit, a proof): what
        this router served of them since its own last clean audit is disputed too, and only
        the counts are written."""
        for node_id in node_ids:
            with self._lock:
                if node_id in self._cordoned:
                    continue
                self._cordoned[node_id] = "cordoned by another router"
                self._stored.add(node_id)  # in storage: the snapshot that lifts it says so
                record = self._since_clean.pop(node_id, {})
            self._stop_choosing(node_id)
            calls, nano = self._dispute(record)
            if calls:
                with self._lock:
                    self._writes.append(CordonWrite(node_id, "", self._now(), calls, nano))

    def take_writes(self) -> list[CordonWrite]:
        with self._lock:
            writes, self._writes = self._writes, []
        return writes

    def put_back(self, writes: list[CordonWrite]) -> None:
        """Writes storage did not take: first in the next round."""
        with self._lock:
            self._writes[:0] = writes

    def reasons(self) -> dict[int, str]:
        with self._lock:
            return dict(self._cordoned)
