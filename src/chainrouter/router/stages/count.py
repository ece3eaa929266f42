"""Stage: the free tier's calls are counted for the metrics here (router/metrics.py); keyed
calls are counted by the usage meter (`Meter`), and the metrics read them there."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import work_of
from chainrouter.router.context import CallContext
from chainrouter.router.metrics import RouterMetrics

_MAX_METHODS = 10_000  # methods remembered with their kind of work; the rest looked up each time


class CountFreeCall:
    """Closing, on the free tier: count the call by chain, kind of work (never the method:
    callers choose it) and scenario."""

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
        self._metrics.call(request.chain_id, "free", work, scenario, 0)
