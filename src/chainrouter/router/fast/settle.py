"""Settling the calls the native server served under decisions (native/src/settle.rs): each group
of receipts is judged as the pipeline judges a node's answer (router/answers.py), and what is
served, with the tallies of calls that needed no judging, is booked in the one ledger
(router/ledger.py) before any of its answers leaves.

A request is taken all or none: if any of its receipts is not an answer the router serves as
given (an error that is the node's failure, the caller's fault, another id, an `eth_blockNumber`
older than the key had seen when the decision was made), none of its calls is booked, tallied
ones included, and the server hands the request to the pipeline with what its nodes did.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from itertools import groupby

import orjson

from chainrouter.router.answers import exact_member, served_as_given
from chainrouter.router.contract import Decision, Receipt, Tally, Verdict
from chainrouter.router.fast.grants import Grants
from chainrouter.router.ledger import HEAD_METHOD, Booking, Ledger, head_in
from chainrouter.router.metrics import RouterMetrics

log = logging.getLogger(__name__)

_NOT_SERVED = Verdict(served=False)
_SERVED = Verdict(served=True)


class _Served:
    """What one decision's calls of a group come to, for the ledger."""

    __slots__ = ("decision", "heads", "joined", "times")

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.times: list[float] = []  # each call its node answered (or the decision's answer)
        self.joined = 0  # calls that took an identical call's answer in flight
        self.heads: list[int] = []  # the blocks `eth_blockNumber` answers name


class _Judged:
    """A receipt the router serves: its time, whether it joined, the head it tells."""

    __slots__ = ("elapsed_s", "head", "joined")

    def __init__(self, elapsed_s: float, joined: bool, head: int | None) -> None:
        self.elapsed_s = elapsed_s
        self.joined = joined
        self.head = head


class Settle:
    """The host's `settle`, which the native server calls with each group of receipts."""

    def __init__(self, ledger: Ledger, grants: Grants, metrics: RouterMetrics) -> None:
        self._ledger = ledger
        self._grants = grants
        self._metrics = metrics

    def __call__(self, receipts: list[Receipt], tallies: list[Tally]) -> list[Verdict]:
        verdicts: list[Verdict] = []
        served: dict[int, _Served] = {}  # by the decision's identity
        refused: set[int] = set()
        requests: set[int] = set()
        for request, grouped in groupby(receipts, key=lambda receipt: receipt.request):
            judged_request = list(grouped)
            requests.add(request)
            try:
                judged = [self._judge(receipt) for receipt in judged_request]
            except Exception:  # a bug must not stop the others: this request is the pipeline's
                log.exception("a request served under decisions could not be judged")
                judged = [None] * len(judged_request)
            if any(call is None for call in judged):
                refused.add(request)
                verdicts += [_NOT_SERVED] * len(judged_request)
                continue
            for receipt, call in zip(judged_request, judged, strict=True):
                assert call is not None
                into = _of(served, receipt.decision)
                if call.joined:
                    into.joined += 1
                else:
                    into.times.append(call.elapsed_s)
                if call.head is not None:
                    into.heads.append(call.head)
            verdicts += [self._verdict(receipt) for receipt in judged_request]
        for tally in tallies:
            requests.update(tally.requests)
            times = tally.elapsed_s
            if refused:
                pairs = zip(tally.requests, times, strict=True)
                times = [elapsed_s for request, elapsed_s in pairs if request not in refused]
            _of(served, tally.decision).times += times
        if not served:
            return verdicts
        try:
            self._book(served.values())
        except Exception:  # nothing of the group may go out unbooked
            log.exception("calls served under decisions could not be booked; the pipeline serves")
            return [_NOT_SERVED] * len(receipts)
        self._metrics.request("keyed", 200, len(requests - refused))
        return verdicts

    @staticmethod
    def _judge(receipt: Receipt) -> _Judged | None:
        """What the ledger books the call as; None if it is not served as given."""
        answer = receipt.answer
        if answer is None:  # an answer of the decision's own
            return _Judged(receipt.elapsed_s, joined=False, head=None)
        if not served_as_given(answer, orjson.loads(receipt.call_id)):
            return None
        booking = _booking(receipt.decision)
        head = None
        if booking.method == HEAD_METHOD:
            head = head_in(answer)
            if booking.min_head is not None and (head is None or head < booking.min_head):
                return None  # older than the key had seen: the pipeline's to route past
        return _Judged(receipt.elapsed_s, receipt.joined, head)

    @staticmethod
    def _verdict(receipt: Receipt) -> Verdict:
        if not receipt.joined or receipt.answer is None:
            return _SERVED
        exact = exact_member(receipt.answer)
        return _SERVED if exact is None else Verdict(served=True, member=exact[1])

    def _book(self, served: Iterable[_Served]) -> None:
        """Book the group's served calls, one decision at a time (one journal line each)."""
        customers: dict[int, int] = {}
        for calls in served:
            decision = calls.decision
            spent = decision.spend_nano * len(calls.times) + decision.join_spend_nano * calls.joined
            self._ledger.book_served(
                _booking(decision), spent, calls.times, calls.joined, tuple(calls.heads)
            )
            if decision.spend_nano:
                customers[decision.customer_id] = decision.spend_nano
        for customer_id, spend in customers.items():
            self._grants.top_up(customer_id, spend)


def _of(served: dict[int, _Served], decision: Decision) -> _Served:
    found = served.get(id(decision))
    if found is None:
        found = served[id(decision)] = _Served(decision)
    return found


def _booking(decision: Decision) -> Booking:
    booking = decision.booking
    assert isinstance(booking, Booking), "a decision's booking is the ledger's"
    return booking
