"""Stage: every call of a key is metered here, and only here, whatever ended it."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.router.context import CallContext
from chainrouter.router.metering import UNSUPPORTED_METHOD_NAME, UsageMeter


class Meter:
    """Closing: count the call under (customer, key, chain, method, scenario) with what it cost,
    and under the plan whose node answered it (the plan's use in its billing cycle); a split
    `eth_getLogs` counts each range served, at its route's price, under that route's plan.
    Method names no plan prices are counted as `(unsupported)`: clients choose them. The free
    tier is not metered."""

    def __init__(self, meter: UsageMeter) -> None:
        self._meter = meter

    def run(self, call: CallContext) -> None:
        request = call.request
        access = request.access
        scenario = call.scenario
        if access is None or scenario is None:  # free tier, or a call cut short by a bug
            return
        method = (
            UNSUPPORTED_METHOD_NAME if scenario is Scenario.UNSUPPORTED_METHOD else call.call.method
        )
        served_by = call.served_by
        # What was paid for: each range of a split call, else the call's one route (or none).
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
