"""Stage: a key's cap on what one call may cost (`max_price_per_call`, design notes "Bounds")."""

from __future__ import annotations

from chainrouter.domain.access import KeyAccess
from chainrouter.domain.enums import Scenario
from chainrouter.domain.money import format_credits
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext


def within_cap(access: KeyAccess, cost_nano: int) -> bool:
    """Whether a call of `cost_nano` is one the key will pay for: the cap bounds every call
    billed to it, a route's and each call a check of its answer makes (stages/attempt.py)."""
    return not access.max_price_nano or cost_nano <= access.max_price_nano


class WithinPriceCap:
    """Right after the routes are ordered: a key with a cap leaves out every route dearer than
    it, so that neither the first try nor a failover or hedge can cost more; with none left,
    HTTP 422, -32013 naming the cap and the cheapest price, never sent nor billed (scenario
    `refused`). What it reads (the key's cap, the routes' prices) is the snapshot's: its epoch
    ends a decision made under it."""

    def run(self, call: CallContext) -> None:
        access = call.request.access
        if access is None or not access.max_price_nano:
            return
        cap = access.max_price_nano
        ordered = call.ordered
        within = [route for route in ordered if within_cap(access, route.price.cost_nano)]
        if len(within) == len(ordered):
            return
        if within:
            call.ordered = within
            return
        cheapest = min(route.price.cost_nano for route in ordered)
        failure = RpcError(
            422,
            RpcCode.NO_SINGLE_PROVIDER,
            f"no route serves {call.call.method[:100]} within this key's max_price_per_call of "
            f"{format_credits(cap)} credits; the cheapest costs {format_credits(cheapest)}",
            data={"max_price_per_call": format_credits(cap)},
        )
        call.end(Scenario.REFUSED, failure.http_status, error_response(failure, call.call.id_json))
