"""The contract between the request pipeline and the executors that run it, declared once.

The pipeline does no I/O. Where it needs the network or time it awaits one of the commands below
and is resumed with the command's result; an executor carries the commands out. There are two
executors: the native one in Rust (`native/`, the default) and the Python one
(`router/executors/python.py`). Everything that crosses between the pipeline and an executor is
declared here, and only here:

- the HTTP request a server hands to the router (`HttpRequest`, with the `Attempted` calls the
  native server made before it handed the request over) and the answer it writes back
  (`HttpAnswer`, with the `Decision`s the native server may apply to later calls in their scope);
- the commands (`Forward`, `Gather`, `Race`, `Acquire`, `Join`, `Wait`, `Spawn`, `Coalesce`) and
  what each is resumed with; the ways a node can fail (`FailureKind`, inside a `Failure`); how a
  coalesced call ends for the calls that joined it (`Landed`, handed to `Leading.land`);
- what the native server hands the ledger for the calls it served itself (`Receipt`s to judge,
  `Tally`s of plain answers, in groups) and what it is told back (`Verdict`);
- the native module's classes and functions (`router/native_api.py`).

The Rust side is generated from these declarations (`native/src/contract_gen.rs`: every type's
name and field names, which the Rust code reads and builds objects by; `python -m
chainrouter.router.contract_gen` writes it, and the stub `chainrouter/_native.pyi`), and the tests
check that the generated files are current and that the built module matches them field by field
(`tests/router/test_contract.py`). A native build of another `VERSION` refuses to start.

A command is awaited directly (`answer = await Forward(url, body, timeout_s)`): its `__await__`
hands the command itself to whoever steps the coroutine, and returns what it is resumed with.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Coroutine, Generator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from chainrouter.domain.enums import Scenario
from chainrouter.domain.verification import Verified
from chainrouter.ratelimit.window import Bucket

# 9: one data plane: decisions in `HttpAnswer`, `Attempted` calls in `HttpRequest`, `Coalesce`,
# `Receipt` and `Verdict`; the Rust side generated from this module. 11: a decision's
# `audit_every` and a receipt's `audited` (audits). 12: a decision's `max_answer_bytes`.
# 13: `Landed.verified` (the calls that joined a checked answer say so).
VERSION = 13

Program = Coroutine[Any, Any, Any]
"""A coroutine that awaits nothing but the commands below: a request, a call, a health check."""


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
class Attempted:
    """A call the native server sent to a node under a decision before it handed the request to
    the pipeline (its node did not answer plainly, or the ledger did not take every call of the
    request). It stands for the pipeline's first attempt at that call on that node, which is then
    not sent again (router/stages/attempt.py)."""

    call: int  # the call's place in the request: 0 for a single call, its index in a batch
    node_id: int
    answer: bytes | None  # the node's 2xx answer; None with a failure
    failure: Failure | None
    elapsed_s: float  # from sending to the answer or the failure
    timeout_s: float  # what the server waited at most


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
    # Seconds the server already spent on the request before handing it over (its calls sent
    # under decisions): the calls' deadlines run from when the server began.
    waited_s: float = 0.0
    # The calls it sent meanwhile, and what their nodes did: each the first attempt at its call.
    attempts: list[Attempted] = field(default_factory=list)


class DecisionScope(StrEnum):
    """Which later calls a decision applies to, besides the request's path, Origin, Referer and
    Content-Type, which must always be the same (docs/architecture.md, "Scoped decisions")."""

    EXACT = "exact"  # the same call, byte for byte but for its id
    # The same call but for its id and every parameter but the block parameter, which no stage
    # read (`masks` of the native memo: `domain/requirements.py`, `unread_params`).
    MASKED = "masked"


@dataclass(frozen=True, slots=True)
class Decision:
    """What the pipeline decided for one call of a request, for the native server to apply to
    later calls in the same scope without the pipeline: send the call to `url` (a forward) or
    give `member` under the caller's id (an answer). It stands while every epoch slot it read
    holds the value it had (router/epochs.py), for at most the memo's maximum age; a call it
    serves spends `spend_nano` from the customer's grant (router/fast/grants.py) and goes to the
    ledger with `booking` (a `Receipt`)."""

    call: int  # the call's place in the request it was decided for
    scope: DecisionScope
    epoch_slots: list[int]
    epoch_values: list[int]
    customer_id: int
    # Spent from the customer's grant for each call served (0: nothing; a key that bypasses
    # the credit check spends nothing, and is booked all the same), and for a call that joins
    # an identical one in flight.
    spend_nano: int
    join_spend_nano: int
    url: str  # the node a forward sends the call to; "" for an answer
    node_id: int
    timeout_s: float  # how long a forward waits on its node before the pipeline takes over
    # The most calls of one request the server sends the node in one batch (1: each alone).
    node_batch: int
    # Identical calls in flight at once share one attempt (coalescing) under a key of this chain
    # and, for a read of the head, this seen head; `flight_chain` 0: never coalesced.
    flight_chain: int
    flight_seen: int  # -1: no seen head in the key
    member: bytes | None  # an answer's `"result":...`: the JSON after its id
    headers: list[tuple[str, str]]  # the answer's headers, but X-Batch-Id
    booking: object  # what the ledger books a call of this scope as (router/ledger.py)
    # Every answer goes to the ledger to be read (an `eth_blockNumber`'s head), plain or not.
    judge_each: bool = False
    # Every `audit_every`-th call the decision serves goes to the ledger as a `Receipt` with the
    # call's bytes (`audited`), however plain its answer, for the audits to sample
    # (router/audits.py: the rate is theirs, the server only counts). 0: none.
    audit_every: int = 0
    # The bound on the bytes of its request's answers (router/stages/bounds.py): a request
    # whose answers pass it is not served under decisions but handed to the pipeline, which
    # withholds the answers past it. 0: no bound.
    max_answer_bytes: int = 0


@dataclass(slots=True)
class HttpAnswer:
    """What the server writes back, and the decisions it may apply to later calls."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    decisions: list[Decision] = field(default_factory=list)


@dataclass(slots=True)
class Receipt:
    """A call the native server served under a decision, for the ledger to judge and book
    (router/fast/settle.py): the receipts of one request share `request`, and the request is
    served only if every one of them is (with its `Tally`s' calls)."""

    decision: Decision
    request: int
    # The id the node's answer must carry (JSON): the call's own as the client wrote it, or,
    # for a call that joined, the one the call it joined was sent under.
    call_id: bytes
    answer: bytes | None  # the node's answer (a failure never comes here); None for an answer
    elapsed_s: float
    joined: bool  # it took the answer of an identical call in flight (coalescing)
    # The call as the client wrote it, when it is its decision's `audit_every`-th: the audits'
    # sample (router/audits.py). None: not sampled.
    audited: bytes | None = None


@dataclass(slots=True)
class Tally:
    """The calls one decision served in a group whose nodes answered plainly (the sent id and a
    `result`, recognized by the server: native/src/json.rs, `plain_result`), or that took the
    decision's own answer: nothing to judge, each booked unless its request is refused for
    another call's receipt. One entry per call, in the lists."""

    decision: Decision
    requests: list[int]  # each call's request, numbered as the receipts' are
    elapsed_s: list[float]
    # For a decision whose every answer the ledger reads (`judge_each`: an `eth_blockNumber`),
    # the head each call's plain result holds, as the server read it (native/src/json.rs,
    # `result_quantity`; -1: none it could read, which the ledger refuses to the pipeline);
    # None for the others.
    heads: list[int] | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """The ledger's word on a receipt: `served`, the call's answer goes to the client (billed);
    else the pipeline answers the request. `member`: for a call that `joined`, the answer's
    `"result":...` to give under its own id."""

    served: bool
    member: bytes | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """What the ledger tells the server of a group: a verdict for each receipt, in order, and
    the requests it refused whole for a tallied call (an `eth_blockNumber` older than the key
    had seen): a request is served when each of its receipts is and it is not refused."""

    verdicts: list[Verdict]
    refused: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Landed:
    """How a coalesced call ended, for the calls that joined it (router/stages/cache.py)."""

    scenario: Scenario
    status: int
    member: bytes  # `"result":...` or `"error":...`, the JSON after the answer's id
    retry_after_s: float | None = None  # refused for limits: when a retry could succeed
    head: int | None = None  # the newest block the answer is known to reflect (None: unknown)
    verified: Verified | None = None  # how the answer was checked before it was served


class Leading(Protocol):
    """A call that leads a flight (`Coalesce`): `land` hands its outcome to the calls that joined
    it (None: cut short, they are attempted on their own). An executor lands a flight whose
    leader never does as cut short."""

    def land(self, landed: Landed | None) -> None: ...


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
    ended with one). The host's Python side ends it: the response cache's Redis look-up."""

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


@dataclass(slots=True)
class Coalesce:
    """Lead or join the flight `key` in the executor's one flight table: identical read-only
    calls in flight at once share one attempt (design notes, "Response cache and coalescing").
    Resumed at once with a `Leading` when no call leads the flight (this one then does, and
    lands it); else, once the leader has landed, with its `Landed`, or None when it was cut
    short (this call is attempted on its own)."""

    key: str

    def __await__(
        self,
    ) -> Generator[Coalesce, Leading | Landed | None, Leading | Landed | None]:
        return (yield self)


COMMANDS = (Forward, Gather, Race, Acquire, Join, Wait, Spawn, Coalesce)
Command = Forward | Gather | Race | Acquire | Join | Wait | Spawn | Coalesce

# The types that cross the boundary as objects, each with the fields the Rust side reads or
# builds it by (contract_gen.py writes them into native/src/contract_gen.rs).
CROSSING: tuple[type, ...] = (
    HttpRequest,
    HttpAnswer,
    Failure,
    Attempted,
    Decision,
    Receipt,
    Tally,
    Verdict,
    Settled,
    Landed,
    *COMMANDS,
)
