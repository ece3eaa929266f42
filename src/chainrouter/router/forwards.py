"""Repeated forwards (docs/router.md, "Repeated forwards"): a call the pipeline forwarded to its
first choice of node, which answered it at the first try, is sent by the native server alone to
the same node when the same request comes again, and answered once this module has billed it.
The pipeline stays the one place that decides; this is its decision, repeated for a while.

The pipeline marks a call `Forwardable` (pipeline.py) when nothing but the snapshot, the node's
health and the customer's credits could decide it otherwise: a read (never a write: the call of a
failed repeat may be sent again by the pipeline), from a key without a rate limit of its own, with
the request log off; the first route of its order answered it at once, with a `result`, and that
route has no rate limit (node, plan or method); the answer is never kept by the response cache, nor
a split `eth_getLogs`, nor an `eth_chainId` (whose answer the router checks). The server keys it as
a replay (every byte the pipeline read but the call's id: `native/src/replay.rs`) and keeps it for
`cache_replay_max_age_s` at most; every installed snapshot and purge clears it.

Nothing is answered before it is billed. When the node has answered a repeat, the server calls
`settle` (on its thread, under the GIL), which checks again what may have changed since the
pipeline decided (the node's cooldown, sync and first health check; the key's seen head for a
call at the head; the credits) and then does what the closing stages do for a served call:
charges the route's price, meters the call (its journal line written before the answer leaves),
counts the attempt and the request, records the node's answer time and the key's head. If
anything has changed, or the node did not answer plainly (a failure, an error, a time-out at the
time the pipeline would have tried another node), `settle` says no and the pipeline answers the
request: the node's failure is never billed. A failure of the node stands for the pipeline's
first attempt, which is not sent again (`driver::after_failed` in native/src/driver.rs).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from chainrouter.domain.cacheable import CachePrices
from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work
from chainrouter.domain.routing import Route
from chainrouter.router.contract import HttpAnswer, HttpRequest
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.flights import Flights, Landed
from chainrouter.router.health import HealthMonitor
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.replay import MAX_BODY_BYTES, memo_key
from chainrouter.router.seen_heads import SeenHeads
from chainrouter.router.stages.cache import result_member
from chainrouter.router.stages.consistent_head import HEAD_METHOD, head_in

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Forwardable:
    """A call the native server may send again itself: what it sends, and what settling bills."""

    customer_id: int
    key_id: int
    chain_id: int
    method: str
    bypass_credit_check: bool
    route: Route  # its node, plan and price
    work: Work
    at_head: bool  # reads the head: the key's seen head is checked again when it is settled
    sent: bytes  # the body the node was sent
    within_s: float  # how long the pipeline waited on the node before it would try another
    # The call's flight (its `cache_key`) when identical calls in flight share one attempt
    # (router/flights.py); None: not coalesced.
    flight: str | None
    # The nodes of the call's other routes: one at the key's head takes a call at the head
    # from a node behind it (router/stages/consistent_head.py).
    peers: tuple[int, ...] = ()
    # `within_s` is the hedge delay of a raced read, shorter than an attempt's time-out.
    at_hedge: bool = False


# A repeat's fields as the server hands them over (`contract.SETTLE_FORWARD`).
Repeat = tuple[int, float, bool, int | None, int, bytes | None, list[Any] | None]
# A grant the memo no longer holds (replaced when it aged, or evicted) still bills the repeats
# already in flight under it for this long; a `clear` ends it at once.
_RETIRING_S = 5.0


class Forwards:
    """The Python side of the forwards a native server's memo repeats."""

    def __init__(
        self,
        memo: Any,
        tokens: Iterator[int],
        *,
        meter: UsageMeter,
        credits: CreditView,
        cooldowns: MemoryCooldowns,
        health: HealthMonitor,
        seen_heads: SeenHeads,
        metrics: RouterMetrics,
        cache_prices: CachePrices | None = None,
        flights: Flights | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._memo = memo
        self._tokens = tokens  # shared with the replays: one memo, one token per entry
        self._meter = meter
        self._credits = credits
        self._cooldowns = cooldowns
        self._health = health
        self._seen_heads = seen_heads
        self._metrics = metrics
        self._prices = cache_prices or CachePrices()
        self._flights = flights
        self._clock = clock
        self._grants: dict[int, Forwardable] = {}  # token -> the forward the memo repeats
        # Tokens the memo let go of (replaced, evicted) -> the grant and when it went.
        self._retiring: dict[int, tuple[Forwardable, float]] = {}
        self.repeated = 0  # calls answered by a repeat, for the tests and the benchmark

    @staticmethod
    def tokens() -> Iterator[int]:
        return itertools.count(1)

    def install(
        self,
        request: HttpRequest,
        answer: HttpAnswer,
        forwardable: Forwardable,
        generation: int,
    ) -> None:
        """Hand the server the forward that answered `request` with `answer`, decided in
        `generation`, to repeat for the same request."""
        body = request.body
        if body is None or len(body) > MAX_BODY_BYTES or answer.status != 200:
            return
        token = next(self._tokens)
        headers = [(name, value) for name, value in answer.headers if name != "x-batch-id"]
        self._grants[token] = forwardable
        installed = False
        try:
            installed = self._memo.install_forward(
                token=token,
                generation=generation,
                **memo_key(request),
                url=forwardable.route.node.url,
                sent=forwardable.sent,
                answer=answer.body,
                timeout_s=forwardable.within_s,
                headers=headers,
                flight=forwardable.flight,
                hand_head=forwardable.method == HEAD_METHOD,
            )
        except Exception:  # the answer is served all the same, only not repeated
            log.exception("a forward could not be handed to the native server")
        finally:
            if not installed:
                del self._grants[token]

    def forget(self, tokens: list[int]) -> None:
        """Entries the memo no longer holds (evicted, replaced when they aged, revoked): their
        repeats in flight are still billed, for a while."""
        now = self._clock()
        for token in tokens:
            grant = self._grants.pop(token, None)
            if grant is not None:
                self._retiring[token] = (grant, now)
        if self._retiring:
            oldest = now - _RETIRING_S
            for token in [t for t, (_, at) in self._retiring.items() if at < oldest]:
                del self._retiring[token]

    def clear(self) -> None:
        """Every entry was forgotten at once (a new snapshot, a purge): no repeat still in
        flight is billed; the pipeline answers them, under what is now."""
        self._grants.clear()
        self._retiring.clear()

    def _grant(self, token: int) -> Forwardable | None:
        grant = self._grants.get(token)
        if grant is None:
            retiring = self._retiring.get(token)
            return None if retiring is None else retiring[0]
        return grant

    def _drop(self, token: int) -> None:
        """The server forgets a grant when its repeat is refused: so does this side."""
        self._grants.pop(token, None)
        self._retiring.pop(token, None)

    def settle(self, repeats: list[Repeat]) -> list[bool]:
        """The server's repeats whose nodes have answered, each `(token, elapsed_s, answered,
        head, leader, answer, followers)` (`contract.SETTLE_FORWARD`): plainly if `answered`;
        `head` the block an `eth_blockNumber`'s answer names; `leader` 0 for a repeat sent to its
        node, else the token of the repeat whose answer it joined; `answer` and `followers` when
        pipeline calls follow the repeat (router/flights.py). For each, True once billed (its
        answer then goes to the client), False for the pipeline to answer it.

        The server calls this with every repeat waiting at once: the repeats of one grant are
        checked, charged and metered together, in one journal line, before any of their answers
        leaves. A grant whose bookkeeping fails is logged and its repeats go to the pipeline;
        the others stand."""
        verdicts = [False] * len(repeats)
        grants: dict[int, Forwardable] = {}  # token -> its grant, as the group found it
        try:
            self._settle(repeats, verdicts, grants)
        finally:  # whatever happened, no pipeline call waits on a repeat for ever
            for index, repeat in enumerate(repeats):
                if repeat[6]:
                    self._release(repeat, verdicts[index], grants.get(repeat[0]))
        return verdicts

    def _settle(
        self, repeats: list[Repeat], verdicts: list[bool], grants: dict[int, Forwardable]
    ) -> None:
        led: dict[int, list[int]] = {}  # token -> its repeats sent to its node
        joined: dict[int, list[int]] = {}  # token -> its repeats that joined another in flight
        for index, (token, elapsed_s, answered, head, leader, _, _) in enumerate(repeats):
            grant = grants.get(token) or self._grant(token)
            if grant is None:
                continue  # forgotten or dropped: the pipeline's
            grants[token] = grant
            if not answered:
                if not leader:
                    self._unanswered(grant, elapsed_s)
                    self._drop(token)
                continue
            if head is not None and grant.method == HEAD_METHOD and self._older(grant, head):
                continue  # an older head than the key has seen: the pipeline's to answer
            (joined if leader else led).setdefault(token, []).append(index)
        billed = 0
        for token, indices in led.items():
            billed += self._bill(token, grants[token], indices, repeats, verdicts, joined=False)
        for token, indices in joined.items():
            billed += self._bill(token, grants[token], indices, repeats, verdicts, joined=True)
        if billed:
            self._metrics.request("keyed", 200, billed)
            self.repeated += billed

    def _bill(
        self,
        token: int,
        grant: Forwardable,
        indices: list[int],
        repeats: list[Repeat],
        verdicts: list[bool],
        *,
        joined: bool,
    ) -> int:
        """Charge and meter a grant's repeats of this group (its node's answers, or, `joined`,
        the answers of repeats in flight they joined, at the cache price); set their verdicts.
        How many were billed."""
        try:
            if not self._stands(grant, repeats, indices, joined=joined):
                self._drop(token)
                return 0
            price = (
                self._prices.price_nano(grant.chain_id, grant.method)
                if joined
                else grant.route.price.cost_nano
            )
            paid = self._charge(token, grant, price, len(indices))
            if not paid:
                return 0
            indices = indices[:paid]
            self._meter.record(
                grant.customer_id,
                grant.key_id,
                grant.chain_id,
                grant.method,
                Scenario.CACHE if joined else Scenario.FIRST_CHOICE,
                price,
                0 if joined else grant.route.plan.plan_id,
                count=paid,
            )
        except Exception:  # nothing of this grant was metered: the pipeline answers them
            log.exception("repeats of a forward could not be billed; the pipeline answers them")
            self._drop(token)
            return 0
        for index in indices:
            verdicts[index] = True
        try:  # billed: what follows only records it
            self._record(grant, indices, repeats, joined=joined)
        except Exception:
            log.exception("repeats of a forward were billed but not all recorded")
        return paid

    def _charge(self, token: int, grant: Forwardable, price: int, count: int) -> int:
        """How many of `count` repeats at `price` the credits pay for (all unless they ran
        short: then the grant is dropped, and the pipeline answers the next one)."""
        customer, check = grant.customer_id, not grant.bypass_credit_check
        if self._credits.charge(customer, price * count, check=check):
            return count
        self._drop(token)
        paid = 0
        while paid < count and self._credits.charge(customer, price, check=check):
            paid += 1
        return paid

    def _record(
        self, grant: Forwardable, indices: list[int], repeats: list[Repeat], *, joined: bool
    ) -> None:
        """What the closing stages record of served calls, for a grant's billed repeats."""
        node_id, chain_id, method = grant.route.node.node_id, grant.chain_id, grant.method
        heads = [block for index in indices if (block := repeats[index][3]) is not None]
        if joined:
            if self._flights is not None:
                for _ in indices:
                    self._flights.count(chain_id, method)
        else:
            times = [repeats[index][1] for index in indices]
            self._metrics.answered(node_id, times)
            self._health.observe_answers(node_id, grant.work, times)
            self._cooldowns.succeeded(node_id)
            repeated, stat = self._metrics.repeated, (chain_id, method)
            repeated[stat] = repeated.get(stat, 0) + len(indices)
        if heads:
            head = max(heads)
            seen = self._seen_heads.seen(grant.key_id, chain_id)
            if seen is None or head > seen:
                node = None if joined else grant.route.node
                self._seen_heads.saw(grant.key_id, chain_id, head, node)

    def _unanswered(self, grant: Forwardable, elapsed_s: float) -> None:
        """A repeat sent to its node got no plain answer. One cut off at its hedge delay, when
        the pipeline would have raced another node beside it, counts, as that time, among the
        node's answer times: left out, the slow answers would never be recorded, and its hedge
        delay would drift below the quantile it is set at. One that timed out as an attempt
        does not, as the pipeline's own time-outs do not (counted, it would raise the node's
        next time-out). Any other outcome is the pipeline's to judge: a failure as its first
        attempt (the server hands it over), an answer when it asks again."""
        if grant.at_hedge and elapsed_s >= grant.within_s:
            self._health.observe_answers(grant.route.node.node_id, grant.work, [elapsed_s])

    def _older(self, grant: Forwardable, head: int) -> bool:
        seen = self._seen_heads.seen(grant.key_id, grant.chain_id)
        return seen is not None and head < seen

    def _stands(
        self, grant: Forwardable, repeats: list[Repeat], indices: list[int], *, joined: bool
    ) -> bool:
        """Whether the pipeline would still decide as the grant says: for repeats sent to the
        node, its first route (no failure on record, in sync, its first health check answered,
        and, for a call at the head, not behind the head the key has seen while another of the
        call's routes is at it: router/stages/consistent_head.py); for repeats that joined one
        in flight, that the answer they share is known to be at or past the head the key has
        seen, as a call that joins must (router/flights.py)."""
        if joined:
            if not grant.at_head:
                return True
            seen = self._seen_heads.seen(grant.key_id, grant.chain_id)
            if seen is None:
                return True
            leader = self._grant(repeats[indices[0]][4])
            head = self._health.node_head(leader.route.node.node_id) if leader else None
            if grant.method == HEAD_METHOD:
                head = repeats[indices[0]][3]
            return head is not None and head >= seen
        node_id, health = grant.route.node.node_id, self._health
        if (
            not self._cooldowns.clean(node_id)
            or node_id in health.out_of_sync
            or node_id in health.first_check_out
        ):
            return False
        if not grant.at_head:
            return True
        seen = self._seen_heads.seen(grant.key_id, grant.chain_id)
        node_head = health.node_head
        if seen is None or (node_head(node_id) or -1) >= seen:
            return True
        return not any((node_head(peer) or -1) >= seen for peer in grant.peers)

    def _release(self, repeat: Repeat, billed: bool, grant: Forwardable | None) -> None:
        """The pipeline calls that followed a repeat (router/flights.py) take its answer, as
        the calls that join a pipeline call take the leader's; none if it was not billed."""
        _, _, answered, _, _, answer, followers = repeat
        landed = None
        if billed and answered and answer is not None and grant is not None:
            try:
                landed = self._landed(grant, answer)
            except Exception:  # they are attempted on their own
                log.exception("the answer of a repeated forward could not be shared")
        for future in followers or ():
            try:
                future.set_result(landed)
            except Exception:  # a follower already released: nothing waits on it any more
                log.exception("a call following a repeated forward could not be released")

    def _landed(self, grant: Forwardable, answer: bytes) -> Landed | None:
        member = result_member(answer)
        if member is None:
            return None
        if grant.method == HEAD_METHOD:
            head = head_in(answer)
        else:
            head = self._health.node_head(grant.route.node.node_id)
        return Landed(Scenario.FIRST_CHOICE, 200, member, None, head)

    def held(self) -> int:
        """Forwards the server may repeat now, as far as Python knows."""
        return len(self._grants)
