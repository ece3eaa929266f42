"""Stage: some plan prices the method on the chain."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext


class MethodPriced:
    """HTTP 422, -32002 when no route serves the method on the chain (a chain-specific price wins
    over the all-chains one; routing.py)."""

    def run(self, call: CallContext) -> None:
        request = call.request
        method = call.call.method
        call.routes = request.snapshot.routes.routes(request.chain_id, method)
        if not call.routes:
            failure = RpcError(
                422,
                RpcCode.METHOD_NOT_SUPPORTED,
                f"method {method[:100]!r} is not supported on chain {request.chain_id}",
            )
            call.end(
                Scenario.UNSUPPORTED_METHOD,
                failure.http_status,
                error_response(failure, call.call.id_json),
            )
