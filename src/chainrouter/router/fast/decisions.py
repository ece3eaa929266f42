"""Which calls of a served request the native server may serve alike later, in which scope and
for as long as which epochs hold: the pipeline's decision, passed on with what it depended on,
so that no rule is ever written a second time (docs/architecture.md, "Scoped decisions").

A call's decision is handed over when nothing but what its stages recorded could make the
pipeline decide otherwise for a call in the same scope:
- a **forward**: a read the router knows (never a write, nor a method it does not know), served
  by the first route of its order at the first try with no rate limit on the route (the attempt
  stage says so: `CallContext.decided_within_s`) nor on the key (limits must see every call),
  never kept by the cache (the next one would be a hit), not split,
  not an `eth_chainId` (whose answer the router checks against the chain);
- an **answer**: a hit of the response cache (kept, final), given again under the caller's id.
A forward carries the share of its calls the audits sample (`audit_every`): the server hands
those to the ledger with their bytes (router/stages/audit.py).
A request logged call by call (the request log) hands nothing over: each call must be seen.

The scope is `MASKED` (calls alike but for their id and every parameter but the block one) for
the methods whose block parameter is all the stages read (`domain/requirements.py`,
`block_param_only`), unless a stage read more (`CallContext.params_read`); else `EXACT`. The
epochs are the snapshot's and every slot a stage read (`CallContext.epochs_read`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chainrouter.domain.cacheable import CachePrices
from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import Work, block_param_only, work_of
from chainrouter.domain.routing import NodeInfo
from chainrouter.router import epochs
from chainrouter.router.belief import HEAD_METHOD
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.contract import Decision, DecisionScope
from chainrouter.router.fast.grants import Grants
from chainrouter.router.ledger import Booking

_MASKS = block_param_only()
_NEVER_FORWARDED = frozenset({"eth_chainId"})


class Decider:
    def __init__(
        self,
        prices: CachePrices,
        grants: Grants,
        *,
        coalesce: bool,
        forwards: bool = True,
        batch_of: Callable[[NodeInfo], int] = lambda node: 1,
        node_head: Callable[[int], int | None] = lambda node_id: None,
        audit_every: Callable[[NodeInfo, str, Any], int] = lambda node, method, params: 0,
        max_answer_bytes: int = 0,
    ) -> None:
        self._prices = prices
        self._grants = grants
        self._coalesce = coalesce
        self._forwards = forwards  # forwards are decided too, not only answers from the cache
        # The most calls of a request sent to the node in one batch (router/capabilities.py).
        self._batch_of = batch_of
        self._node_head = node_head  # the head each node last told (router/health.py)
        # The share of a forward's calls the audits sample (router/stages/audit.py, `every`).
        self._audit_every = audit_every
        # The bound on a request's answers, `AnswerWithinBound`'s (router/stages/bounds.py).
        self._max_answer_bytes = max_answer_bytes

    @staticmethod
    def masks() -> dict[str, int]:
        """Method -> its block parameter's index: the one parameter a MASKED scope keeps."""
        return dict(_MASKS)

    def decide(
        self,
        request: RequestContext,
        calls: Sequence[CallContext],
        headers: list[tuple[str, str]],
    ) -> list[Decision]:
        """The decisions the native server may apply to calls like these, one per call that
        has one; `headers`: the answer's, but its batch id."""
        access = request.access
        if access is None or access.rate_limit > 0 or request.split_ranges:
            return []
        # The answer's headers must be what each decided call would get alone: no `X-Cache` of
        # HIT or PARTIAL on a forward, none of MISS or PARTIAL on an answer from the cache.
        hits = request.cache_hits
        forwards = self._forwards and hits == 0
        # Nor an `X-Verified` other than the call's own: answers from the cache verified alike.
        answers = hits == len(request.calls) and len({call.verified for call in calls}) == 1
        decisions = []
        for call in calls:
            decision = (self._forward(call, headers) if forwards else None) or (
                self._answer(call, headers) if answers else None
            )
            if decision is not None:
                decisions.append(decision)
        return decisions

    def _forward(self, call: CallContext, headers: list[tuple[str, str]]) -> Decision | None:
        request, route, within_s = call.request, call.served_by, call.decided_within_s
        access = request.access
        method = call.call.method
        if (
            access is None
            or route is None
            or within_s is None
            or call.scenario is not Scenario.FIRST_CHOICE
            or call.cache_pin is not None
            or call.split_size
            or call.charged_nano is not None
            or method in _NEVER_FORWARDED
        ):
            return None
        work = work_of(method)
        if work is Work.UNKNOWN or work is Work.WRITE:
            return None
        if not call.expected.believes_absence_of(self._node_head(route.node.node_id)):
            return None  # its node's "none" would not be believed: each is the pipeline's
        cost = route.price.cost_nano
        join_cost = self._prices.price_nano(request.chain_id, method)
        booking = _booking(
            call,
            scenario=Scenario.FIRST_CHOICE,
            cost_nano=cost,
            join_cost_nano=join_cost,
            plan_id=route.plan.plan_id,
            node=route.node,
            work=work,
            expected=call.expected,
        )
        bypass = access.bypass_credit_check
        spend, join_spend = (0, 0) if bypass else (cost, join_cost)
        self._grants.top_up(access.customer_id, spend)
        return self._decision(
            call,
            headers,
            booking,
            spend=spend,
            join_spend=join_spend,
            url=route.node.url,
            node_id=route.node.node_id,
            node_batch=self._batch_of(route.node),
            timeout_s=within_s,
            flight_chain=request.chain_id if self._coalesce and call.cache_key else 0,
            flight_seen=-1 if call.flight_seen is None else call.flight_seen,
            audit_every=self._audit_every(route.node, method, call.call.params),
        )

    def _answer(self, call: CallContext, headers: list[tuple[str, str]]) -> Decision | None:
        access, member = call.request.access, call.cached
        if access is None or member is None or call.scenario is not Scenario.CACHE:
            return None
        price = call.cost_nano
        booking = _booking(
            call,
            scenario=Scenario.CACHE,
            cost_nano=price,
            join_cost_nano=price,
            plan_id=0,
            node=None,
            work=work_of(call.call.method),
        )
        spend = 0 if access.bypass_credit_check else price
        self._grants.top_up(access.customer_id, spend)
        return self._decision(
            call,
            headers,
            booking,
            spend=spend,
            join_spend=spend,
            member=member,
        )

    def _decision(
        self,
        call: CallContext,
        headers: list[tuple[str, str]],
        booking: Booking,
        *,
        spend: int,
        join_spend: int,
        url: str = "",
        node_id: int = 0,
        node_batch: int = 1,
        timeout_s: float = 0.0,
        flight_chain: int = 0,
        flight_seen: int = -1,
        member: bytes | None = None,
        audit_every: int = 0,
    ) -> Decision:
        rpc = call.call
        masked = not call.params_read and rpc.method in _MASKS and isinstance(rpc.params, list)
        slots = [epochs.SNAPSHOT, *call.epochs_read]
        values = [call.request.snapshot_epoch, *call.epochs_read.values()]
        return Decision(
            call=call.index,
            scope=DecisionScope.MASKED if masked else DecisionScope.EXACT,
            epoch_slots=slots,
            epoch_values=values,
            customer_id=booking.customer_id,
            spend_nano=spend,
            join_spend_nano=join_spend,
            url=url,
            node_id=node_id,
            timeout_s=timeout_s,
            node_batch=node_batch,
            flight_chain=flight_chain,
            flight_seen=flight_seen,
            member=member,
            headers=headers,
            booking=booking,
            # The ledger reads every answer of a call that tells the key's head.
            judge_each=rpc.method == HEAD_METHOD,
            audit_every=audit_every,
            max_answer_bytes=self._max_answer_bytes,
        )


def _booking(call: CallContext, **served: Any) -> Booking:
    """The call's booking: its customer, key, chain and method, and how it is `served`."""
    access = call.request.access
    assert access is not None, "keyed calls only"
    return Booking(
        customer_id=access.customer_id,
        key_id=access.key_id,
        chain_id=call.request.chain_id,
        method=call.call.method,
        **served,
    )
