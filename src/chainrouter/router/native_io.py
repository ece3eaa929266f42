"""What the pipeline awaits, whichever server runs it.

Under granian (and in tests) the pipeline runs on an asyncio event loop. Under the native server
(`chainrouter._native`, docs/decisions.md) its coroutines are stepped from Rust, on the server's
thread, with no event loop there: it awaits only the three requests below, which the Rust driver
carries out and answers.

- `UpstreamPost`: a POST to a node, by the Rust HTTP client.
- `Gather`: several coroutines at once (the calls of a batch).
- `OnLoop`: an awaitable that needs asyncio (the Redis limiter), run on the worker's event loop
  thread.

`Concurrency` is how the pipeline asks for the last two without knowing which server runs it:
`ASYNCIO` or `NATIVE`, chosen when the router is assembled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

from chainrouter.router.upstream import FailureKind, UpstreamError, UpstreamReply

T = TypeVar("T")


class UpstreamPost:
    """Awaited: the node's answer (`UpstreamReply`), or an `UpstreamError`."""

    __slots__ = ("body", "timeout_s", "url")

    def __init__(self, url: str, body: bytes, timeout_s: float) -> None:
        self.url = url
        self.body = body
        self.timeout_s = timeout_s

    def __await__(self) -> Generator[Any, Any, UpstreamReply]:
        # The driver sends the body (bytes), or (failure kind, detail, HTTP status or None).
        answer = yield self
        if isinstance(answer, bytes):
            return UpstreamReply(answer)
        kind, detail, status = answer
        raise UpstreamError(FailureKind(kind), detail, status)


class Gather:
    """Awaited: the results of `awaitables`, in order, all run at once."""

    __slots__ = ("awaitables",)

    def __init__(self, awaitables: list[Coroutine[Any, Any, Any]]) -> None:
        self.awaitables = awaitables

    def __await__(self) -> Generator[Any, Any, list[Any]]:
        results: list[Any] = yield self
        return results


class OnLoop:
    """Awaited: the result of `awaitable`, run on the worker's asyncio event loop."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Coroutine[Any, Any, Any]) -> None:
        self.awaitable = awaitable

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self)


class NativeUpstream:
    """The pipeline's client to nodes under the native server: the POST is done in Rust.

    Only usable from coroutines the native driver runs; background work on the event loop (the
    health checker) keeps a Python client of its own.
    """

    def post(self, url: str, body: bytes, *, timeout_s: float) -> UpstreamPost:
        return UpstreamPost(url, body, timeout_s)

    async def close(self) -> None:
        return None  # the connections belong to the server, and close with it


class Concurrency(Protocol):
    def gather(self, awaitables: list[Coroutine[Any, Any, T]]) -> Awaitable[list[T]]: ...

    def on_loop(self, awaitable: Coroutine[Any, Any, T]) -> Awaitable[T]: ...


class _Asyncio:
    def gather(self, awaitables: list[Coroutine[Any, Any, T]]) -> Awaitable[list[T]]:
        return asyncio.gather(*awaitables)

    def on_loop(self, awaitable: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return awaitable  # already on it


class _Native:
    def gather(self, awaitables: list[Coroutine[Any, Any, T]]) -> Awaitable[list[T]]:
        return Gather(awaitables)

    def on_loop(self, awaitable: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return OnLoop(awaitable)


ASYNCIO: Concurrency = _Asyncio()
NATIVE: Concurrency = _Native()
