"""Stage: what the call needs of a node, read from its method and parameters
(domain/requirements.py)."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.domain.requirements import (
    AT_HEAD,
    HEAD_ONLY,
    BadParamsError,
    needs_anything,
    needs_of,
)
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext
from chainrouter.router.health import HealthMonitor


class CallNeeds:
    """A block parameter or log filter the router must read and cannot: HTTP 400, -32602, never
    sent to a node. A block past the chain's head is no error of the router's: the nodes at the
    head answer it (router/stages/heads.py)."""

    def __init__(self, health: HealthMonitor) -> None:
        self._chain_head = health.chain_head

    def run(self, call: CallContext) -> None:
        rpc = call.call
        method = rpc.method
        if not needs_anything(method):
            return  # most calls (eth_chainId, eth_getTransactionReceipt ...): NOTHING
        if method in HEAD_ONLY:
            call.needs = AT_HEAD  # eth_blockNumber: no parameter to read
            return
        head = self._chain_head(call.request.chain_id)
        try:
            needs = needs_of(rpc.method, rpc.params, head)
        except BadParamsError as exc:
            failure = RpcError(400, RpcCode.INVALID_PARAMS, f"invalid params: {exc}")
            call.end(Scenario.REFUSED, 400, error_response(failure, rpc.id_json))
            return
        call.needs = needs
