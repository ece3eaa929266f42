"""Stage: what a write is (router/writes.py). A method a node would answer by signing with keys
of its own is never routed (design notes, "Tail latency and consistency"); a signed raw
transaction must be one, and its hash is read before any node is asked."""

from __future__ import annotations

from chainrouter.domain.enums import Scenario
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.router.context import CallContext
from chainrouter.router.writes import (
    RAW_METHOD,
    SIGNED_BY_NODE,
    RawTransactionError,
    transaction_hash,
)


class SignedTransactions:
    def run(self, call: CallContext) -> None:
        method = call.call.method
        if method in SIGNED_BY_NODE:
            failure = RpcError(
                422,
                RpcCode.METHOD_NOT_SUPPORTED,
                f"{method} is never routed: a node would sign with keys of its own; sign the "
                "transaction yourself and send it with eth_sendRawTransaction",
            )
        elif method == RAW_METHOD:
            try:
                call.tx_hash = transaction_hash(call.call.params)
                return
            except RawTransactionError as exc:
                failure = RpcError(400, RpcCode.INVALID_PARAMS, f"invalid params: {exc}")
        else:
            return
        call.end(Scenario.REFUSED, failure.http_status, error_response(failure, call.call.id_json))
