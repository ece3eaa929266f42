"""Stage: the routes to try, in the order of the key's strategy (design notes, "Routing")."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.domain.routing import order_routes
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router import epochs
from chainrouter.router.context import CallContext
from chainrouter.router.epochs import Epochs
from chainrouter.router.health import HealthMonitor


class PlanRoutes:
    """`economy`: cheapest first; `performance`: fastest first. Nodes known to be out of sync are
    left out; with none left, HTTP 424, -32008. What it reads of each route's node (its health,
    cooldown, capabilities, read by the stages after it too) is that node's epoch."""

    def __init__(self, health: HealthMonitor, epoch_store: Epochs) -> None:
        self._out_of_sync = health.out_of_sync  # live views, updated by the health checker
        self._latency_ms = health.latency_ms
        self._epochs = epoch_store

    def run(self, call: CallContext) -> None:
        request = call.request
        for route in call.routes:
            call.read_epoch(self._epochs, epochs.node(route.node.node_id))
        call.ordered = order_routes(
            call.routes, request.strategy, self._out_of_sync, self._latency_ms
        )
        if not call.ordered:
            failure = RpcError(
                424,
                RpcCode.NO_PROVIDERS_AVAILABLE,
                f"no provider is in sync for chain {request.chain_id}",
            )
            call.end(
                Scenario.NO_ROUTE, failure.http_status, error_response(failure, call.call.id_json)
            )
