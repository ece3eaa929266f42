"""Sending a JSON-RPC body to one upstream node, with a deadline and a size bound.

`UpstreamClient` is the extension point (`Http1Upstream` in production; tests use real
servers, never a mock). Every way a node can fail is reported as an `UpstreamError` with a kind,
which decides whether the router fails over and what the client is told when every node fails.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class FailureKind(StrEnum):
    TRANSPORT = "transport"  # refused, reset, DNS, TLS: nothing usable came back
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"  # HTTP 429
    HTTP_STATUS = "http_status"  # any other non-2xx status
    INVALID_ANSWER = "invalid_answer"  # 2xx, but not the JSON-RPC answer to what was asked
    TOO_LARGE = "too_large"


class UpstreamError(Exception):
    def __init__(self, kind: FailureKind, detail: str, status: int | None = None) -> None:
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.detail = detail
        self.status = status


# Built per call: under mypyc a generated __init__ would run interpreted, this one is compiled.
@dataclass(slots=True, init=False)
class UpstreamReply:
    body: bytes

    def __init__(self, body: bytes) -> None:
        self.body = body


class UpstreamClient(Protocol):
    # Declared as returning an awaitable rather than as a coroutine, so that a client may hand
    # back what its server awaits itself (the native one's request object) with no coroutine
    # around it: one object and one resumption less per call.
    def post(self, url: str, body: bytes, *, timeout_s: float) -> Awaitable[UpstreamReply]:
        """POST `body`; the awaited result is a 2xx answer's body, or `UpstreamError` is
        raised."""
        ...

    async def close(self) -> None: ...
