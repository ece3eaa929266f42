"""Stages of the credit check (design notes, "Money"): hold the price before routing (the ledger
settles it when the call ends: router/ledger.py)."""

from __future__ import annotations

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.capabilities import CapabilityBook
from chainrouter.router.context import CallContext, RequestContext
from chainrouter.router.fast.grants import Grants
from chainrouter.router.metering import CreditView


def has_credit_left(credits: CreditView, access: KeyAccess) -> bool:
    """Whether the customer has anything left (or the key bypasses the check): what a
    WebSocket connection needs to open (`CreditLeft`), and an answer no node gave, from the
    cache or an identical call in flight, however cheap (stages/cache.py)."""
    return access.bypass_credit_check or credits.available(access.customer_id) > 0


class CreditHold:
    """The first route's price is held against the customer's balance while the call is in
    flight, so that concurrent calls cannot spend the same credits (a failover or hedge to a
    dearer route holds the difference first: router/stages/attempt.py); for a split
    eth_getLogs, each range's dearest route that can take it. Unless the key bypasses the
    check, a balance that cannot cover it ends the call: HTTP 402, -32601; what the customer's
    grant for calls under decisions holds aside is taken back first (router/fast/grants.py).
    The free tier pays nothing and holds nothing."""

    def __init__(self, credits: CreditView, book: CapabilityBook, grants: Grants | None) -> None:
        self._credits = credits
        self._book = book
        self._grants = grants

    def run(self, call: CallContext) -> None:
        access = call.request.access
        if access is None:
            return
        price = self._price(call)
        check, customer = not access.bypass_credit_check, access.customer_id
        held = self._credits.hold(customer, price, check=check)
        if not held and self._grants is not None and self._grants.reclaim(customer):
            held = self._credits.hold(customer, price, check=check)
        if held:
            call.held_nano = price
            return
        failure = RpcError(402, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits")
        call.end(
            Scenario.INSUFFICIENT_CREDITS,
            failure.http_status,
            error_response(failure, call.call.id_json),
        )

    def _price(self, call: CallContext) -> int:
        if not call.split_size:
            return call.ordered[0].price.cost_nano
        # Each range goes to whichever of its routes answers (router/stages/attempt.py, which
        # picks the same routes): the first route's price times the ranges would let through a
        # call billed more than the balance, when only a dearer node can take a range.
        held = 0
        for needs in call.split_needs():
            able, _ = self._book.eligible(call.ordered, needs, call.call.method)
            held += max((route.price.cost_nano for route in able), default=0)
        return held


class CreditLeft:
    """A WebSocket connection is opened only for a customer with credits left (or a key that
    bypasses the check): HTTP 402, -32601 otherwise. Each notification is checked again when it
    is sent (router/ws/session.py)."""

    def __init__(self, credits: CreditView) -> None:
        self._credits = credits

    def run(self, request: RequestContext) -> None:
        access = request.access
        assert access is not None, "ApiKey runs first"
        if has_credit_left(self._credits, access):
            return
        request.refusal = RpcError(402, RpcCode.INSUFFICIENT_CREDITS, "insufficient credits")
