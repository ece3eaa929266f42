"""Strict JSON-RPC 2.0 envelopes (spec section 2): what is a valid request, and what each mistake
is answered with."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainrouter.jsonrpc import envelope
from chainrouter.jsonrpc.encode import encode_call
from chainrouter.jsonrpc.envelope import (
    InvalidCall,
    RpcCall,
    encode_json,
    may_hold_big_integers,
    parse_payload,
)
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import batch_response, error_response

MAX_BATCH = 100


def parse(document: Any) -> list[RpcCall | InvalidCall]:
    return parse_payload(json.dumps(document).encode(), max_batch=MAX_BATCH).calls


def refused(body: bytes) -> RpcError:
    with pytest.raises(RpcError) as caught:
        parse_payload(body, max_batch=MAX_BATCH)
    return caught.value


def test_a_valid_request_is_parsed_with_its_id_method_and_params() -> None:
    [call] = parse({"jsonrpc": "2.0", "method": "eth_call", "params": [{"to": "0x1"}], "id": 7})
    assert isinstance(call, RpcCall)
    assert (call.id, call.id_json, call.method, call.params) == (
        7,
        b"7",
        "eth_call",
        [{"to": "0x1"}],
    )


def test_params_may_be_omitted_or_an_object() -> None:
    [without, named] = parse(
        [
            {"jsonrpc": "2.0", "method": "eth_chainId", "id": "a"},
            {"jsonrpc": "2.0", "method": "m", "params": {"x": 1}, "id": None},
        ]
    )
    assert isinstance(without, RpcCall)
    assert without.params is None
    assert isinstance(named, RpcCall)
    assert named.params == {"x": 1}
    assert named.id_json == b"null"


@pytest.mark.parametrize(
    ("request_object", "reason"),
    [
        ({"jsonrpc": "1.0", "method": "m", "id": 1}, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": 2.0, "method": "m", "id": 1}, 'jsonrpc must be "2.0"'),
        ({"method": "m", "id": 1}, 'jsonrpc must be "2.0"'),
        ({"jsonrpc": "2.0", "method": 5, "id": 1}, "method must be a string"),
        ({"jsonrpc": "2.0", "id": 1}, "method must be a string"),
        ({"jsonrpc": "2.0", "method": "", "id": 1}, "method must not be empty"),
        ({"jsonrpc": "2.0", "method": "m", "params": "x", "id": 1}, "params must be an array"),
        ({"jsonrpc": "2.0", "method": "m", "params": None, "id": 1}, "params must be an array"),
        ({"jsonrpc": "2.0", "method": "m"}, "id is required"),
        ({"jsonrpc": "2.0", "method": "m", "id": 1, "extra": 0}, "unexpected member 'extra'"),
    ],
)
def test_a_request_breaking_a_rule_is_invalid_with_the_reason(
    request_object: dict[str, Any], reason: str
) -> None:
    [call] = parse(request_object)
    assert isinstance(call, InvalidCall)
    assert call.failure.code is RpcCode.INVALID_REQUEST
    assert call.failure.http_status == 400
    assert reason in call.failure.message
    expected_id = json.dumps(request_object["id"]).encode() if "id" in request_object else b"null"
    assert call.id_json == expected_id


def test_in_a_batch_a_bad_item_does_not_sink_the_others_and_order_is_kept() -> None:
    calls = parse(
        [
            {"jsonrpc": "2.0", "method": "a", "id": 1},
            5,
            {"jsonrpc": "2.0", "method": "b"},
            {"jsonrpc": "2.0", "method": "c", "id": 3},
        ]
    )
    assert [type(c).__name__ for c in calls] == ["RpcCall", "InvalidCall", "InvalidCall", "RpcCall"]
    assert isinstance(calls[1], InvalidCall)
    assert calls[1].id_json == b"null"
    assert "must be a JSON object" in calls[1].failure.message


@pytest.mark.parametrize(
    ("body", "code", "status", "reason"),
    [
        (b"{", RpcCode.PARSE_ERROR, 400, "parse error"),
        (b"\xff\xfe", RpcCode.PARSE_ERROR, 400, "parse error"),
        (b"", RpcCode.PARSE_ERROR, 400, "parse error"),
        (b"[]", RpcCode.INVALID_REQUEST, 400, "empty batch"),
        (b'"eth_call"', RpcCode.INVALID_REQUEST, 400, "JSON object or an array"),
        (b"null", RpcCode.INVALID_REQUEST, 400, "JSON object or an array"),
    ],
)
def test_a_payload_that_cannot_be_served_at_all_is_refused_whole(
    body: bytes, code: RpcCode, status: int, reason: str
) -> None:
    failure = refused(body)
    assert (failure.code, failure.http_status) == (code, status)
    assert reason in failure.message


def test_a_batch_over_the_limit_is_refused_whole() -> None:
    body = json.dumps([{"jsonrpc": "2.0", "method": "m", "id": i} for i in range(101)]).encode()
    failure = refused(body)
    assert failure.code is RpcCode.INVALID_REQUEST
    assert "batch of 101 requests exceeds the maximum of 100" in failure.message


@pytest.mark.parametrize("edge", [2**63 - 1, -(2**63), 0, -1])
def test_integer_ids_within_64_bits_are_echoed_exactly(edge: int) -> None:
    [call] = parse_payload(
        b'{"jsonrpc":"2.0","method":"m","id":' + str(edge).encode() + b"}", max_batch=1
    ).calls
    assert isinstance(call, RpcCall)
    assert call.id == edge
    assert call.id_json == str(edge).encode()


@pytest.mark.parametrize(
    "request_id",
    [b"1.5", b"1.0", b"1e2", b"-0.0", b"true", b"false", b"{}", b"[]", b'{"a":1}', b"[1]",
     str(2**63).encode(), str(-(2**63) - 1).encode(), str(2**64 + 1).encode(),
     str(2**80).encode()],
)  # fmt: skip
def test_an_id_no_node_reads_back_is_refused_with_id_null(request_id: bytes) -> None:
    [call] = parse_payload(
        b'{"jsonrpc":"2.0","method":"m","params":[],"id":' + request_id + b"}", max_batch=1
    ).calls
    assert isinstance(call, InvalidCall)
    assert call.id_json == b"null"
    assert call.failure.code is RpcCode.INVALID_REQUEST
    assert "id must be a string, null, or an integer" in call.failure.message


@pytest.mark.parametrize(("depth", "valid"), [(1, True), (64, True), (65, False), (300, False)])
def test_params_nest_at_most_64_levels(depth: int, valid: bool) -> None:
    nested = b"[" * depth + b"]" * depth
    for params in (nested, b'{"a":' + nested[1:-1] + b"}" if depth > 1 else b"{}"):
        [call] = parse_payload(
            b'{"jsonrpc":"2.0","method":"m","params":' + params + b',"id":3}', max_batch=1
        ).calls
        assert isinstance(call, RpcCall) is valid
        if not valid:
            assert isinstance(call, InvalidCall)
            assert call.id_json == b"3"
            assert "params nest more than 64 levels" in call.failure.message


def test_error_responses_carry_the_id_and_the_error_object() -> None:
    [call] = parse({"jsonrpc": "2.0", "method": "m", "id": "x-1", "bad": 1})
    assert isinstance(call, InvalidCall)
    response = orjson.loads(error_response(call.failure, call.id_json))
    assert response == {
        "jsonrpc": "2.0",
        "id": "x-1",
        "error": {"code": -32600, "message": "invalid request: unexpected member 'bad'"},
    }
    batch = orjson.loads(batch_response([b'{"a":1}', error_response(call.failure)]))
    assert batch[0] == {"a": 1}
    assert batch[1]["id"] is None


json_ids = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=20)
unusable_ids = (
    st.booleans()
    | st.integers(min_value=2**63, max_value=2**100)
    | st.integers(min_value=-(2**100), max_value=-(2**63) - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
)
params = (
    st.none()
    | st.lists(st.integers() | st.text(max_size=5), max_size=3)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)
)


@given(json_ids, st.text(min_size=1, max_size=30), params)
def test_any_valid_request_is_accepted_and_its_id_comes_back_equal(
    request_id: Any, method: str, request_params: Any
) -> None:
    document: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if request_params is not None:
        document["params"] = request_params
    [call] = parse(document)
    assert isinstance(call, RpcCall)
    assert call.method == method
    # A single call goes to its node byte for byte; as parsed, an integer beyond 64 bits in its
    # params may be rounded (orjson), which nothing reads exactly: the response cache gives such
    # a call no key (domain/cacheable.py).
    assert call.params == request_params or _beyond_64_bits(request_params)
    assert json.loads(call.id_json) == request_id
    assert json.loads(encode_json(request_id)) == request_id


def _beyond_64_bits(params: Any) -> bool:
    values = params.values() if isinstance(params, dict) else params or []
    return any(isinstance(v, int) and not -(2**63) <= v < 2**64 for v in values)


@given(unusable_ids, st.text(min_size=1, max_size=30), params)
def test_any_unusable_id_makes_the_request_invalid(
    request_id: Any, method: str, request_params: Any
) -> None:
    document: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if request_params is not None:
        document["params"] = request_params
    [call] = parse(document)
    assert isinstance(call, InvalidCall)
    assert call.id_json == b"null"


def _outcome(body: bytes) -> RpcError | list[RpcCall | InvalidCall]:
    try:
        return parse_payload(body, max_batch=MAX_BATCH).calls
    except RpcError as failure:
        return failure


@given(st.binary(max_size=300))
def test_any_bytes_are_parsed_or_refused_with_a_json_rpc_error(body: bytes) -> None:
    outcome = _outcome(body)
    if isinstance(outcome, RpcError):
        assert outcome.code in (RpcCode.PARSE_ERROR, RpcCode.INVALID_REQUEST)
    else:
        assert outcome


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_json_number_constants_are_parse_errors_on_both_parsers(constant: bytes) -> None:
    for padding in (b"", b', "x": 12345678901234567890123'):
        body = b'{"jsonrpc":"2.0","method":"m","id":' + constant + padding + b"}"
        outcome = _outcome(body)
        assert isinstance(outcome, RpcError)
        assert outcome.code is RpcCode.PARSE_ERROR


@given(
    st.lists(
        st.binary(max_size=30) | st.text("0123456789", min_size=15, max_size=25).map(str.encode),
        max_size=6,
    ).map(b"".join)
)
def test_the_big_integer_scan_finds_exactly_the_runs_of_nineteen_digits(body: bytes) -> None:
    assert may_hold_big_integers(body) is (re.search(rb"[0-9]{19}", body) is not None)


def test_big_integers_inside_the_params_of_a_batch_survive_exactly() -> None:
    """A batch's calls are encoded again, each on its own (a single request goes to its node as
    sent, byte for byte)."""
    [call] = parse_payload(
        b'[{"jsonrpc":"2.0","method":"m","params":[123456789012345678901234567890],"id":1}]',
        max_batch=1,
    ).calls
    assert isinstance(call, RpcCall)
    assert call.params == [123456789012345678901234567890]
    assert encode_call(call) == (
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[123456789012345678901234567890]}'
    )


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(
                st.sampled_from(["jsonrpc", "method", "params", "id", "x"]), children, max_size=5
            )
        ),
        max_leaves=20,
    )
)
def test_any_json_document_yields_one_result_per_request_in_order(document: Any) -> None:
    body = json.dumps(document).encode()
    try:
        payload = parse_payload(body, max_batch=MAX_BATCH)
    except RpcError:
        return
    expected = len(document) if isinstance(document, list) else 1
    assert len(payload.calls) == expected
    assert payload.is_batch == isinstance(document, list)


request_like = st.dictionaries(
    st.sampled_from(["jsonrpc", "method", "params", "id", "x"]),
    st.sampled_from(["2.0", "1.0", "", "m", 2**63, -(2**63), 2**63 - 1, 1.5, True, None])
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    max_size=5,
)


@given(request_like, st.booleans())
def test_the_fast_path_for_valid_requests_agrees_with_the_full_check(
    item: dict[str, Any], deep: bool
) -> None:
    def summary(call: RpcCall | InvalidCall) -> object:
        if isinstance(call, RpcCall):
            return call
        return (call.id_json, call.failure.code, call.failure.message)

    fast, full = envelope._parse_call(item, deep), envelope._check_call(item, deep)
    assert summary(fast) == summary(full)
