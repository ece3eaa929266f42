"""Settling the calls the native server served under decisions (native/src/settle.rs): each group
of receipts is judged as the pipeline judges a node's answer (router/answers.py), and what is
served is booked in the one ledger (router/ledger.py) before any of its answers leaves.

A request's receipts are taken all or none: if any of its calls is not an answer the router
serves as given (an error that is the node's failure, the caller's fault, another id, an
`eth_blockNumber` older than the key had seen when the decision was made), none is booked, and
the server hands the request to the pipeline with what its nodes did.
"""

from __future__ import annotations

import logging
from itertools import groupby

import orjson

from chainrouter.router.answers import exact_member, served_as_given
from chainrouter.router.contract import Decision, Receipt, Verdict
from chainrouter.router.fast.grants import Grants
from chainrouter.router.ledger import HEAD_METHOD, Booking, Ledger, Served, head_in
from chainrouter.router.metrics import RouterMetrics

log = logging.getLogger(__name__)

_NOT_SERVED = Verdict(served=False)
_SERVED = Verdict(served=True)


class Settle:
    """The host's `settle`, which the native server calls with each group of receipts."""

    def __init__(self, ledger: Ledger, grants: Grants, metrics: RouterMetrics) -> None:
        self._ledger = ledger
        self._grants = grants
        self._metrics = metrics

    def __call__(self, receipts: list[Receipt]) -> list[Verdict]:
        verdicts: list[Verdict] = []
        taken: list[tuple[Receipt, Served]] = []
        requests = 0
        for _, grouped in groupby(receipts, key=lambda receipt: receipt.request):
            request = list(grouped)
            try:
                judged = [self._judge(receipt) for receipt in request]
            except Exception:  # a bug must not stop the others: this request is the pipeline's
                log.exception("a request served under decisions could not be judged")
                judged = [None] * len(request)
            if all(served is not None for served in judged):
                taken += [(r, s) for r, s in zip(request, judged, strict=True) if s is not None]
                verdicts += [self._verdict(receipt) for receipt in request]
                requests += 1
            else:
                verdicts += [_NOT_SERVED] * len(request)
        if not taken:
            return verdicts
        try:
            self._book(taken)
        except Exception:  # nothing of the group may go out unbooked
            log.exception("calls served under decisions could not be booked; the pipeline serves")
            return [_NOT_SERVED] * len(receipts)
        self._metrics.request("keyed", 200, requests)
        return verdicts

    @staticmethod
    def _judge(receipt: Receipt) -> Served | None:
        """What the ledger books the call as; None if it is not served as given."""
        answer = receipt.answer
        if answer is None:  # an answer of the decision's own
            return Served(None, receipt.elapsed_s, joined=False)
        if not served_as_given(answer, orjson.loads(receipt.call_id)):
            return None
        booking = _booking(receipt.decision)
        head = None
        if booking.method == HEAD_METHOD:
            head = head_in(answer)
            if booking.min_head is not None and (head is None or head < booking.min_head):
                return None  # older than the key had seen: the pipeline's to route past
        return Served(answer, receipt.elapsed_s, receipt.joined, head)

    @staticmethod
    def _verdict(receipt: Receipt) -> Verdict:
        if not receipt.joined or receipt.answer is None:
            return _SERVED
        exact = exact_member(receipt.answer)
        return _SERVED if exact is None else Verdict(served=True, member=exact[1])

    def _book(self, taken: list[tuple[Receipt, Served]]) -> None:
        """Book the group's served calls, one decision at a time (one journal line each)."""
        by_decision: dict[int, tuple[Decision, list[Served]]] = {}
        for receipt, call in taken:
            decision = receipt.decision
            entry = by_decision.get(id(decision))
            if entry is None:
                by_decision[id(decision)] = (decision, [call])
            else:
                entry[1].append(call)
        customers: dict[int, int] = {}
        for decision, calls in by_decision.values():
            booking = _booking(decision)
            spent = sum(
                decision.join_spend_nano if call.joined else decision.spend_nano for call in calls
            )
            self._ledger.book_served(booking, spent, calls)
            if decision.spend_nano:
                customers[decision.customer_id] = decision.spend_nano
        for customer_id, spend in customers.items():
            self._grants.top_up(customer_id, spend)


def _booking(decision: Decision) -> Booking:
    booking = decision.booking
    assert isinstance(booking, Booking), "a decision's booking is the ledger's"
    return booking
