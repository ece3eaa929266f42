"""Writing JSON-RPC responses without re-encoding what need not be."""

from __future__ import annotations

import orjson

from chainrouter.jsonrpc.envelope import NULL_ID
from chainrouter.jsonrpc.errors import RpcError


def error_response(failure: RpcError, id_json: bytes = NULL_ID) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":'
        + id_json
        + b',"error":'
        + orjson.dumps(failure.error_object())
        + b"}"
    )


def batch_response(items: list[bytes]) -> bytes:
    """Join already-encoded responses into a batch, in the order given."""
    return b"[" + b",".join(items) + b"]"
