"""What the pipeline awaits, whichever server runs it.

Under granian (and in tests) the pipeline runs on an asyncio event loop. Under the native server
(`chainrouter._native`, docs/decisions.md) its coroutines are stepped from Rust, on the server's
thread, with no event loop there: it awaits only the requests below, which the Rust driver
carries out and answers.

- `UpstreamPost`: a POST to a node, by the Rust HTTP client.
- `Gather`: several coroutines at once (the calls of a batch).
- `OnLoop`: an awaitable that needs asyncio (the Redis limiter), run on the worker's event loop
  thread.
- `Sleep` and `Spawn`: a pause, and a coroutine started on its own. The health checker uses them
  to run on the server's thread, beside the requests: on the event loop's thread, its hundred
  checks a second took the interpreter's lock from the requests (docs/benchmarks.md).

`Concurrency` is how the pipeline and the health checker ask for all but the first without
knowing which server runs them: `ASYNCIO` or `NATIVE`, chosen when the router is assembled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, Protocol, TypeVar

from chainrouter.router.upstream import FailureKind, UpstreamError, UpstreamReply

T = TypeVar("T")
_log = logging.getLogger(__name__)


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


class Sleep:
    """Awaited: nothing, `seconds` later."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __await__(self) -> Generator[Any, Any, None]:
        yield self


class Spawn:
    """Awaited: nothing, at once; `coroutine` runs on its own, and a failure of it is logged."""

    __slots__ = ("coroutine",)

    def __init__(self, coroutine: Coroutine[Any, Any, None]) -> None:
        self.coroutine = coroutine

    def __await__(self) -> Generator[Any, Any, None]:
        yield self


class NativeUpstream:
    """The pipeline's client to nodes under the native server: the POST is done in Rust.

    Only usable from coroutines the native driver runs.
    """

    def post(self, url: str, body: bytes, *, timeout_s: float) -> UpstreamPost:
        return UpstreamPost(url, body, timeout_s)

    async def close(self) -> None:
        return None  # the connections belong to the server, and close with it


class Background(Protocol):
    """Coroutines started on their own by one owner (`Concurrency.background`)."""

    def start(self, coroutine: Coroutine[Any, Any, None]) -> Awaitable[None]: ...

    def cancel(self) -> None:
        """Cancel those still running, where the server can; the owner calls it as it ends."""


class Concurrency(Protocol):
    def gather(self, awaitables: list[Coroutine[Any, Any, T]]) -> Awaitable[list[T]]: ...

    def on_loop(self, awaitable: Coroutine[Any, Any, T]) -> Awaitable[T]: ...

    def sleep(self, seconds: float) -> Awaitable[None]: ...

    def background(self) -> Background: ...


class _AsyncioBackground:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references

    async def start(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            _log.error("a background coroutine failed", exc_info=task.exception())

    def cancel(self) -> None:
        for task in self._tasks:
            task.cancel()


class _NativeBackground:
    def start(self, coroutine: Coroutine[Any, Any, None]) -> Awaitable[None]:
        return Spawn(coroutine)

    def cancel(self) -> None:
        # The driver has no handle on what it spawned: each coroutine ends on its own (a health
        # check within its time-out), or with the server's runtime.
        return None


class _Asyncio:
    def gather(self, awaitables: list[Coroutine[Any, Any, T]]) -> Awaitable[list[T]]:
        return asyncio.gather(*awaitables)

    def on_loop(self, awaitable: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return awaitable  # already on it

    def sleep(self, seconds: float) -> Awaitable[None]:
        return asyncio.sleep(seconds)

    def background(self) -> Background:
        return _AsyncioBackground()


class _Native:
    def gather(self, awaitables: list[Coroutine[Any, Any, T]]) -> Awaitable[list[T]]:
        return Gather(awaitables)

    def on_loop(self, awaitable: Coroutine[Any, Any, T]) -> Awaitable[T]:
        return OnLoop(awaitable)

    def sleep(self, seconds: float) -> Awaitable[None]:
        return Sleep(seconds)

    def background(self) -> Background:
        return _NativeBackground()


ASYNCIO: Concurrency = _Asyncio()
NATIVE: Concurrency = _Native()
