"""Forwarding one JSON-RPC body along an ordered list of routes until one answers.

Failover happens on transport errors, timeouts, HTTP 5xx and 429, answers too large, and answers
that are not the JSON-RPC answer to the request (not JSON, wrong id). A JSON-RPC error object in
a well-formed answer is an answer: it is returned, and billed, like a result.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from chainrouter.domain.routing import Route
from chainrouter.jsonrpc.envelope import load_json_exactly
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
class Unserved:
    """No route answered; `error` is what the client is told."""

    error: RpcError
    attempts: int


def answers_call(body: bytes, request_id: Any) -> bool:
    """Whether `body` is a JSON-RPC 2.0 response to the request with `request_id`.

    orjson parses it (answers can be megabytes); only the id must compare exactly, and orjson
    keeps every integer within 64 bits exact. An id it read as a float may be an integer beyond
    64 bits, rounded: then the answer is parsed again by the exact parser.
    """
    try:
        answer = orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0" or "id" not in answer:
        return False
    if isinstance(answer["id"], float):
        try:
            answer = load_json_exactly(body)
        except RpcError:
            return False
    return answer["id"] == request_id and (
        "result" in answer or isinstance(answer.get("error"), dict)
    )


def failure_for(kinds: Sequence[FailureKind], skipped: int) -> RpcError:
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
        validate: Callable[[bytes, Any], bool] = answers_call,
    ) -> None:
        self._client = client
        self._attempt_timeout_s = attempt_timeout_s
        self._deadline_s = deadline_s
        self._cooldowns = cooldowns
        self._admit = admit
        self._on_latency = on_latency
        self._validate = validate

    async def forward(
        self, routes: Sequence[Route], body: bytes, request_id: Any
    ) -> Served | Unserved:
        """Try `routes` in order; stop at the first valid answer."""
        cooldowns, admit = self._cooldowns, self._admit
        started = time.monotonic()
        failures: list[FailureKind] = []
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
                cooldowns.failed(node_id)
                continue
            if not self._validate(reply.body, request_id):
                failures.append(FailureKind.INVALID_ANSWER)
                cooldowns.failed(node_id)
                continue
            cooldowns.succeeded(node_id)
            if self._on_latency is not None:
                self._on_latency(node_id, (time.monotonic() - sent) * 1000)
            return Served(route, reply.body, attempts=len(failures) + 1)
        return Unserved(failure_for(failures, skipped), attempts=len(failures))
