"""The native server's reading of bodies and answers (native/src/json.rs) holds to the pipeline's
own, on generated input: two calls the server keys alike are calls the pipeline reads alike (so
a decision made for one is the pipeline's for the other), and an answer the server books without
judging is one the pipeline's judge serves as given (router/answers.py)."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from chainrouter.domain.requirements import needs_of
from chainrouter.jsonrpc.envelope import MAX_PARAMS_DEPTH, InvalidCall, RpcCall, parse_payload
from chainrouter.router.answers import served_as_given
from chainrouter.router.belief import head_told
from chainrouter.router.executors.native import load_native_module
from chainrouter.router.fast.decisions import Decider

native = load_native_module()
MASKS = Decider.masks()

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(["latest", "pending", "0x10", "0x0", "earliest", "0x" + "ab" * 20]),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
ids = st.one_of(st.none(), st.integers(-(10**18) + 1, 10**18 - 1), st.text(max_size=10))
methods = st.sampled_from([*MASKS, "eth_blockNumber", "eth_chainId", "eth_getLogs", "custom_x"])
blocks = st.sampled_from(["latest", "pending", "safe", "0x10", "0x11", "earliest", "Latest", 7])


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(methods)
    params = draw(st.lists(values, max_size=4))
    keep = MASKS.get(method)
    if keep is not None and draw(st.booleans()):
        params = params + [None] * max(0, keep + 1 - len(params))
        params[keep] = draw(blocks)
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(ids), "method": method, "params": params}
    if draw(st.booleans()):
        del call["params"]
    return call


def _spelled(document: Any, spacing: bool) -> bytes:
    separators = (", ", ": ") if spacing else (",", ":")
    return json.dumps(document, separators=separators, ensure_ascii=False).encode()


def _read(body: bytes) -> list[tuple[Any, ...]]:
    """What the pipeline reads of each call: valid or not, its method, and what it needs."""
    try:
        payload = parse_payload(body, max_batch=100)
    except Exception as exc:  # refused as a whole
        return [("refused", type(exc).__name__)]
    read: list[tuple[Any, ...]] = []
    for call in payload.calls:
        if isinstance(call, InvalidCall):
            read.append(("invalid", call.failure.code))
            continue
        assert isinstance(call, RpcCall)
        try:
            needs = needs_of(call.method, call.params, 100)
        except ValueError as exc:
            needs = ("bad", str(exc))  # type: ignore[assignment]
        read.append(("call", call.method, needs))
    return read


def _masked_variant(call: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """The same call with another id and, where the method has a masked scope, other values in
    every parameter but the block one."""
    variant = {**call, "id": data.draw(ids)}
    keep = MASKS.get(call["method"])
    params = call.get("params")
    if keep is not None and isinstance(params, list):
        variant["params"] = [
            value if index == keep else data.draw(values) for index, value in enumerate(params)
        ]
    return variant


@settings(max_examples=400, deadline=None)
@given(call=calls(), data=st.data(), spacing=st.booleans())
def test_calls_keyed_alike_are_read_alike_by_the_pipeline(
    call: dict[str, Any], data: st.DataObject, spacing: bool
) -> None:
    variant = _masked_variant(call, data)
    one, other = _spelled(call, spacing), _spelled(variant, spacing)
    keys_one = native.call_keys(one, MASKS, MAX_PARAMS_DEPTH)
    keys_other = native.call_keys(other, MASKS, MAX_PARAMS_DEPTH)
    if keys_one is None or keys_other is None:
        return  # the server leaves one of them to the pipeline: nothing is shared
    [(masked_one, exact_one)] = keys_one
    [(masked_other, exact_other)] = keys_other
    if masked_one is not None and masked_one == masked_other:
        assert _read(one) == _read(other)
    if exact_one == exact_other:
        assert _read(one) == _read(other)


@settings(max_examples=300, deadline=None)
@given(first=calls(), second=calls())
def test_calls_the_pipeline_reads_otherwise_are_never_keyed_alike(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    one, other = _spelled(first, False), _spelled(second, False)
    keys_one = native.call_keys(one, MASKS, MAX_PARAMS_DEPTH)
    keys_other = native.call_keys(other, MASKS, MAX_PARAMS_DEPTH)
    if keys_one is None or keys_other is None or _read(one) == _read(other):
        return
    [(masked_one, exact_one)] = keys_one
    [(masked_other, exact_other)] = keys_other
    assert exact_one != exact_other
    assert masked_one is None or masked_one != masked_other


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=200))
def test_bytes_the_server_reads_as_calls_are_json_the_pipeline_parses(body: bytes) -> None:
    keys = native.call_keys(body, MASKS, MAX_PARAMS_DEPTH)
    if keys is not None:
        orjson.loads(body)  # raises if the server took what is not JSON


answers = st.one_of(
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": ids, "result": values},
    ),
    st.fixed_dictionaries(
        {"jsonrpc": st.sampled_from(["2.0", "1.0"]), "id": ids},
        optional={"result": values, "error": values},
    ),
)


@settings(max_examples=400, deadline=None)
@given(answer=answers, sent=ids, spacing=st.booleans(), reordered=st.booleans())
def test_an_answer_the_server_books_without_judging_is_one_the_judge_serves(
    answer: dict[str, Any], sent: Any, spacing: bool, reordered: bool
) -> None:
    if reordered:
        answer = dict(reversed(answer.items()))
    body = _spelled(answer, spacing)
    sent_id = json.dumps(sent, ensure_ascii=False).encode()
    if native.plain_result(body, sent_id) is not None:
        assert served_as_given(body, orjson.loads(sent_id))


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=80), sent=ids)
def test_bytes_the_server_books_as_a_plain_answer_are_served_by_the_judge(
    body: bytes, sent: Any
) -> None:
    sent_id = json.dumps(sent).encode()
    if native.plain_result(body, sent_id) is not None:
        assert served_as_given(body, orjson.loads(sent_id))


def test_a_plain_answer_is_recognized_and_an_error_is_left_to_the_judge() -> None:
    plain = b'{"jsonrpc":"2.0","id":7,"result":"0x1"}'
    assert native.plain_result(plain, b"7") == (len(plain) - 6, len(plain) - 1)
    revert = b'{"jsonrpc":"2.0","id":7,"error":{"code":3,"message":"execution reverted"}}'
    assert native.plain_result(revert, b"7") is None
    assert served_as_given(revert, 7)  # the judge serves it: it is booked after judging


heads = st.one_of(
    st.integers(0, 2**64 - 1).map(hex),
    st.integers(0, 2**70).map(lambda n: "0x" + format(n, "X")),
    st.text(alphabet="0123456789abcdefxX_ +-", max_size=20),
    st.sampled_from(["0x", "0x0", "0X10", "0x" + "0" * 17, "\\u0030x10", "0x1_0"]),
    values,
)


@given(heads, st.booleans())
@settings(max_examples=400, deadline=None)
def test_a_head_the_server_reads_is_the_one_the_judge_reads(result: Any, spacing: bool) -> None:
    """The server reads an `eth_blockNumber`'s head from a plain answer for the ledger
    (native/src/json.rs, `result_quantity`); what it reads is router/belief.py's reading, and
    what it cannot read goes to the pipeline's judge."""
    answer = _spelled({"jsonrpc": "2.0", "id": 1, "result": result}, spacing)
    if isinstance(result, str) and result.startswith("\\u"):  # an escape as the node wrote it
        answer = answer.replace(b"\\\\u", b"\\u")
    span = native.plain_result(answer, b"1")
    if span is None:
        return
    read = native.result_quantity(answer[span[0] : span[1]])
    if read is not None:
        assert head_told(answer) == read
