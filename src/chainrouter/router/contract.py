"""The contract between the request pipeline and the executors that run it.

The pipeline does no I/O. Where it needs the network or time it awaits one of the commands below
and is resumed with the command's result; an executor carries the commands out. There are two
executors: the native one in Rust (`native/`, the default) and the Python one
(`router/executors/python.py`). Both read this module, and only this module:

- the HTTP request a server hands to the router (`HttpRequest`) and the answer it writes back
  (`HttpAnswer`);
- the commands (`Forward`, `Gather`, `Race`, `Acquire`, `Join`, `Wait`, `Spawn`) and what each is
  resumed with;
- the ways a node can fail (`FailureKind`, inside a `Failure`);
- the native server's replay memo (`REPLAY_MEMO`: router/replay.py hands it answers the server
  gives again itself, router/forwards.py forwards it repeats), called with these keyword
  arguments, and the host function the server calls before it answers a repeated forward
  (`SETTLE_FORWARD`, its parameters in the order they are passed).

The Rust side declares what it expects of each (`chainrouter._native.contract()`), and
`tests/router/test_contract.py` checks that declaration against `describe()`: a change on one side
only fails there, and a native build of another contract version refuses to start. Changing
anything here means raising `VERSION` and changing `native/src/contract.rs` to match.

A command is awaited directly (`answer = await Forward(url, body, timeout_s)`): its `__await__`
hands the command itself to whoever steps the coroutine, and returns what it is resumed with.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Coroutine, Generator
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, NamedTuple

from chainrouter.ratelimit.window import Bucket

# 2: `Race`; 3: `Acquire` resumed with the seconds to wait (0.0: taken), not a bool;
# 4: `HttpRequest.websocket_key` (a WebSocket upgrade); 5: `Join`; 6: the replay memo;
# 7: repeated forwards (`install_forward`, `holds_forward`, `SETTLE_FORWARD`);
# 8: `HttpRequest.waited_s`
VERSION = 8

Program = Coroutine[Any, Any, Any]
"""A coroutine that awaits nothing but the commands below: a request, a call, a health check."""


@dataclass(slots=True)
class HttpRequest:
    """One HTTP request as a server hands it to the router, built by the executor's server."""

    method: str
    path: str  # without the query
    origin: str | None
    referer: str | None
    forwarded_for: str | None
    content_type: str | None
    peer: str  # the socket peer's IP address
    body: bytes | None  # None: larger than the server's body limit, and not read
    # A WebSocket upgrade's Sec-WebSocket-Key: the answer is 101 to accept it (the server then
    # hands the connection to the session; docs/websocket.md), else a refusal. None: not one.
    websocket_key: str | None = None
    # Seconds the server already spent on the request before handing it over: a repeated
    # forward whose node gave no plain answer (router/forwards.py). The call's deadline runs
    # from when the server began, not from the handover.
    waited_s: float = 0.0


class HttpAnswer(NamedTuple):
    """What the server writes back. A tuple, so that Rust reads it without attribute look-ups."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class FailureKind(StrEnum):
    """Why a node gave no usable answer to a `Forward`."""

    TRANSPORT = "transport"  # refused, reset, DNS, TLS, not HTTP: nothing usable came back
    TIMEOUT = "timeout"  # no complete answer within the command's time-out
    RATE_LIMITED = "rate_limited"  # HTTP 429
    HTTP_STATUS = "http_status"  # any other status outside 2xx
    TOO_LARGE = "too_large"  # the answer is larger than the executor's size bound


@dataclass(slots=True)
class Failure:
    """The result of a `Forward` that got no 2xx answer. `status` is the HTTP status, if any."""

    kind: FailureKind
    detail: str
    status: int | None


@dataclass(slots=True)
class Forward:
    """POST `body` (JSON) to the node at `url`. Resumed with the 2xx answer's body (bytes) or a
    `Failure`, within `timeout_s` seconds from the start."""

    url: str
    body: bytes
    timeout_s: float

    def __await__(self) -> Generator[Forward, bytes | Failure, bytes | Failure]:
        return (yield self)


@dataclass(slots=True)
class Gather:
    """Run `programs` at once. Resumed with their results, in order; if one raises, the first
    exception is raised here once all have ended."""

    programs: list[Program]

    def __await__(self) -> Generator[Gather, list[Any], list[Any]]:
        return (yield self)


@dataclass(slots=True)
class Race:
    """Run `programs` at once, program i starting `delays_s[i]` seconds after the race began
    (0: at once; negative or NaN: at once). Resumed with `(i, result)` of the first program to
    return something other than None; the others are cancelled first: one not yet started is
    closed unstarted, one running is closed where it waits, its command in flight abandoned (a
    `Forward` cut off mid-answer). When every program has returned None: `(-1, None)`. If one
    raises, the others are cancelled and the exception is raised here.

    This is the shape of a hedged call: the first attempt at once, the next one a delay later
    unless the first has answered by then (router/stages/attempt.py)."""

    programs: list[Program]
    delays_s: list[float]

    def __await__(self) -> Generator[Race, tuple[int, Any], tuple[int, Any]]:
        return (yield self)


@dataclass(slots=True)
class Acquire:
    """Take every bucket's amount from the rate limiter, or none. Resumed with 0.0 when all had
    room, else with the seconds until they would. Carried out by the executor's Python side (the
    limiter may be in Redis)."""

    buckets: list[Bucket]

    def __await__(self) -> Generator[Acquire, float, float]:
        return (yield self)


@dataclass(slots=True)
class Join:
    """Resumed with the result of `future` once it is done (its exception raised here, if it
    ended with one). The host's Python side ends it: the response cache's Redis look-up, or the
    call in flight that identical calls joined (router/flights.py)."""

    future: concurrent.futures.Future[Any]

    def __await__(self) -> Generator[Join, Any, Any]:
        return (yield self)


@dataclass(slots=True)
class Wait:
    """Resumed with None, `seconds` later (negative or NaN: at once)."""

    seconds: float

    def __await__(self) -> Generator[Wait, None, None]:
        return (yield self)


@dataclass(slots=True)
class Spawn:
    """Start `program` on its own and resume at once with None. Its failure is logged; it ends
    with the executor at the latest."""

    program: Program

    def __await__(self) -> Generator[Spawn, None, None]:
        return (yield self)


COMMANDS = (Forward, Gather, Race, Acquire, Join, Wait, Spawn)
Command = Forward | Gather | Race | Acquire | Join | Wait | Spawn


# The native server's replay memo, `chainrouter._native.ReplayMemo`: each method and its
# parameters, in order (router/replay.py calls them with these names as keywords).
REPLAY_MEMO: dict[str, list[str]] = {
    "__new__": ["max_bytes", "max_body_bytes", "max_age_s", "batch_prefix"],
    "install": [
        "token",
        "generation",
        "path",
        "origin",
        "referer",
        "content_type",
        "body",
        "status",
        "headers",
        "answer",
    ],
    "install_forward": [
        "token",
        "generation",
        "path",
        "origin",
        "referer",
        "content_type",
        "body",
        "url",
        "sent",
        "answer",
        "timeout_s",
        "headers",
        "flight",
        "hand_head",
    ],
    "replay": ["path", "origin", "referer", "content_type", "body"],
    "holds_forward": ["path", "origin", "referer", "content_type", "body"],
    "flying": ["flight"],
    "landed": ["flight"],
    "follow": ["flight", "future"],
    "clear": [],
    "generation": [],
    "next_batch_id": [],
    "drain": [],
    "stats": [],
    "scan_ids": ["body"],
}

# `Forwards.settle` (router/forwards.py), which the native server calls with a list of the
# repeated forwards whose nodes have answered (or whose leaders have: coalesced), each a tuple of
# these fields in this order; it returns a verdict for each: True, billed, and the answer is
# given; False, the pipeline answers. `followers`: the futures `follow` was given, which Python
# releases.
SETTLE_FORWARD = ["token", "elapsed_s", "answered", "head", "leader", "answer", "followers"]


def describe() -> dict[str, Any]:
    """The contract as data, in the shape `chainrouter._native.contract()` declares it."""

    def field_names(kind: type) -> list[str]:
        return [field.name for field in fields(kind)]

    return {
        "version": VERSION,
        "module": __name__,
        "request": field_names(HttpRequest),
        "answer": list(HttpAnswer._fields),
        "failure": field_names(Failure),
        "failure_kinds": [kind.value for kind in FailureKind],
        "commands": {kind.__name__: field_names(kind) for kind in COMMANDS},
        "replay_memo": REPLAY_MEMO,
        "settle_forward": SETTLE_FORWARD,
    }
