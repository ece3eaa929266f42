"""The one ledger: whatever served a keyed call, the pipeline or the native server under one of
its decisions, this is where the call is charged, metered, and where what its answer tells is
recorded (the key's head, the node's answer time). Nothing else does any of it.

- The pipeline's closing stage `Book` hands it each keyed call once the call has ended, however
  it ended (`book`).
- The native server's calls come as receipts, judged and taken in groups by
  `router/fast/settle.py`, which hands each decision's served calls here (`book_served`), with
  the `Booking` the decision carries.
- Attempt stages and the settling both record a node's answer here (`node_answered`).

Credits: a pipeline call held its price before it was sent (stages/credit.py), and each call
its answer's check made held its own (router/proving.py): all are settled here together. A call
under a decision spent from its customer's grant (router/fast/grants.py), which was held for
it, and is settled here alike. Usage is metered (and journaled) before the answer
leaves in both cases.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work
from chainrouter.domain.routing import NodeInfo
from chainrouter.router.belief import HEAD_METHOD, NOTHING_EXPECTED, Expected, head_told
from chainrouter.router.context import CallContext, CheckCall
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.cordon import Cordons
from chainrouter.router.health import HealthMonitor
from chainrouter.router.metering import UNSUPPORTED_METHOD_NAME, CreditView, UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.response_cache import ResponseCache
from chainrouter.router.seen_heads import SeenHeads

_SERVED = (Scenario.FIRST_CHOICE, Scenario.FAILOVER, Scenario.HEDGED)
_NODES_ANSWERS = (*_SERVED, Scenario.SPLIT)  # what a cordon may dispute
_JOINED = Scenario.CACHE  # eth_blockNumber is never kept: a cache answer to it is a joined one


@dataclass(frozen=True, slots=True)
class Booking:
    """What a call served under a decision is booked as: the decision's `booking`."""

    customer_id: int
    key_id: int
    chain_id: int
    method: str
    scenario: Scenario  # FIRST_CHOICE for a forward, CACHE for an answer from the cache
    cost_nano: int  # what the customer pays per call
    join_cost_nano: int  # what a call that joined an identical one in flight pays (the cache's)
    plan_id: int  # the plan whose node answers (0: none)
    node: NodeInfo | None  # the node a forward goes to
    work: Work
    # What its answers must show to be believed, as when the decision was made (the key's
    # seen head ...: router/belief.py).
    expected: Expected = NOTHING_EXPECTED


class Ledger:
    def __init__(
        self,
        credits: CreditView,
        meter: UsageMeter,
        seen_heads: SeenHeads,
        health: HealthMonitor,
        cooldowns: MemoryCooldowns,
        metrics: RouterMetrics,
        cache: ResponseCache | None = None,
        cordons: Cordons | None = None,
    ) -> None:
        self._credits = credits
        # Told what each node answered, for the disputes should it be cordoned (router/cordon.py).
        self.cordons = cordons
        self._meter = meter
        self._seen = seen_heads
        self._health = health
        self._cooldowns = cooldowns
        self._metrics = metrics
        self._cache = cache
        self._counting = threading.Lock()  # the counts below are read from a scrape's thread
        # (chain, method) -> calls the native server served under decisions: sent to a node,
        # answered from the cache, or joined to an identical call in flight.
        self.forwarded: dict[tuple[int, str], int] = {}
        self.answered: dict[tuple[int, str], int] = {}
        self.coalesced: dict[tuple[int, str], int] = {}

    # -- the pipeline's calls ------------------------------------------------------------------

    def book(self, call: CallContext) -> None:
        """A keyed call the pipeline served, or refused, has ended: release what it held and
        charge what it cost, meter it under (customer, key, chain, method, scenario) and the
        plan whose node answered (each range of a split `eth_getLogs` at its route's price),
        and record the head an `eth_blockNumber` answer tells. Method names no plan prices are
        metered as `(unsupported)`: clients choose them. The calls its answer's check made are
        billed with it, whatever became of the call (`_book_checks`)."""
        request = call.request
        access = request.access
        if access is None:  # the free tier
            return
        checks = call.check_calls
        if checks is None:
            self._credits.settle(access.customer_id, call.held_nano, call.cost_nano)
        else:
            self._book_checks(call, checks)
        scenario = call.scenario
        if scenario is None:  # cut short by a bug: released, and nothing to meter
            return
        method = (
            UNSUPPORTED_METHOD_NAME if scenario is Scenario.UNSUPPORTED_METHOD else call.call.method
        )
        served_by = call.served_by
        parts = (
            [(route.price.cost_nano, route.plan.plan_id) for route in call.ranges_served_by]
            if call.ranges_served_by
            else [(call.cost_nano, 0 if served_by is None else served_by.plan.plan_id)]
        )
        for cost_nano, plan_id in parts:
            self._meter.record(
                access.customer_id,
                access.key_id,
                request.chain_id,
                method,
                scenario,
                cost_nano,
                plan_id,
            )
        cordons = self.cordons
        if cordons is not None and served_by is not None and scenario in _NODES_ANSWERS:
            for route in call.ranges_served_by or (served_by,):
                cordons.served(
                    route.node.node_id,
                    access.customer_id,
                    access.key_id,
                    request.chain_id,
                    method,
                    scenario,
                    route.plan.plan_id,
                    route.price.cost_nano,
                )
        if method == HEAD_METHOD and (
            (scenario in _SERVED and served_by is not None) or scenario is _JOINED
        ):
            head = head_told(call.answer)
            if head is not None:
                node = None if served_by is None else served_by.node
                self._saw(access.key_id, request.chain_id, head, node)

    def _book_checks(self, call: CallContext, checks: list[CheckCall]) -> None:
        """Settle `call` with the calls its check made (router/proving.py): each a node
        answered costs its price, under the scenario `verification` with its own method, and is
        earned by the node's plan; the nodes' answers are recorded for a cordon's disputes like
        any other. One answered by a node cordoned by now (the one whose answer the check
        refuted, say) is `disputed` at once: not billed, not paid. What was held for calls that
        got no answer is released."""
        request = call.request
        access = request.access
        assert access is not None
        cordons = self.cordons
        disputed = [
            cordons is not None and cordons.is_cordoned(check.node.node_id) for check in checks
        ]
        billed = sum(
            check.cost_nano for check, out in zip(checks, disputed, strict=True) if not out
        )
        customer, key_id, chain_id = access.customer_id, access.key_id, request.chain_id
        self._credits.settle(
            customer, call.held_nano + call.checks_held_nano, call.cost_nano + billed
        )
        for check, out in zip(checks, disputed, strict=True):
            method = check.method
            if out:
                self._meter.record(customer, key_id, chain_id, method, Scenario.DISPUTED, 0)
                continue
            scenario, cost, plan_id = Scenario.VERIFICATION, check.cost_nano, check.plan_id
            self._meter.record(customer, key_id, chain_id, method, scenario, cost, plan_id)
            if cordons is not None:
                node_id = check.node.node_id
                cordons.served(node_id, customer, key_id, chain_id, method, scenario, plan_id, cost)

    # -- what a node's answer tells ------------------------------------------------------------

    def node_answered(self, node_id: int, work: Work, seconds: float) -> None:
        """A node answered a call (that then was served) in `seconds`: it is well, and its
        answer time joins its record (hedges, time-outs, the `performance` order)."""
        self._cooldowns.succeeded(node_id)
        self._health.observe_answer(node_id, work, seconds)

    def _saw(self, key_id: int, chain_id: int, head: int, node: NodeInfo | None) -> None:
        seen = self._seen.seen(key_id, chain_id)
        if seen is None or head > seen:  # else nothing new: no write
            self._seen.saw(key_id, chain_id, head, node)

    # -- the native server's calls -------------------------------------------------------------

    def book_served(
        self,
        booking: Booking,
        spent_nano: int,
        times: list[float],
        joined: int = 0,
        heads: tuple[int, ...] = (),
    ) -> None:
        """Calls one decision served, taken by the settling: each of `times` a call its node
        answered (or its decision's own answer, for an answer from the cache) in that time, and
        `joined` calls that took an identical call's answer in flight. Release what they spent
        of the grant (`spent_nano`, held for them) and charge their price; meter them; record
        their node's answers and the highest of the `heads` they tell; count them."""
        own = len(times)
        customer, chain_id, method = booking.customer_id, booking.chain_id, booking.method
        charged = booking.cost_nano * own + booking.join_cost_nano * joined
        self._credits.settle(customer, spent_nano, charged)
        if own:
            self._meter.record(
                customer,
                booking.key_id,
                chain_id,
                method,
                booking.scenario,
                booking.cost_nano,
                booking.plan_id,
                count=own,
            )
        if joined:
            self._meter.record(
                customer,
                booking.key_id,
                chain_id,
                method,
                Scenario.CACHE,
                booking.join_cost_nano,
                count=joined,
            )
        node = booking.node
        stat = (chain_id, method)
        if node is not None and own:
            if self.cordons is not None:
                self.cordons.served(
                    node.node_id,
                    customer,
                    booking.key_id,
                    chain_id,
                    method,
                    booking.scenario,
                    booking.plan_id,
                    booking.cost_nano,
                    own,
                )
            self._metrics.answered(node.node_id, times)
            self._cooldowns.succeeded(node.node_id)
            self._health.observe_answers(node.node_id, booking.work, times)
        if heads:
            self._saw(booking.key_id, chain_id, max(heads), node if own else None)
        with self._counting:
            if node is not None and own:
                self.forwarded[stat] = self.forwarded.get(stat, 0) + own
            elif own:
                self.answered[stat] = self.answered.get(stat, 0) + own
            if joined:
                self.coalesced[stat] = self.coalesced.get(stat, 0) + joined
        if node is None and own and self._cache is not None:
            self._cache.memory.count(stat, hit=True, times=own)

    def count_coalesced(self, chain_id: int, method: str) -> None:
        """A pipeline call took the answer of an identical call in flight."""
        stat = (chain_id, method)
        with self._counting:
            self.coalesced[stat] = self.coalesced.get(stat, 0) + 1

    def counts(self) -> tuple[dict[tuple[int, str], int], ...]:
        """(forwarded, answered, coalesced), copied for a scrape."""
        with self._counting:
            return dict(self.forwarded), dict(self.answered), dict(self.coalesced)
