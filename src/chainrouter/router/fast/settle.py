"""Settling the calls the native server served under decisions (native/src/settle.rs): each group
of receipts is judged as the pipeline judges a node's answer (router/answers.py), and what is
served, with the tallies of calls that needed no judging, is booked in the one ledger
(router/ledger.py) before any of its answers leaves.

A request is taken all or none: if any of its receipts is not an answer the router serves as
given (an error that is the node's failure, the caller's fault, another id) or believes
(router/belief.py: an `eth_blockNumber` older than the call had to see when the decision was
made ...), none of its calls is booked, tallied ones included, and the server hands the request
to the pipeline with what its nodes did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from itertools import groupby

import orjson

from chainrouter.router.answers import exact_member, served_as_given
from chainrouter.router.belief import HEAD_METHOD, doubted, head_doubted, head_told
from chainrouter.router.contract import Decision, Receipt, Settled, Tally, Verdict
from chainrouter.router.fast.grants import Grants
from chainrouter.router.ledger import Booking, Ledger
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

    def __init__(
        self,
        ledger: Ledger,
        grants: Grants,
        metrics: RouterMetrics,
        node_head: Callable[[int], int | None],
        audited: Callable[[Receipt], None] | None = None,
    ) -> None:
        self._ledger = ledger
        # Told of each served receipt the server sampled for the audits (router/stages/audit.py).
        self._audited = audited
        self._grants = grants
        self._metrics = metrics
        self._node_head = node_head  # the head each node last told (router/health.py)

    def __call__(self, receipts: list[Receipt], tallies: list[Tally]) -> Settled:
        verdicts: list[Verdict] = []
        refused: set[int] = set()
        requests: set[int] = set()
        taken: list[tuple[int, Receipt, _Judged]] = []  # (request, receipt, what it comes to)
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
            pairs = zip(judged_request, judged, strict=True)
            taken += [(request, receipt, call) for receipt, call in pairs if call is not None]
            if self._audited is not None:
                for receipt in judged_request:
                    if receipt.audited is not None:
                        self._audited(receipt)
            verdicts += [self._verdict(receipt) for receipt in judged_request]
        told = [(tally, self._heads(tally, refused)) for tally in tallies]
        served: dict[int, _Served] = {}  # by the decision's identity
        for request, receipt, call in taken:
            if request in refused:  # for a tallied call of its own
                continue
            into = _of(served, receipt.decision)
            if call.joined:
                into.joined += 1
            else:
                into.times.append(call.elapsed_s)
            if call.head is not None:
                into.heads.append(call.head)
        for tally, heads in told:
            requests.update(tally.requests)
            times = tally.elapsed_s
            if refused:
                pairs_of = zip(tally.requests, times, strict=True)
                times = [elapsed_s for request, elapsed_s in pairs_of if request not in refused]
            into = _of(served, tally.decision)
            into.times += times
            into.heads += [h for r, h in heads if r not in refused and h is not None]
        if not served:
            return Settled(verdicts, sorted(refused))
        try:
            self._book(served.values())
        except Exception:  # nothing of the group may go out unbooked
            log.exception("calls served under decisions could not be booked; the pipeline serves")
            return Settled([_NOT_SERVED] * len(receipts), sorted(requests))
        self._metrics.request("keyed", 200, len(requests - refused))
        return Settled(verdicts, sorted(refused))

    @staticmethod
    def _heads(tally: Tally, refused: set[int]) -> list[tuple[int, int | None]]:
        """The heads a tally's answers tell, by request; a request with one the router does not
        believe (router/belief.py), or that the server could not read, is refused whole (the
        pipeline's to judge and route past)."""
        heads = tally.heads
        if heads is None:
            return []
        expected = _booking(tally.decision).expected
        told: list[tuple[int, int | None]] = []
        if min(heads) < 0 or head_doubted(min(heads), expected):  # rare: find which
            for request, head in zip(tally.requests, heads, strict=True):
                read = head if head >= 0 else None
                if read is None or head_doubted(read, expected):
                    refused.add(request)
                told.append((request, read))
            return told
        return list(zip(tally.requests, heads, strict=True))

    def _judge(self, receipt: Receipt) -> _Judged | None:
        """What the ledger books the call as; None if it is not served as given, or not
        believed."""
        answer = receipt.answer
        if answer is None:  # an answer of the decision's own
            return _Judged(receipt.elapsed_s, joined=False, head=None)
        if not served_as_given(answer, orjson.loads(receipt.call_id)):
            return None
        booking = _booking(receipt.decision)
        if self._doubted(booking, answer):
            return None
        head = head_told(answer) if booking.method == HEAD_METHOD else None
        return _Judged(receipt.elapsed_s, receipt.joined, head)

    def _doubted(self, booking: Booking, answer: bytes) -> bool:
        node = booking.node
        node_head = None if node is None else self._node_head(node.node_id)
        return doubted(booking.method, answer, node_head, booking.expected)

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
