"""Encoding one call of a batch as a request of its own, to send it to the node that serves it."""

from __future__ import annotations

from chainrouter.jsonrpc.envelope import RpcCall, encode_json


def encode_call(call: RpcCall) -> bytes:
    params = b"" if call.params is None else b',"params":' + encode_json(call.params)
    return (
        b'{"jsonrpc":"2.0","id":'
        + call.id_json
        + b',"method":'
        + encode_json(call.method)
        + params
        + b"}"
    )
