"""Stage: some plan prices the method on the chain."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext


class MethodPriced:
    """HTTP 422, -32002 when no route serves the method on the chain (a chain-specific price wins
    over the all-chains one; routing.py). When the only plans that do have used up their
    overage limit for this billing cycle: HTTP 424, -32008 (no provider available)."""

    def run(self, call: CallContext) -> None:
        request = call.request
        method = call.call.method
        table = request.snapshot.routes
        call.routes = table.routes(request.chain_id, method)
        if call.routes:
            return
        if table.only_exhausted(request.chain_id, method):
            failure = RpcError(
                424,
                RpcCode.NO_PROVIDERS_AVAILABLE,
                f"every plan serving {method[:100]!r} on chain {request.chain_id} has used its "
                "quota and overage limit for this billing cycle",
            )
            scenario = Scenario.NO_ROUTE
        else:
            failure = RpcError(
                422,
                RpcCode.METHOD_NOT_SUPPORTED,
                f"method {method[:100]!r} is not supported on chain {request.chain_id}",
            )
            scenario = Scenario.UNSUPPORTED_METHOD
        call.end(scenario, failure.http_status, error_response(failure, call.call.id_json))
