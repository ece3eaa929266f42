"""Repeated forwards (docs/router.md, "Repeated forwards"): a call the pipeline forwarded to its
first choice of node, which answered it at the first try, is sent by the native server alone to
the same node when the same request comes again, and answered once this module has billed it.
The pipeline stays the one place that decides; this is its decision, repeated for a while.

The pipeline marks a call `Forwardable` (pipeline.py) when nothing but the snapshot, the node's
health and the customer's credits could decide it otherwise: a read (never a write: a repeat may
be sent again by the pipeline), from a key without a rate limit of its own, with the request log
off; the first route of its order answered it at once, with a `result`, and that route has no
rate limit (node, plan or method); the answer is never kept by the response cache, nor a split
`eth_getLogs`, nor an `eth_chainId` (whose answer the router checks). The server keys it as a
replay (every byte the pipeline read but the call's id: `native/src/replay.rs`) and keeps it for
`cache_replay_max_age_s` at most; every installed snapshot and purge clears it.

Nothing is answered before it is billed. When the node has answered a repeat, the server calls
`settle` (on its thread, under the GIL), which checks again what may have changed since the
pipeline decided (the node's cooldown, sync and first health check; the key's seen head for a
call at the head; the credits) and then does what the closing stages do for a served call:
charges the route's price, meters the call (its journal line written before the answer leaves),
counts the attempt and the request, records the node's answer time and the key's head. If
anything has changed, or the node did not answer plainly (a failure, an error, a time-out at the
time the pipeline would have tried another node), `settle` says no and the pipeline answers the
request as if the server had never tried: the node's failure is never billed.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work
from chainrouter.domain.routing import Route
from chainrouter.router.contract import HttpAnswer, HttpRequest
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.health import HealthMonitor
from chainrouter.router.metering import CreditView, UsageMeter
from chainrouter.router.metrics import RouterMetrics
from chainrouter.router.replay import MAX_BODY_BYTES
from chainrouter.router.seen_heads import SeenHeads
from chainrouter.router.stages.consistent_head import HEAD_METHOD

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
    alone: bool  # coalesced: identical calls at once are left to the pipeline, to share one


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
    ) -> None:
        self._memo = memo
        self._tokens = tokens  # shared with the replays: one memo, one token per entry
        self._meter = meter
        self._credits = credits
        self._cooldowns = cooldowns
        self._health = health
        self._seen_heads = seen_heads
        self._metrics = metrics
        self._grants: dict[int, Forwardable] = {}  # token -> the forward the memo repeats
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
                path=request.path,
                origin=request.origin,
                referer=request.referer,
                content_type=request.content_type,
                body=body,
                url=forwardable.route.node.url,
                sent=forwardable.sent,
                answer=answer.body,
                timeout_s=forwardable.within_s,
                headers=headers,
                alone=forwardable.alone,
                hand_head=forwardable.method == HEAD_METHOD,
            )
        except Exception:  # the answer is served all the same, only not repeated
            log.exception("a forward could not be handed to the native server")
        finally:
            if not installed:
                del self._grants[token]

    def forget(self, tokens: list[int]) -> None:
        """Entries the memo no longer holds (cleared, evicted, replaced, revoked)."""
        for token in tokens:
            self._grants.pop(token, None)

    def settle(self, repeats: list[tuple[int, float, bool, int | None]]) -> list[bool]:
        """The nodes have answered these repeats, each `(token, elapsed_s, answered, head)`:
        plainly if `answered`; `head`, the block an `eth_blockNumber`'s answer names. For each,
        True once billed (its answer then goes to the client), False for the pipeline to answer
        it.

        The server calls this with every repeat waiting at once (native/src/forward.rs): the
        repeats of one grant are checked, charged and metered together, in one journal line,
        before any of their answers leaves."""
        verdicts = [False] * len(repeats)
        answered_by: dict[int, tuple[Forwardable, list[int]]] = {}  # token -> its repeats
        for index, (token, elapsed_s, answered, _) in enumerate(repeats):
            grant = self._grants.get(token)
            if grant is None:
                found = answered_by.get(token)
                if found is None:
                    continue  # forgotten or dropped: the pipeline's
                grant = found[0]  # dropped by a failed repeat in this group
            if not answered:
                self._metrics.attempt(grant.route.node.node_id, False, elapsed_s)
                self._grants.pop(token, None)  # the server forgets it too
                continue
            found = answered_by.get(token)
            if found is None:
                answered_by[token] = (grant, [index])
            else:
                found[1].append(index)
        billed = 0
        for token, (grant, indices) in answered_by.items():
            indices = self._charge(token, grant, indices)
            if not indices:
                continue
            billed += self._record(grant, indices, repeats)
            for index in indices:
                verdicts[index] = True
        if billed:
            self._metrics.request("keyed", 200, billed)
            self.repeated += billed
        return verdicts

    def _charge(self, token: int, grant: Forwardable, indices: list[int]) -> list[int]:
        """Those of a grant's repeats that stand and are paid for (all, unless the node's
        standing changed or the credits ran short: then the grant is dropped)."""
        if not self._still_first_choice(grant):
            self._grants.pop(token, None)
            return []
        customer, price = grant.customer_id, grant.route.price.cost_nano
        check = not grant.bypass_credit_check
        if self._credits.charge(customer, price * len(indices), check=check):
            return indices
        self._grants.pop(token, None)  # the pipeline answers the next one: 402, or a hold
        paid = 0
        while paid < len(indices) and self._credits.charge(customer, price, check=check):
            paid += 1
        return indices[:paid]

    def _record(
        self,
        grant: Forwardable,
        indices: list[int],
        repeats: list[tuple[int, float, bool, int | None]],
    ) -> int:
        """What the closing stages record of served calls, for a grant's billed repeats."""
        node_id = grant.route.node.node_id
        times = [repeats[index][1] for index in indices]
        self._metrics.answered(node_id, times)
        self._health.observe_answers(node_id, grant.work, times)
        heads = [block for index in indices if (block := repeats[index][3]) is not None]
        head = max(heads) if heads else None
        self._cooldowns.succeeded(node_id)
        if head is not None:
            seen = self._seen_heads.seen(grant.key_id, grant.chain_id)
            if seen is None or head > seen:
                self._seen_heads.saw(grant.key_id, grant.chain_id, head, grant.route.node)
        self._meter.record(
            grant.customer_id,
            grant.key_id,
            grant.chain_id,
            grant.method,
            Scenario.FIRST_CHOICE,
            grant.route.price.cost_nano,
            grant.route.plan.plan_id,
            count=len(indices),
        )
        repeated, stat = self._metrics.repeated, (grant.chain_id, grant.method)
        repeated[stat] = repeated.get(stat, 0) + len(indices)
        return len(indices)

    def _still_first_choice(self, grant: Forwardable) -> bool:
        """Whether the pipeline would still send the call to the grant's node first, as far as
        anything but the snapshot (which clears the memo) says: no failure on record, in sync,
        its first health check answered, and, for a call at the head, not behind the head the
        key has seen while another node is at it (router/stages/consistent_head.py)."""
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
        if seen is None or (health.node_head(node_id) or -1) >= seen:
            return True
        chain_head = health.chain_head(grant.chain_id)
        return chain_head is None or chain_head < seen

    def held(self) -> int:
        """Forwards the server may repeat now, as far as Python knows."""
        return len(self._grants)
