"""Forwarding one JSON-RPC body along an ordered list of routes until one answers.

Failover happens on transport errors, timeouts, HTTP 4xx and 5xx, 429, answers too large, and
answers that are not the JSON-RPC answer to the request (not JSON, wrong id). A JSON-RPC error
object in a well-formed answer is an answer: it is returned, and billed, like a result.

What a caller sends must never cost a node its health (docs/security.md):
- An answer saying the request itself is invalid (-32700, -32600, -32602, with the call's id or
  null) is the caller's answer: returned at once, not billed, and no node is cooled down.
- A rejection of the request (an HTTP 4xx other than 429, or a JSON-RPC error whose id is null)
  sends the call on to the next route, but cools its node down only when another node did
  better: when every node tried rejected the request the same way, the request is at fault.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from chainrouter.domain.routing import Route
from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.router.cooldown import MemoryCooldowns
from chainrouter.router.upstream import FailureKind, UpstreamClient, UpstreamError


# Built per call: under mypyc a generated __init__ would run interpreted, this one is compiled.
@dataclass(slots=True, init=False)
class Served:
    route: Route
    body: bytes  # the upstream's answer, byte for byte
    attempts: int  # routes tried; 1 means the first choice answered

    def __init__(self, route: Route, body: bytes, attempts: int) -> None:
        self.route = route
        self.body = body
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class CallersFault:
    """A node answered that the request itself is invalid; `error` is its JSON-RPC error object,
    returned to the caller under the call's own id."""

    error: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Unserved:
    """No route answered; `error` is what the client is told."""

    error: RpcError
    attempts: int


CALLERS_FAULT_CODES = frozenset({-32700, -32600, -32602})


class Verdict(Enum):
    ANSWER = "answer"  # the JSON-RPC answer to the call: returned and billed
    CALLERS_FAULT = "callers_fault"  # the request is invalid, says the node: returned unbilled
    REJECTED = "rejected"  # an error without an id: this node would not take the request
    NOT_AN_ANSWER = "not_an_answer"  # anything else: the node failed


def judge_answer(body: bytes, request_id: Any) -> tuple[Verdict, Any]:
    """What a node's 2xx `body` is to the call with `request_id`, and its error object, if any.

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


def answers_call(body: bytes, request_id: Any) -> bool:
    """Whether `body` is a JSON-RPC 2.0 answer to the request with `request_id`."""
    return judge_answer(body, request_id)[0] is not Verdict.NOT_AN_ANSWER


def failure_for(kinds: Sequence[FailureKind], skipped: int, rejected_alike: str = "") -> RpcError:
    """What the client is told when nothing answered (spec section 7).

    `kinds` are the failures of the routes tried; `skipped` counts routes not tried because
    they were cooling down or at a rate limit.
    """
    if not kinds:
        if skipped:
            return RpcError(
                429,
                RpcCode.ALL_NODES_ON_COOLDOWN,
                "all nodes are on cooldown or at their rate limits; retry shortly",
            )
        return RpcError(424, RpcCode.NO_PROVIDERS_AVAILABLE, "no providers available")
    if rejected_alike:
        return RpcError(
            424,
            RpcCode.ALL_NODES_FAILED,
            f"every upstream provider tried rejected this request ({rejected_alike})",
        )
    if all(k is FailureKind.RATE_LIMITED for k in kinds):
        return RpcError(
            429, RpcCode.ALL_NODES_ON_COOLDOWN, "all upstream providers are rate limited"
        )
    if all(k is FailureKind.TIMEOUT for k in kinds):
        return RpcError(504, RpcCode.ALL_NODES_FAILED, "upstream providers timed out")
    return RpcError(424, RpcCode.ALL_NODES_FAILED, f"all {len(kinds)} upstream providers failed")


class Forwarder:
    """Forwards bodies along routes with one set of timeouts, cooldowns, limits and latency
    tracking. Built once per router process, so that a call passes only what varies.

    A route is skipped, not tried, while its node cools down or when `admit` refuses it (its
    node, plan or method is at a rate limit). `admit` returns None for a route without limits,
    so that the common case costs no await.
    """

    def __init__(
        self,
        client: UpstreamClient,
        *,
        attempt_timeout_s: float,
        deadline_s: float,
        cooldowns: MemoryCooldowns,
        admit: Callable[[Route], Awaitable[bool] | None] | None = None,
        on_latency: Callable[[int, float], None] | None = None,
    ) -> None:
        self._client = client
        self._attempt_timeout_s = attempt_timeout_s
        self._deadline_s = deadline_s
        self._cooldowns = cooldowns
        self._admit = admit
        self._on_latency = on_latency

    async def forward(
        self, routes: Sequence[Route], body: bytes, request_id: Any
    ) -> Served | CallersFault | Unserved:
        """Try `routes` in order; stop at the first valid answer."""
        cooldowns, admit = self._cooldowns, self._admit
        started = time.monotonic()
        failures: list[FailureKind] = []
        # Nodes that rejected the request, and how: cooled down only if not all alike.
        rejections: list[tuple[int, str]] = []
        skipped = 0
        for route in routes:
            node_id = route.node.node_id
            if not cooldowns.available(node_id):
                skipped += 1
                continue
            if admit is not None and (pending := admit(route)) is not None and not await pending:
                skipped += 1
                continue
            sent = time.monotonic()
            remaining = self._deadline_s - (sent - started)
            if remaining <= 0:
                failures.append(FailureKind.TIMEOUT)
                break
            try:
                reply = await self._client.post(
                    route.node.url, body, timeout_s=min(self._attempt_timeout_s, remaining)
                )
            except UpstreamError as exc:
                failures.append(exc.kind)
                if exc.status is not None and 400 <= exc.status < 500 and exc.status != 429:
                    rejections.append((node_id, f"HTTP {exc.status}"))
                else:
                    cooldowns.failed(node_id)
                continue
            verdict, error = judge_answer(reply.body, request_id)
            if verdict is Verdict.CALLERS_FAULT:
                self._cool_down(rejections)  # this node read the request; they would not
                return CallersFault(error)
            if verdict is Verdict.REJECTED:
                failures.append(FailureKind.INVALID_ANSWER)
                rejections.append((node_id, f"JSON-RPC error {error.get('code')!r}"))
                continue
            if verdict is Verdict.NOT_AN_ANSWER:
                failures.append(FailureKind.INVALID_ANSWER)
                cooldowns.failed(node_id)
                continue
            cooldowns.succeeded(node_id)
            if self._on_latency is not None:
                self._on_latency(node_id, (time.monotonic() - sent) * 1000)
            self._cool_down(rejections)
            return Served(route, reply.body, attempts=len(failures) + 1)
        alike = len(rejections) == len(failures) and len({how for _, how in rejections}) == 1
        if not alike:
            self._cool_down(rejections)
        rejected_alike = rejections[0][1] if alike else ""
        return Unserved(failure_for(failures, skipped, rejected_alike), attempts=len(failures))

    def _cool_down(self, rejections: list[tuple[int, str]]) -> None:
        for node_id, _ in rejections:
            self._cooldowns.failed(node_id)
