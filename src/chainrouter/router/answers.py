"""What a node's 2xx answer is to the call it was sent: an answer, the caller's fault, a rejection
of the request, or the node's failure (docs/security.md).

- the call's id, with `result`: `ANSWER`, returned and billed;
- the call's id, with an error other than the three below (a revert, a node's own -32005):
  `ANSWER`, returned and billed;
- the call's id or null, with error -32700, -32600 or -32602: `CALLERS_FAULT`, the error is
  returned under the caller's id, nothing is billed, no node is cooled down;
- id null, with any other error: `REJECTED`, the next node is tried, and this one is cooled down
  only if another does better;
- anything else (not JSON, not JSON-RPC 2.0, another id, an id read as a float):
  `NOT_AN_ANSWER`, the next node is tried and this one is cooled down.

An `eth_chainId` answer naming another chain than the one the node serves is not an answer
either (`names_other_chain`): the one call whose answer the router can check, and the node that
gives it is on the wrong chain, whatever its health check said.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import orjson

from chainrouter.domain.upstream_errors import classify

CALLERS_FAULT_CODES = frozenset({-32700, -32600, -32602})


class Verdict(Enum):
    ANSWER = "answer"
    CALLERS_FAULT = "callers_fault"
    REJECTED = "rejected"
    NOT_AN_ANSWER = "not_an_answer"


def judge_answer(body: bytes, request_id: Any) -> tuple[Verdict, Any]:
    """What `body` is to the call with `request_id`, and its error object, if any.

    orjson parses it (answers can be megabytes); only the id must compare exactly. The router's
    ids are strings, null or 64-bit integers (envelope.py), which orjson reads exactly; an id it
    reads as a float (a fraction, or an integer beyond 64 bits, rounded) echoes none of them.
    """
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Verdict.NOT_AN_ANSWER, None
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0" or "id" not in answer:
        return Verdict.NOT_AN_ANSWER, None
    answer_id, error = answer["id"], answer.get("error")
    if isinstance(answer_id, float):
        return Verdict.NOT_AN_ANSWER, None
    if not isinstance(error, dict):
        if answer_id == request_id and "result" in answer:
            return Verdict.ANSWER, None
        return Verdict.NOT_AN_ANSWER, None
    if answer_id == request_id or answer_id is None:
        if error.get("code") in CALLERS_FAULT_CODES:
            return Verdict.CALLERS_FAULT, error
        if answer_id is None:
            return Verdict.REJECTED, error
        return Verdict.ANSWER, error
    return Verdict.NOT_AN_ANSWER, None


def served_as_given(body: bytes, request_id: Any) -> bool:
    """Whether `body` is an answer the router serves and bills as its node gave it: under the
    call's id, a result, or an error that is the call's own outcome (a revert), neither the
    node's failure to serve it (domain/upstream_errors.py) nor the caller's fault."""
    verdict, error = judge_answer(body, request_id)
    return verdict is Verdict.ANSWER and (error is None or classify(error) is None)


def answers_call(body: bytes, request_id: Any) -> bool:
    """Whether `body` is a JSON-RPC 2.0 answer to the request with `request_id`."""
    return judge_answer(body, request_id)[0] is not Verdict.NOT_AN_ANSWER


def names_other_chain(body: bytes, chain_id: int) -> bool:
    """Whether an `eth_chainId` answer's result is a chain ID other than `chain_id`."""
    try:
        result = orjson.loads(body).get("result")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    if not isinstance(result, str) or not result.startswith("0x"):
        return True
    try:
        return int(result, 16) != chain_id
    except ValueError:
        return True


def exact_member(answer: bytes) -> tuple[dict[str, Any], bytes] | None:
    """The answer parsed exactly, and its `"result":...` or `"error":...` member as compact
    JSON; None when the answer is not one JSON-RPC object that can be.

    Nodes write compact JSON, which orjson reads and writes back byte for byte: the member is
    then exactly the node's. Otherwise (spaced JSON, an integer beyond 64 bits that orjson would
    read as a float, nesting deeper than orjson writes) the standard library, which reads every
    integer exactly, reads it again and writes the member compact."""
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parsed, dict):
        return None
    name = "result" if "result" in parsed else "error" if "error" in parsed else None
    if name is None:
        return None
    label = b'"' + name.encode() + b'":'
    try:
        if orjson.dumps(parsed) == answer.strip():
            return parsed, label + orjson.dumps(parsed[name])
    except orjson.JSONEncodeError:
        pass
    try:
        exact = json.loads(answer)
        member = json.dumps(exact[name], separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return exact, label + member.encode()  # a lone surrogate fails here: ValueError
    except (ValueError, RecursionError, TypeError, KeyError):
        return None
