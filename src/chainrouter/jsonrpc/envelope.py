"""Strict parsing of a JSON-RPC 2.0 payload: one request or a batch (spec section 2).

A request must have exactly the members `jsonrpc` ("2.0"), `method` (a string), `id` (required)
and optionally `params` (an array or an object). Anything else makes that request invalid; in a
batch, an invalid item gets its own error and the others go on.

What nodes accept is narrower than what JSON allows, and a request a node cannot read comes back
without its id, which looks like a faulty node. So the router refuses such requests itself, before
any node sees them (docs/security.md):
- `id` is a string, null, or an integer from -2**63 to 2**63 - 1 (the range every common node
  reads; anvil refuses 2**63). Fractions, exponents, booleans, arrays and objects are refused, and
  so is an integer out of range; the error then carries id null, as the id is not usable.
- `params` nests at most `MAX_PARAMS_DEPTH` arrays and objects (anvil refuses a request from 127
  levels: serde_json's recursion limit).

The payload is parsed with orjson, which reads integers outside the 64-bit ranges (below -2**63,
which takes 19 digits, or above 2**64 - 1) as floats, silently losing digits. A single request is
forwarded byte for byte, and an id read as a float is refused anyway; but the calls of a batch are
encoded again, each on its own, so a batch holding a run of 19 or more decimal digits is parsed
again by the standard library, which keeps every integer exact. (A long digit run inside a hex
string only costs the slower parser, never correctness.) The run is found by mapping every byte to
a digit or not and searching for nineteen digits in a row: several times faster than a regular
expression, which matters for bodies of many kilobytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from chainrouter import json_depth
from chainrouter.jsonrpc.errors import (
    RpcError,
    batch_too_large,
    invalid_request,
    parse_error,
)

_ALLOWED_MEMBERS = frozenset({"jsonrpc", "method", "params", "id"})
NULL_ID = b"null"
MIN_ID = -(2**63)
MAX_ID = 2**63 - 1
MAX_PARAMS_DEPTH = 64  # `params` itself is level 1
_ID_RULE = "id must be a string, null, or an integer from -2**63 to 2**63 - 1"


@dataclass(slots=True)
class RpcCall:
    """A valid request. `id_json` is the id encoded for the response."""

    id: Any
    id_json: bytes
    method: str
    params: list[Any] | dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class InvalidCall:
    """A batch item (or the only request) that breaks the rules; answered with `failure`."""

    id_json: bytes
    failure: RpcError


@dataclass(slots=True)
class Payload:
    calls: list[RpcCall | InvalidCall]
    is_batch: bool


def encode_json(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        # Integers beyond 64 bits: the standard library writes any Python int exactly.
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


_DIGITS_AS_ZERO = bytes([0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256)])
_NINETEEN_DIGITS = b"0" * 19


def may_hold_big_integers(body: bytes) -> bool:
    """Whether `body` has 19 decimal digits in a row: an integer orjson might not keep exact."""
    return _NINETEEN_DIGITS in body.translate(_DIGITS_AS_ZERO)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def load_json_exactly(body: bytes) -> Any:
    """Parse JSON with the standard library, which keeps integers of any size exact."""
    try:
        return json_depth.loads(body.decode("utf-8"), parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise parse_error(str(exc)) from None


def parse_payload(body: bytes, *, max_batch: int) -> Payload:
    """Parse a request body; raise `RpcError` when the payload as a whole cannot be served."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise parse_error(str(exc)) from None
    if isinstance(document, list) and may_hold_big_integers(body):
        document = load_json_exactly(body)  # its calls are encoded again: keep integers exact
    # Fewer brackets in the whole body than the depth bound: no params can be too deep, and
    # no call needs walking (counting bytes runs at memory speed, walking values does not).
    deep = len(body) > MAX_PARAMS_DEPTH and (body.count(b"[") + body.count(b"{") > MAX_PARAMS_DEPTH)
    if isinstance(document, dict):
        return Payload([_parse_call(document, deep)], is_batch=False)
    if isinstance(document, list):
        if not document:
            raise invalid_request("empty batch")
        if len(document) > max_batch:
            raise batch_too_large(len(document), max_batch)
        return Payload([_parse_call(item, deep) for item in document], is_batch=True)
    raise invalid_request("the body must be a JSON object or an array of them")


def usable_id(value: Any) -> bool:
    """Whether `value` is an id every node reads back as sent (see the module's docstring)."""
    if value is None or isinstance(value, str):
        return True
    return type(value) is int and MIN_ID <= value <= MAX_ID


_ABSENT: Any = object()


def _parse_call(item: Any, deep: bool) -> RpcCall | InvalidCall:
    # The common case, a valid request, in as few steps as possible; `_check_call` finds what is
    # wrong with any other (and agrees with this on what is valid: the tests hold both to it).
    if type(item) is dict and item.get("jsonrpc") == "2.0":
        request_id = item.get("id", _ABSENT)
        method = item.get("method")
        params = item.get("params", _ABSENT)
        if (
            type(method) is str
            and method
            and (
                request_id is None
                or type(request_id) is str
                or (type(request_id) is int and MIN_ID <= request_id <= MAX_ID)
            )
            and len(item) == (3 if params is _ABSENT else 4)
            and (params is _ABSENT or type(params) is list or type(params) is dict)
            and not (deep and _deeper_than(params, MAX_PARAMS_DEPTH))
        ):
            return RpcCall(
                request_id, encode_json(request_id), method, None if params is _ABSENT else params
            )
    return _check_call(item, deep)


def _check_call(item: Any, deep: bool) -> RpcCall | InvalidCall:
    if not isinstance(item, dict):
        return InvalidCall(NULL_ID, invalid_request("a request must be a JSON object"))
    if "id" in item and not usable_id(item["id"]):
        return InvalidCall(NULL_ID, invalid_request(_ID_RULE))
    id_json = encode_json(item["id"]) if "id" in item else NULL_ID
    problem = _problem(item)
    if problem is None and deep and _deeper_than(item.get("params"), MAX_PARAMS_DEPTH):
        problem = f"params nest more than {MAX_PARAMS_DEPTH} levels of arrays and objects"
    if problem is not None:
        return InvalidCall(id_json, invalid_request(problem))
    return RpcCall(id=item["id"], id_json=id_json, method=item["method"], params=item.get("params"))


def _deeper_than(value: Any, levels: int) -> bool:
    """Whether `value` nests more than `levels` arrays and objects (iteratively: a recursive walk
    would itself hit Python's recursion limit on the input it exists to refuse)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        current, depth = pending.pop()
        if not isinstance(current, dict | list):
            continue
        if depth > levels:
            return True
        children = current.values() if isinstance(current, dict) else current
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _problem(item: dict[str, Any]) -> str | None:
    if item.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    method = item.get("method")
    if not isinstance(method, str):
        return "method must be a string"
    if not method:
        return "method must not be empty"
    if "params" in item and not isinstance(item["params"], list | dict):
        return "params must be an array or an object"
    if "id" not in item:
        return "id is required (notifications are not supported)"
    allowed_present = 4 if "params" in item else 3
    if len(item) == allowed_present:  # counting is cheaper than a set difference
        return None
    extra = item.keys() - _ALLOWED_MEMBERS
    return "unexpected member " + ", ".join(repr(k) for k in sorted(extra))
