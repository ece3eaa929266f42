"""Stage: every call, keyed or free, is counted for the metrics here (router/metrics.py)."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import work_of
from chainrouter.router.context import CallContext
from chainrouter.router.metrics import RouterMetrics

_MAX_METHODS = 10_000  # methods remembered with their kind of work; the rest looked up each time


class CountCall:
    """Closing: count the call by chain, tier, kind of work (never the method: callers choose
    it) and scenario, and what it was billed."""

    def __init__(self, metrics: RouterMetrics) -> None:
        self._metrics = metrics
        self._work: dict[str, str] = {}

    def run(self, call: CallContext) -> None:
        scenario = call.scenario
        if scenario is None:  # cut short by a bug: logged where it happened
            return
        request = call.request
        method = call.call.method
        work = self._work.get(method)
        if work is None:
            work = work_of(method).value
            if scenario is not Scenario.UNSUPPORTED_METHOD and len(self._work) < _MAX_METHODS:
                self._work[method] = work  # a priced method: the set is the configuration's
        tier = "free" if request.access is None else "keyed"
        self._metrics.call(request.chain_id, tier, work, scenario, call.cost_nano)
