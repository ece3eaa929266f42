"""Stage: forward the call along its routes, in order, until a node answers (failover).

A route is skipped, not tried, while its node cools down or when its node, plan (requests or
credits) or priced method is at a rate limit. A tried route fails on anything that is not the
answer to the call (`Failure` from the executor, or an answer judged by `answers.py`); the call
then goes on to the next route. A node that failed is cooled down, except when the request was
at fault (docs/security.md). When no route answers, the client is told why (spec section 7):
every route tried rate limited, or every route skipped: HTTP 429, -32003; every route tried timed
out: HTTP 504, -32009; otherwise HTTP 424, -32009.

A read is tried in lanes raced against each other (`Race`): the first lane at once, each next one
when the attempt before it has run for its node's hedge delay; every lane takes the next untried
route, so failover and hedging are one walk down the routes. The first answer ends the race and
alone is billed (docs/router.md, "Tail latency"; the delays and time-outs: `router/latency.py`).
Nodes whose first health check is still out (never heard from since the router started) are
tried after those that have answered theirs.

An answer the router does not believe (router/belief.py: a head older than the call must see,
"none" from a node behind the chain's head) is not served while another route may answer; when
no route does better, the best of those is served. A block past every node's head is answered
as the nodes answer it (their own "not found" error), unbilled.

A signed raw transaction goes to the first two routes at once, of two providers where it can
(its hash is its identity: router/writes.py): the first node to accept it, or to refuse it for
what it is (nonce, funds, gas), answers; a hung node never holds the answer up. Billed once.

A call the native server already sent to a node under a decision (`RequestContext.attempts`)
is not sent to that node again: what the node did stands for the attempt, judged here like any
(a time-out only for an attempt that would have waited no longer).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Needs, Work, work_of
from chainrouter.domain.routing import NodeInfo, Route
from chainrouter.domain.snapshot import RouterSnapshot
from chainrouter.domain.upstream_errors import Fault, NodeFault, classify
from chainrouter.domain.verification import Verified
from chainrouter.jsonrpc.envelope import encode_json
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.ratelimit.window import Bucket
from chainrouter.router.answers import Verdict, judge_answer, names_other_chain
from chainrouter.router.belief import HEAD_METHOD, doubted, head_told
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.context import CallContext
from chainrouter.router.contract import Acquire, Failure, FailureKind, Forward, Gather, Race
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.health import HealthMonitor
from chainrouter.router.latency import HEDGED_WORK, TailPolicies, TailPolicy
from chainrouter.router.ledger import Ledger
from chainrouter.router.metering import CreditView
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.node_checks import NodeCheck, NodeChecks
from chainrouter.router.proving import Prover
from chainrouter.router.stages.price_cap import within_cap
from chainrouter.router.writes import already_known, echoes


@dataclass(frozen=True, slots=True)
class AttemptLimits:
    attempt_timeout_s: float  # one node, one call
    deadline_s: float  # one call, across all its attempts
    split_concurrency: int = 4  # ranges of a split eth_getLogs asked at once


class _Tally:
    """What happened to the routes of one call that did not answer."""

    __slots__ = (
        "doubted",
        "faults",
        "free_in",
        "missing",
        "rate_limited",
        "refuted",
        "rejections",
        "skipped",
        "suspects",
        "timed_out",
        "tried",
        "unaffordable",
    )

    def __init__(self) -> None:
        self.free_in: float | None = None  # seconds until the first route held back frees up
        self.tried = 0
        self.timed_out = 0
        self.rate_limited = 0
        self.skipped = 0  # cooling down or at a rate limit: not tried
        self.unaffordable = 0  # dearer than the call holds, and the balance cannot cover it
        self.faults: list[NodeFault] = []  # nodes that said they cannot serve the call
        self.missing: bytes | None = None  # the last node's own "no such block" error answer
        self.doubted: list[_Served] = []  # answers not believed (router/belief.py)
        # Answers a proof refuted, with why: false once another provider's held the same proof.
        self.refuted: list[tuple[_Served, str]] = []
        # Nodes that rejected the request, and how: cooled down unless all rejected it alike.
        self.rejections: list[tuple[int, str]] = []
        # Nodes that timed out on, or answered too much to, a call whose size is the caller's
        # (not a quick look-up): cooled down only if another node then serves the call.
        self.suspects: list[int] = []

    def held_back(self, seconds: float) -> None:
        """A route is out for `seconds` (cooling down, at a rate limit): the soonest counts."""
        if self.free_in is None or seconds < self.free_in:
            self.free_in = seconds

    def rejected_alike(self) -> str | None:
        """How every route tried rejected the request, when they all did so in the same way."""
        ways = {how for _, how in self.rejections}
        if len(self.rejections) == self.tried and len(ways) == 1:
            return ways.pop()
        return None


@dataclass(slots=True)
class _Served:
    """A node's answer that ends the call; `route` None: the caller's own fault (unbilled)."""

    route: Route | None
    scenario: Scenario
    status: int
    answer: bytes
    elapsed: float = 0.0  # seconds from sending to the answer
    verified: Verified | None = None  # how the answer was checked (router/proving.py)


_PEERS = 3  # routes whose latency may stand in for an unknown one
_MISSING = (Fault.STATE_MISSING, Fault.BLOCK_MISSING)
# Failures that a call beyond a quick look-up may cause on any node: its time or its answer's
# size is the caller's (a wide eth_getLogs, a heavy eth_call or trace).
_CALLS_SIZE = (FailureKind.TIMEOUT, FailureKind.TOO_LARGE)


class _GaveUp:
    """No route left and no attempt in flight: the race can end."""


_GAVE_UP = _GaveUp()


class _Attempts:
    """One call's attempts, shared by its lanes: the next route to take, what happened to the
    ones that did not answer, and the attempts in flight (by lane: route, time sent)."""

    __slots__ = (
        "_peers",
        "busy",
        "call",
        "hedge_at",
        "in_flight",
        "next",
        "policy",
        "racing",
        "started",
        "tally",
        "work",
    )

    def __init__(self, call: CallContext, work: Work, policy: TailPolicy, started: float) -> None:
        self.call = call
        self.racing = False  # lanes race: the race, not the lane, records and ends the call
        self.work = work
        self.policy = policy
        self.started = started
        self.next = 0  # index in call.ordered
        self.busy = 0  # lanes between taking a route and knowing its outcome
        self.hedge_at: float | None = None  # when a race starts its second lane
        self.tally = _Tally()
        self.in_flight: dict[int, tuple[Route, float]] = {}
        self._peers: list[int] | None = None

    def peers(self) -> list[int]:
        """The first routes' nodes: whose latency stands in where a node's own is unknown."""
        if self._peers is None:
            self._peers = [route.node.node_id for route in self.call.ordered[:_PEERS]]
        return self._peers


def _proofs_misfit(call: CallContext, tally: _Tally) -> bool:
    """Whether the answers a proof refuted say more of the proofs than of the nodes: two
    providers' answers refuted alike, or the only provider's. One provider's refuted answer
    while another's node failed is no answer: the call fails rather than serve it."""
    refuted = {served.route.node.provider_id for served, _ in tally.refuted if served.route}
    if len(refuted) >= 2:
        return True
    return bool(refuted) and refuted == {route.node.provider_id for route in call.routes}


def _proven_first(routes: Sequence[Route], unproven: Container[int]) -> Sequence[Route]:
    """The routes in their order, but those whose node's first health check is still out after
    the others: after a start, or when a node is added, a call does not wait on a node never
    heard from (a hung node's check never comes back) while a peer has answered its check."""
    proven = [route for route in routes if route.node.node_id not in unproven]
    if not proven:
        return routes
    return proven + [route for route in routes if route.node.node_id in unproven]


class Attempt:
    def __init__(
        self,
        cooldowns: MemoryCooldowns,
        health: HealthMonitor,
        capabilities: CapabilityBook,
        limits: AttemptLimits,
        clock: Callable[[], float],
        tail: TailPolicies,
        credits: CreditView,
        ledger: Ledger,
        metrics: RouterMetrics | None = None,
        prover: Prover | None = None,
        answered_false: Callable[[NodeInfo, str], object] | None = None,
        node_checks: NodeChecks | None = None,
    ) -> None:
        self._cooldowns = cooldowns
        # What proofs found of each node, for storage (router/node_checks.py).
        self._node_checks = NodeChecks() if node_checks is None else node_checks
        self._prover = prover
        # A node whose answer a proof showed false: reported here (router/cordon.py: out at once,
        # its answers since its last clean audit disputed), and cooled down either way.
        self._answered_false = answered_false
        self._credits = credits
        self._health = health
        self._capabilities = capabilities
        self._observe_answer = health.observe_answer
        self._node_answered = ledger.node_answered
        self._recent = health.recent
        self._smoothed_ms = health.latency_ms
        self._unproven = health.first_check_out
        self._tail = tail
        self._limits = limits
        self._clock = clock
        self._metrics = RouterMetrics() if metrics is None else metrics
        self._count_attempt = self._metrics.attempt
        # Each route's limits, by the route's identity, for the snapshot the routes belong to.
        self._snapshot: RouterSnapshot | None = None
        # By the route's identity, the route kept beside them: a call of an older snapshot still
        # in flight may add its routes here, and a freed route's id could be reused by another.
        self._buckets: dict[int, tuple[Route, list[Bucket]]] = {}
        self._work: dict[str, Work] = {}  # each priced method's kind of work

    def run(self, call: CallContext) -> Coroutine[Any, Any, object]:
        """The program that serves the call: one lane on its own, or lanes raced."""
        if call.split_size:
            return self._split(call)
        snapshot = call.request.snapshot
        if snapshot is not self._snapshot:  # routes live as long as their snapshot
            self._snapshot, self._buckets, self._work = snapshot, {}, {}
        method = call.call.method
        work = self._work.get(method)
        if work is None:  # bounded: only priced methods get here, and the map goes with them
            work = self._work[method] = work_of(method)
        policy = self._tail.policy(call.request.chain_id)
        attempts = _Attempts(call, work, policy, self._clock() - call.request.waited_s)
        lanes = min(policy.hedge_max + 1, len(call.ordered)) if work in HEDGED_WORK else 1
        unproven = self._unproven
        if unproven and call.ordered and call.ordered[0].node.node_id in unproven:
            call.ordered = _proven_first(call.ordered, unproven)
        if call.tx_hash is not None and len(call.ordered) > 1:
            call.ordered = _providers_apart(call.ordered)
            return self._race(attempts, 2, at_once=True)
        if lanes <= 1:
            return self._lane(attempts, 0)  # it ends the call itself: no coroutine around it
        return self._race(attempts, lanes)

    async def _race(self, attempts: _Attempts, lanes: int, *, at_once: bool = False) -> None:
        attempts.racing = True
        work, policy = attempts.work, attempts.policy
        if at_once:
            delays = [0.0] * lanes
        else:
            delays = self._recent.hedge_delays(attempts.peers()[:lanes], work, policy)
            attempts.hedge_at = delays[1]
        waited = attempts.call.request.waited_s
        if waited:
            # The native server waited that long on the call's first node under a decision: it
            # counts toward the hedges' delays, as it does toward the deadline. One delay at
            # most, which is as long as the server waits on a raced read: a call the node
            # answered but the pipeline must serve again (its node no longer first, say) sends
            # one needless hedge at most.
            waited = min(waited, delays[1])
            delays = [max(0.0, delay - waited) for delay in delays]
        _, outcome = await Race([self._lane(attempts, lane) for lane in range(lanes)], delays)
        if isinstance(outcome, _Served) and outcome.route is not None:
            node_id = outcome.route.node.node_id
            if attempts.in_flight:  # judged before the winner's time joins its record
                self._judge_overtaken(attempts, outcome)
            self._node_answered(node_id, work, outcome.elapsed)
        self._settle(attempts, outcome)

    def _settle(self, attempts: _Attempts, outcome: _Served | _GaveUp | None) -> None:
        """End the call: with the answer that won, or with why no route answered."""
        call = attempts.call
        call.attempts = attempts.tally.tried
        if not isinstance(outcome, _Served) and attempts.tally.doubted:
            outcome = self._best_doubted(attempts)
        if not isinstance(outcome, _Served) and _proofs_misfit(call, attempts.tally):
            # Answers of two providers failed their proof alike (or of the only provider): the
            # proofs do not fit this chain (a header of its own kind, a transaction type they
            # do not know), rather than every node lying. Served unproven, as without proofs.
            outcome = attempts.tally.refuted[0][0]
            outcome.verified = None
        if isinstance(outcome, _Served):
            call.served_by = outcome.route
            if call.proof is not None and outcome.route is not None:
                self._note_checked(call, outcome.verified)
            call.end(outcome.scenario, outcome.status, outcome.answer)
        else:
            self._fail(call, attempts.tally)

    def _best_doubted(self, attempts: _Attempts) -> _Served:
        """No route gave an answer the router believes: the best of those it does not (the
        highest head; an absence, then the chain's as far as any node knows)."""
        doubted_answers = attempts.tally.doubted
        best = doubted_answers[0]
        if attempts.call.call.method == HEAD_METHOD:
            best = max(doubted_answers, key=lambda served: head_told(served.answer) or -1)
        route = best.route
        assert route is not None, "a doubted answer is a node's"
        if route is not attempts.call.ordered[0]:
            best.scenario = Scenario.FAILOVER
        self._node_answered(route.node.node_id, attempts.work, best.elapsed)
        return best

    async def _lane(self, attempts: _Attempts, lane: int) -> _Served | _GaveUp | None:
        """Try the call's routes, each one not yet taken by another lane, until a node answers
        (`_Served`, which ends a race) or no route is left: `_GaveUp` if no other lane has an
        attempt in flight (ending the race: nothing more can come), else None."""
        call, tally, cooldowns, clock = attempts.call, attempts.tally, self._cooldowns, self._clock
        policy, work = attempts.policy, attempts.work
        ordered = call.ordered
        while attempts.next < len(ordered):
            route = ordered[attempts.next]
            attempts.next += 1
            node_id = route.node.node_id
            # A node cooling down is skipped as before: no hold for it, and no 402 for its sake.
            if (
                route.price.cost_nano > call.held_nano
                and cooldowns.available(node_id)
                and not self._hold_more(call, route)
            ):
                tally.unaffordable += 1
                continue
            if not cooldowns.take(node_id):
                tally.skipped += 1
                tally.held_back(cooldowns.remaining(node_id))
                continue
            attempts.busy += 1
            try:
                known = self._buckets.get(id(route))
                if known is not None and known[0] is route:
                    buckets = known[1]
                else:
                    buckets = route_buckets(route)
                    self._buckets[id(route)] = (route, buckets)
                if buckets:
                    wait_s = await Acquire(buckets)
                    if wait_s > 0:
                        tally.skipped += 1
                        tally.held_back(wait_s)
                        continue
                sent = clock()
                remaining = self._limits.deadline_s - (sent - attempts.started)
                if remaining <= 0:  # the call's time is up: nothing is sent
                    if buckets:
                        await Acquire(_given_back(buckets))
                    tally.tried += 1
                    tally.timed_out += 1
                    break
                node_timeout_s = self._recent.timeout(
                    node_id, work, policy, attempts.peers, self._smoothed_ms
                )
                timeout_s = min(node_timeout_s, remaining)
                attempts.in_flight[lane] = (route, sent)
                made = self._made(call, node_id, timeout_s, work, attempts)
                if made is None:
                    answer = await Forward(route.node.url, call.body, timeout_s)
                    elapsed = clock() - sent
                else:
                    answer, elapsed = made
                del attempts.in_flight[lane]
            finally:
                attempts.busy -= 1
            tally.tried += 1
            served = self._judge(route, answer, call, tally, elapsed, work, attempts.racing)
            if served is not None and call.proof is not None and served.route is not None:
                # Busy while its proof is fetched: a lane with no route left must not end the
                # race as given up while this answer may still be served.
                attempts.busy += 1
                try:
                    served = await self._checked(call, served, timeout_s, tally)
                finally:
                    attempts.busy -= 1
            self._count_attempt(node_id, served is not None, elapsed)
            if served is None and (back := credits_given_back(route, elapsed)) is not None:
                await Acquire([back])  # the provider bills answers: a failure spent nothing
            if served is not None:
                if served.scenario is Scenario.FIRST_CHOICE and route is not ordered[0]:
                    served.scenario = Scenario.FAILOVER
                if lane and served.scenario is not Scenario.REJECTED:
                    served.scenario = Scenario.HEDGED
                elif (
                    served.route is ordered[0]
                    and served.scenario is Scenario.FIRST_CHOICE
                    and tally.tried == 1
                    and not attempts.in_flight
                    and not buckets
                    and work is not Work.WRITE
                    and call.proof is None
                ):
                    # The pipeline's whole decision for this call: the native server may apply
                    # it, waiting on the node no longer than a fresh call's attempt would (not
                    # this one's, which the server may have cut short before).
                    within_s = min(node_timeout_s, self._limits.deadline_s)
                    hedge_at = attempts.hedge_at
                    at_hedge = hedge_at is not None and hedge_at < within_s
                    call.decided_within_s = hedge_at if at_hedge else within_s
                if not attempts.racing:
                    self._settle(attempts, served)
                return served
        if not attempts.racing:
            self._settle(attempts, None)
            return None
        return _GAVE_UP if attempts.busy == 0 else None

    async def _checked(
        self, call: CallContext, served: _Served, timeout_s: float, tally: _Tally
    ) -> _Served | None:
        """`served` once its answer is checked by the call's plan (router/proving.py); None when
        the check refuted it, and the next route is tried.

        A refuted node is reported only once another provider's answer to the same call held
        the same proof: the caller chose the call, and a proof that fails for every node alike
        (a chain whose headers or transactions are of a kind the proofs do not know) says
        nothing of the nodes. Nothing a caller sends may change a node's standing."""
        prover, plan, route = self._prover, call.proof, served.route
        if prover is None or plan is None or route is None:
            return served
        outcome = await prover.check(
            call, plan, route, served.answer, timeout_s, lambda cost: self._hold_check(call, cost)
        )
        if outcome.false is not None:
            tally.refuted.append((served, outcome.false))
            return None
        served.verified = outcome.verified
        if outcome.held and tally.refuted:
            self._report_refuted(call, route, tally)
        return served

    def _report_refuted(self, call: CallContext, proven: Route, tally: _Tally) -> None:
        """The nodes whose answers were refuted, now that another provider's held the same
        proof: cooled down, and cordoned with the reason."""
        for refuted, why in tally.refuted:
            route = refuted.route
            if route is None or route.node.provider_id == proven.node.provider_id:
                continue  # one provider's nodes do not vouch against each other
            node_id = route.node.node_id
            self._metrics.checked(call.request.chain_id, call.call.method, node_id, "false")
            self._node_checks.add(node_id, NodeCheck.PROOF_FAILED)
            self._cooldowns.failed(node_id)
            if self._answered_false is not None:
                self._answered_false(route.node, f"a proof failed: {why}")
        tally.refuted.clear()

    def _note_checked(self, call: CallContext, verified: Verified | None) -> None:
        """The served answer's check: counted, said in `X-Verified`, and an answer not checked
        is not kept (the cache keeps only what was proven or agreed)."""
        outcome = "unproven" if verified is None else verified.value
        node_id = -1 if call.served_by is None else call.served_by.node.node_id
        self._metrics.checked(call.request.chain_id, call.call.method, node_id, outcome)
        if verified is Verified.PROOF and node_id >= 0:
            self._node_checks.add(node_id, NodeCheck.PROOF_CHECKED)
        if verified is None:
            call.cache_pin = None
            return
        call.checked(verified)

    def _made(
        self, call: CallContext, node_id: int, timeout_s: float, work: Work, attempts: _Attempts
    ) -> tuple[bytes | Failure, float] | None:
        """What the native server's attempt at this call on this node gave, if it made one and
        it stands for this attempt (once): a time-out stands only for an attempt that would have
        waited no longer. One cut off at a raced read's hedge delay does not, but its time then
        counts among the node's answer times: left out, the slow answers would never be
        recorded, and the hedge delay would drift below the quantile it is set at."""
        made_attempts = call.request.attempts
        if not made_attempts:
            return None
        for index, made in enumerate(made_attempts):
            if made.call == call.index and made.node_id == node_id:
                del made_attempts[index]
                break
        else:
            return None
        failure = made.failure
        timed_out = failure is not None and failure.kind == FailureKind.TIMEOUT
        if timed_out and timeout_s > made.timeout_s:
            if attempts.racing and made.elapsed_s >= made.timeout_s:
                self._observe_answer(node_id, work, made.elapsed_s)
            return None
        if failure is not None:
            return failure, made.elapsed_s
        if made.answer is None:
            return None
        return made.answer, made.elapsed_s

    def _hold_more(self, call: CallContext, route: Route) -> bool:
        """A route dearer than what the call holds (failing over, or a hedge, to a dearer node)
        is taken only once the difference is held too: the customer is never charged past the
        balance the check saw (design notes, "Money"). The free tier holds nothing."""
        access = call.request.access
        if access is None:
            return True
        more = route.price.cost_nano - call.held_nano
        if not self._credits.hold(access.customer_id, more, check=not access.bypass_credit_check):
            return False
        call.held_nano += more
        return True

    def _hold_check(self, call: CallContext, cost_nano: int) -> bool:
        """A call a check of `call`'s answer is about to send holds its price, as any call does
        before it is sent: the customer is never charged past the balance the holds saw. On the
        free tier nothing is held, nor billed: its checks' calls are the operator's cost, as its
        own calls are. A call dearer than the key's `max_price_per_call` is not sent: the
        answer is then served unproven."""
        access = call.request.access
        if access is None:
            return True
        if not within_cap(access, cost_nano):
            return False
        if not self._credits.hold(
            access.customer_id, cost_nano, check=not access.bypass_credit_check
        ):
            return False
        call.checks_held_nano += cost_nano
        return True

    def _judge(
        self,
        route: Route,
        answer: bytes | Failure,
        call: CallContext,
        tally: _Tally,
        elapsed: float,
        work: Work,
        racing: bool,
    ) -> _Served | None:
        """What one node's answer means: the call served (or the caller's fault), or a failure
        noted in `tally` and the next route to try."""
        node_id = route.node.node_id
        if isinstance(answer, Failure):
            self._failed(node_id, answer, tally, work)
            return None
        verdict, error = judge_answer(answer, call.call.id)
        tx_hash = call.tx_hash
        if tx_hash is not None and verdict is Verdict.ANSWER:
            accepted = already_known(error) if error is not None else echoes_in(answer, tx_hash)
            if error is None and not accepted:  # another transaction's hash: not believed
                self._cooldowns.failed(node_id)
                return None
            if accepted:
                if not racing:
                    self._node_answered(node_id, work, elapsed)
                hashed = b'{"jsonrpc":"2.0","id":' + call.call.id_json
                hashed += b',"result":"' + tx_hash.encode() + b'"}'
                return _Served(route, Scenario.FIRST_CHOICE, 200, hashed, elapsed)
        if verdict is Verdict.NOT_AN_ANSWER or (
            call.call.method == "eth_chainId"
            and error is None
            and names_other_chain(answer, call.request.chain_id)
        ):
            self._cooldowns.failed(node_id)
            return None
        fault = None if error is None else classify(error)
        if fault is not None:
            if fault.fault in _MISSING:
                tally.missing = answer
            self._faulted(route, fault, call, tally)
            return None
        if verdict is Verdict.REJECTED:
            tally.rejections.append((node_id, f"JSON-RPC error {error.get('code')!r}"))
            return None
        if tally.rejections or tally.suspects:  # this node did what the failed ones would not
            self._cool_down(tally, suspects=True)
        if verdict is Verdict.CALLERS_FAULT:
            return _Served(
                None, Scenario.REJECTED, 200, _under_callers_id(error, call.call.id_json)
            )
        expected = call.expected
        if (expected.head_from is not None or expected.present_from is not None) and doubted(
            call.call.method, answer, self._health.node_head(node_id), expected
        ):
            tally.doubted.append(_Served(route, Scenario.FIRST_CHOICE, 200, answer, elapsed))
            return None
        if not racing:  # in a race, the winner's answer is recorded once the race is judged
            self._node_answered(node_id, work, elapsed)
        return _Served(route, Scenario.FIRST_CHOICE, 200, answer, elapsed)

    def _judge_overtaken(self, attempts: _Attempts, winner: _Served) -> None:
        """The attempts still in flight when one answered were cancelled. One sent before the
        winner (overtaken), whose node had taken longer than usual while the winner answered in
        its usual time, counts against its node: overtaken `OVERTAKEN_STRIKES` times in a row,
        it is cooled down. A call slow everywhere (heavy for every node: the caller's doing)
        counts against none."""
        recent, work, now, route = self._recent, attempts.work, self._clock(), winner.route
        if route is None or not recent.usual(route.node.node_id, work, winner.elapsed):
            return
        for loser, sent in attempts.in_flight.values():
            node_id, took = loser.node.node_id, now - sent
            if took <= winner.elapsed or recent.usual(node_id, work, took):
                continue
            if recent.overtaken(node_id):
                self._cooldowns.failed(node_id)

    def _fail(self, call: CallContext, tally: _Tally) -> None:
        """No route answered: tell the client why (spec section 7)."""
        rejected_alike = tally.rejected_alike()
        if rejected_alike is None:
            self._cool_down(tally)
        if tally.unaffordable and rejected_alike is None:
            # A route was skipped for the balance, and the nodes tried did not find the request
            # at fault: topping up is the way on.
            failure = RpcError(
                402,
                RpcCode.INSUFFICIENT_CREDITS,
                "insufficient credits: the routes left cost more than the balance",
            )
            call.end(Scenario.INSUFFICIENT_CREDITS, 402, error_response(failure, call.call.id_json))
            return
        if tally.faults and len(tally.faults) == tally.tried:
            if tally.missing is not None and self._past_the_head(call, tally.faults):
                # Not yet: what the nodes at the head say of a block they do not have, as
                # they say it (unbilled, like every node's failure to serve a call).
                answer = _under_callers_id(orjson.loads(tally.missing)["error"], call.call.id_json)
                call.end(Scenario.INCAPABLE, 200, answer)
                return
            refusal = self._explain(call, tally.faults)
            if refusal is not None:
                call.end(
                    Scenario.INCAPABLE,
                    refusal.http_status,
                    error_response(refusal, call.call.id_json),
                )
                return
        failure = _failure_for(tally, rejected_alike)
        scenario = Scenario.RATE_LIMITED if failure.http_status == 429 else Scenario.ALL_FAILED
        if failure.http_status == 429:
            call.retry_after_s = tally.free_in
        call.end(scenario, failure.http_status, error_response(failure, call.call.id_json))

    async def _split(self, call: CallContext) -> None:
        """An `eth_getLogs` range wider than any node serves, asked in consecutive ranges (each
        routed and failed over on its own, `split_concurrency` at once) and answered as one: the
        logs in block order, none twice. Billed per range served; if any range cannot be
        served, the call fails with that range's error and nothing is billed. The ranges share
        the call's deadline: none is started once it has passed."""
        parts = [self._part(call, needs) for needs in call.split_needs()]
        step, started = self._limits.split_concurrency, self._clock() - call.request.waited_s
        for first in range(0, len(parts), step):
            if self._clock() - started >= self._limits.deadline_s:
                failure = RpcError(504, RpcCode.ALL_NODES_FAILED, "upstream providers timed out")
                call.end(Scenario.ALL_FAILED, 504, error_response(failure, call.call.id_json))
                return
            await Gather([self.run(part) for part in parts[first : first + step]])
        call.attempts = sum(part.attempts for part in parts)
        merged = _merged_logs(parts)
        if merged is None:
            failed = next(p for p in parts if p.served_by is None or not _is_result(p.answer))
            scenario = failed.scenario or Scenario.ALL_FAILED
            if failed.served_by is not None:  # a node's error answer: not billed in a split
                scenario = Scenario.ALL_FAILED
            call.end(scenario, failed.status, failed.answer)
            return
        call.served_by = parts[0].served_by
        call.ranges_served_by = tuple(part.served_by for part in parts if part.served_by)
        call.charged_nano = sum(part.cost_nano for part in parts)
        call.request.split_ranges += len(parts)
        answer = b'{"jsonrpc":"2.0","id":' + call.call.id_json + b',"result":' + merged + b"}"
        call.end(Scenario.SPLIT, 200, answer)

    def _part(self, call: CallContext, needs: Needs) -> CallContext:
        rpc = call.call
        start, end = needs.history_from, needs.history_to
        assert start is not None
        assert end is not None
        query = {**rpc.params[0], "fromBlock": hex(start), "toBlock": hex(end)}  # type: ignore[index]
        body = (
            b'{"jsonrpc":"2.0","id":'
            + rpc.id_json
            + b',"method":"eth_getLogs","params":'
            + orjson.dumps([query])
            + b"}"
        )
        part = CallContext(call.request, rpc, body, call.index, needs)
        part.routes = call.routes
        # The routes the credit hold priced this range at (router/stages/credit.py).
        part.ordered = self._capabilities.eligible(call.ordered, needs, rpc.method)[0]
        # Its share of the whole call's hold, which covers its dearest route.
        part.held_nano = max((route.price.cost_nano for route in part.ordered), default=0)
        return part

    def _faulted(self, route: Route, fault: NodeFault, call: CallContext, tally: _Tally) -> None:
        """A node said it cannot serve the call: the next one is tried. Its own rate limit cools
        it down; an internal error does if another node answers (as a rejection does); what it
        lacks is learned (router/capabilities.py)."""
        if fault.fault is Fault.RATE_LIMITED:
            tally.rate_limited += 1
            tally.held_back(self._cooldowns.failed(route.node.node_id))
            return
        if fault.fault is Fault.NODE_ERROR:
            tally.rejections.append((route.node.node_id, f"internal error: {fault.message[:80]}"))
            return
        tally.faults.append(fault)
        self._capabilities.learn(route.node, fault, call.needs, call.call.method)

    def _explain(self, call: CallContext, faults: list[NodeFault]) -> RpcError | None:
        """Why no node could answer, when every node tried said it could not: what was learned
        may now show that none can (-32011, -32012, ...)."""
        book, method, needs = self._capabilities, call.call.method, call.needs
        able, lacking = book.eligible(call.routes, needs, method)
        chain_id = call.request.chain_id
        if not able and lacking:
            return book.refusal(call.routes, needs, method, chain_id, lacking)
        last = faults[-1]
        return RpcError(
            424,
            RpcCode.ALL_NODES_FAILED,
            f"every node tried failed to serve the call; the last said: {last.message[:200]}",
            data={"fault": last.fault.value},
        )

    def _past_the_head(self, call: CallContext, faults: list[NodeFault]) -> bool:
        """Whether every node tried lacked a block the call names past the chain's head."""
        head = self._health.chain_head(call.request.chain_id)
        newest = max(call.needs.blocks, default=None)
        return (
            head is not None
            and newest is not None
            and newest > head
            and all(fault.fault in _MISSING for fault in faults)
        )

    def _failed(self, node_id: int, failure: Failure, tally: _Tally, work: Work) -> None:
        status, kind = failure.status, failure.kind
        if kind == FailureKind.TIMEOUT:
            tally.timed_out += 1
        if work is not Work.QUICK and kind in _CALLS_SIZE:
            tally.suspects.append(node_id)  # the caller's doing if it is so on every node
        elif kind == FailureKind.RATE_LIMITED:
            tally.rate_limited += 1
            tally.held_back(self._cooldowns.failed(node_id))
        elif kind != FailureKind.TIMEOUT and status is not None and 400 <= status < 500:
            tally.rejections.append((node_id, f"HTTP {status}"))
        else:
            self._cooldowns.failed(node_id)

    def _cool_down(self, tally: _Tally, *, suspects: bool = False) -> None:
        """Cool down the nodes that rejected the call, and with `suspects` (another node served
        it) those that were slow or answered too much to it."""
        for node_id, _ in tally.rejections:
            self._cooldowns.failed(node_id)
        tally.rejections.clear()
        if suspects:
            for node_id in tally.suspects:
                self._cooldowns.failed(node_id)
            tally.suspects.clear()


def _providers_apart(routes: Sequence[Route]) -> list[Route]:
    """The routes in their order, but the first of another provider than the first route's
    moved second (where there is one)."""
    ordered = list(routes)
    first = ordered[0].plan.provider_id
    other = next((i for i, r in enumerate(ordered) if r.plan.provider_id != first), None)
    if other is not None and other > 1:
        ordered.insert(1, ordered.pop(other))
    return ordered


def echoes_in(answer: bytes, tx_hash: str) -> bool:
    """Whether a node's answer (with a result) is the transaction's hash."""
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and echoes(parsed.get("result"), tx_hash)


def _is_result(answer: bytes) -> bool:
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and isinstance(parsed.get("result"), list)


def _merged_logs(parts: list[CallContext]) -> bytes | None:
    """The logs of every part, in order, each once (by block hash and log index); None unless
    every part was served with a list of logs."""
    merged: list[object] = []
    seen: set[tuple[object, object]] = set()
    for part in parts:
        if part.served_by is None:
            return None
        try:
            answer = orjson.loads(part.answer)
        except orjson.JSONDecodeError:
            return None
        logs = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(logs, list):
            return None
        for log in logs:
            identity = None
            if isinstance(log, dict):
                block_hash, index = log.get("blockHash"), log.get("logIndex")
                if isinstance(block_hash, str) and isinstance(index, str):
                    identity = (block_hash, index)
            if identity is not None and identity in seen:
                continue
            if identity is not None:
                seen.add(identity)
            merged.append(log)
    return orjson.dumps(merged)


def _failure_for(tally: _Tally, rejected_alike: str | None) -> RpcError:
    if tally.tried == 0:
        if tally.skipped:
            return RpcError(
                429,
                RpcCode.ALL_NODES_ON_COOLDOWN,
                "all nodes are on cooldown or at their rate limits; retry shortly",
            )
        return RpcError(424, RpcCode.NO_PROVIDERS_AVAILABLE, "no providers available")
    if rejected_alike is not None:
        return RpcError(
            424,
            RpcCode.ALL_NODES_FAILED,
            f"every upstream provider tried rejected this request ({rejected_alike})",
        )
    if tally.rate_limited == tally.tried:
        return RpcError(
            429, RpcCode.ALL_NODES_ON_COOLDOWN, "all upstream providers are rate limited"
        )
    if tally.timed_out == tally.tried:
        return RpcError(504, RpcCode.ALL_NODES_FAILED, "upstream providers timed out")
    return RpcError(424, RpcCode.ALL_NODES_FAILED, f"all {tally.tried} upstream providers failed")


def _under_callers_id(error: object, id_json: bytes) -> bytes:
    """A node's verdict that the request is invalid, under the caller's id (the node may have
    answered with id null)."""
    return b'{"jsonrpc":"2.0","id":' + id_json + b',"error":' + encode_json(error) + b"}"


def _plan_credits(route: Route, amount: int, taken_s_ago: float = 0.0) -> Bucket | None:
    plan, cost = route.plan, route.price.cost_nano
    if plan.credits_nano and plan.credits_interval_s and cost:
        return Bucket(
            f"plan-credits:{plan.plan_id}",
            plan.credits_nano,
            plan.credits_interval_s,
            amount,
            taken_s_ago,
        )
    return None


def _given_back(buckets: list[Bucket]) -> list[Bucket]:
    """What an attempt that took its limits and was never sent gives back: all of it."""
    return [Bucket(b.key, b.limit, b.interval_s, -b.amount) for b in buckets]


def credits_given_back(route: Route, taken_s_ago: float) -> Bucket | None:
    """What an attempt that got no answer gives back: its price, to the plan's credit limit,
    into the slot it was taken in `taken_s_ago` seconds before. (Its requests stay counted: the
    node, or its provider's limiter, saw them.)"""
    return _plan_credits(route, -route.price.cost_nano, taken_s_ago)


def route_buckets(route: Route) -> list[Bucket]:
    """The limits one call on `route` counts against: node, plan requests, plan credits, method."""
    buckets = []
    node, plan, price = route.node, route.plan, route.price
    if node.rate_limit > 0:
        buckets.append(Bucket(f"node:{node.node_id}", node.rate_limit, node.rate_limit_interval_s))
    if plan.requests and plan.requests_interval_s:
        buckets.append(Bucket(f"plan:{plan.plan_id}", plan.requests, plan.requests_interval_s))
    if (credits := _plan_credits(route, price.cost_nano)) is not None:
        buckets.append(credits)
    if price.rate_limit and price.rate_limit_interval_s:
        chain = "*" if price.chain_id is None else price.chain_id
        buckets.append(
            Bucket(
                f"method:{price.plan_id}:{price.node_target_type}:{chain}:{price.method}",
                price.rate_limit,
                price.rate_limit_interval_s,
            )
        )
    return buckets
