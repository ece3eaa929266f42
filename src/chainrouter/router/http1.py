"""The router's upstream HTTP/1.1 client: keep-alive pools on asyncio protocols, httptools parsing.

Why not a library client: measured in `bench/transport.py`, every library client we tried
(pyreqwest, aiohttp, httpx, aiosonic) spends far more per call than the forward itself; the best,
pyreqwest, crosses into its own Rust runtime and back on every call. A protocol per connection on
the server's own event loop, with llhttp (through httptools, the parser uvicorn uses) doing the
parsing, forwards over twice as many calls per second. It needs only a narrow slice of HTTP:
POST one body, read one framed answer, keep the connection for the next call.

What it does: one request at a time per connection; requests are written together at the end of
the event loop's turn; idle connections are kept per origin (last used first) and swept after
`idle_s`; an idle connection the server closed before answering is retried once on
a fresh one (nothing was answered, so nothing was processed twice); answers are bounded in size
and, with the connection set-up, in time (an answer's time-out is checked in 10 ms ticks, so it
fires up to 10 ms late); `https://` uses the system's CAs plus an optional CA file.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import unquote, urlsplit

import httptools

from chainrouter.router.upstream import FailureKind, UpstreamError, UpstreamReply

_PRINTABLE = re.compile(r"[\x21-\x7e]+")  # visible ASCII: nothing that could end a header line
_MAX_TARGETS = 65_536  # parsed-URL cache bound; node URLs are far fewer
_TICK_S = 0.01  # time-outs are checked in ticks of this length, so they fire up to this late
_FRAMING_HEADERS = frozenset({b"content-length", b"transfer-encoding"})
_FRAMING_LENGTHS = frozenset(len(name) for name in _FRAMING_HEADERS)


@dataclass(frozen=True, slots=True)
class _Target:
    """A node URL parsed once: where to connect and the request head up to the length."""

    origin: tuple[str, int, bool]  # host, port, tls: the pool key
    server_hostname: str | None
    head: bytes  # request line and headers, ending in "Content-Length: "


class _StaleConnectionError(Exception):
    """A kept connection was closed by the server before any byte of an answer came back."""


class _Exchange(asyncio.Protocol):
    """One connection; it carries one request and answer at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop, max_bytes: int) -> None:
        self.loop = loop
        self._max = max_bytes
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self.idle_since = 0.0
        self.usable = True  # false once closed, broken or left mid-answer
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._timeout_s = 0.0  # of the exchange in flight, for the error message
        self.due_tick = 0  # the time-out tick of the exchange in flight
        self._chunks: list[bytes] = []
        self._size = 0
        self._status = 0
        self._framed = False  # Content-Length or chunked; otherwise the body ends at close
        self._head_done = False
        self._received = False

    # asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection is out of step
            self.close()
            return
        self._received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError:
            if self._waiter is not None:  # not already settled by a callback
                self._fail(UpstreamError(FailureKind.TRANSPORT, "malformed HTTP answer"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        if self._waiter is None or self._waiter.done():
            return
        if self._head_done and not self._framed:
            self._settle()  # an answer delimited by the end of the connection (HTTP/1.0 style)
        elif not self._received and self.reused:
            self._waiter.set_exception(_StaleConnectionError())
            self._waiter = None
        else:
            self._fail(UpstreamError(FailureKind.TRANSPORT, "connection closed mid-answer"))

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        # The length test first: most headers are neither, and it spares lower-casing them.
        if len(name) in _FRAMING_LENGTHS and name.lower() in _FRAMING_HEADERS:
            self._framed = True

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        self._head_done = True

    def on_body(self, body: bytes) -> None:
        if self._waiter is None:
            return
        self._size += len(body)
        if self._size > self._max:
            if 200 <= self._status < 300:
                self._fail(UpstreamError(FailureKind.TOO_LARGE, f"answer over {self._max} bytes"))
            else:
                self._settle()  # the status is the failure; the rest of the body is not needed
            return
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._waiter is None:
            return
        if self._status < 200:  # 1xx: an interim answer; the real one follows
            self._reset_answer()
            self._received = True  # the request was taken: never resend it as stale
            return
        if not self._parser.should_keep_alive():
            self.usable = False
        self._settle()

    # the caller's side

    def expect_answer(self, timeout_s: float, due_tick: int) -> asyncio.Future[tuple[int, bytes]]:
        """Get ready for the answer to a request about to be written: its status and body."""
        waiter: asyncio.Future[tuple[int, bytes]] = self.loop.create_future()
        self._waiter = waiter
        self._timeout_s = timeout_s
        self.due_tick = due_tick
        self._reset_answer()
        return waiter

    def tick_passed(self, tick: int) -> None:
        """Time the exchange in flight out if it was due by `tick`."""
        if self.due_tick <= tick and self._waiter is not None and not self._waiter.done():
            self._fail(UpstreamError(FailureKind.TIMEOUT, f"no answer within {self._timeout_s} s"))

    def close(self) -> None:
        self.usable = False
        if self.transport is not None:
            self.transport.abort()

    def _reset_answer(self) -> None:
        self._chunks = []
        self._size = 0
        self._status = 0
        self._framed = False
        self._head_done = False
        self._received = False

    def _settle(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            chunks = self._chunks
            waiter.set_result((self._status, chunks[0] if len(chunks) == 1 else b"".join(chunks)))
        if not self.usable or self._size > self._max:
            self.close()

    def _fail(self, error: UpstreamError) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()


class _TimeOuts:
    """The time-outs of exchanges in flight, gathered by tick: one timer for each tick that has
    something due rather than one per call. Setting and cancelling a uvloop timer costs about
    2 µs, an eighth of the client's CPU per call (measured); here a call costs a list append.

    A connection is listed under the tick its exchange is due by; when the tick passes, each
    listed connection times out its exchange if that is still unanswered and due. An exchange
    answered in time, or one that has made way for the next on the same connection, is left
    alone, so nothing needs removing when an answer comes.
    """

    def __init__(self) -> None:
        self._due: dict[int, list[_Exchange]] = {}

    def watch(self, connection: _Exchange, deadline: float) -> int:
        """List `connection` under the first tick at or after `deadline`; returns the tick."""
        tick = int(deadline / _TICK_S) + 1
        due = self._due.get(tick)
        if due is None:
            due = self._due[tick] = []
            connection.loop.call_at(tick * _TICK_S, self._pass, tick)
        due.append(connection)
        return tick

    def _pass(self, tick: int) -> None:
        for connection in self._due.pop(tick, ()):
            connection.tick_passed(tick)


class Http1Upstream:
    """The production `UpstreamClient`: pooled keep-alive HTTP/1.1 to every node."""

    def __init__(
        self,
        *,
        max_response_bytes: int,
        connect_timeout_s: float = 5.0,
        idle_s: float = 30.0,
        max_idle_per_origin: int = 256,
        ca_file: Path | None = None,
    ) -> None:
        self._max = max_response_bytes
        self._connect_timeout_s = connect_timeout_s
        self._idle_s = idle_s
        self._max_idle = max_idle_per_origin
        self._tls = ssl.create_default_context()
        self._tls.set_alpn_protocols(["http/1.1"])
        if ca_file is not None:
            self._tls.load_verify_locations(cafile=ca_file)
        self._targets: dict[str, _Target] = {}
        self._idle: dict[tuple[str, int, bool], deque[_Exchange]] = {}
        self._outbox: list[tuple[_Exchange, bytes]] = []
        self._time_outs = _TimeOuts()
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def idle_connections(self) -> int:
        return sum(len(pool) for pool in self._idle.values())

    async def post(self, url: str, body: bytes, *, timeout_s: float) -> UpstreamReply:
        target = self._targets.get(url) or self._parse(url)
        request = target.head + b"%d\r\n\r\n" % len(body) + body
        connection = self._take_idle(target.origin)
        # A kept connection knows its loop: asking asyncio costs a system call (getpid).
        loop = connection.loop if connection is not None else asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        for _ in range(2):  # a second go, on a new connection, only after a stale kept one
            if connection is None:
                connection = await self._connect(target, deadline - loop.time())
            waiter = connection.expect_answer(
                timeout_s, self._time_outs.watch(connection, deadline)
            )
            if not self._outbox:
                loop.call_soon(self._write_outbox)
            self._outbox.append((connection, request))
            try:
                status, answer = await waiter
            except _StaleConnectionError:
                self._drop_idle(target.origin)  # its siblings are likely closed too
                connection = None
                continue
            except BaseException:
                connection.close()  # cancelled or failed mid-exchange: never reuse it
                raise
            self._keep(target.origin, connection)
            return _classify(status, answer)
        raise UpstreamError(FailureKind.TRANSPORT, "the node closed the connection")

    def _write_outbox(self) -> None:
        # Requests go out together at the end of the loop's turn, not one by one as each call
        # gets there: on a loaded router the first write wakes the node and the rest find it
        # awake. Measured in process against nginx: 54 to 32 us per call (docs/decisions.md).
        outbox, self._outbox = self._outbox, []
        for connection, request in outbox:
            transport = connection.transport
            if transport is not None and not transport.is_closing():
                transport.write(request)

    def _sweep_idle(self) -> None:
        # Without this, every node ever called would keep a socket open until its next call:
        # with thousands of nodes checked in slow rounds, that is thousands of descriptors.
        self._sweep = None
        expired = time.monotonic() - self._idle_s
        for origin, pool in list(self._idle.items()):
            _close_expired(pool, expired)
            if not pool:
                del self._idle[origin]
        if self._idle and not self._closed:
            self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        self._sweep = asyncio.get_running_loop().call_later(self._idle_s, self._sweep_idle)

    async def close(self) -> None:
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
        for pool in self._idle.values():
            for connection in pool:
                connection.close()
        self._idle.clear()

    def _take_idle(self, origin: tuple[str, int, bool]) -> _Exchange | None:
        pool = self._idle.get(origin)
        if not pool:
            return None
        idle_before = time.monotonic() - self._idle_s
        while pool:
            connection = pool.pop()  # the most recently used
            if connection.idle_since < idle_before:  # and so are all the others
                connection.close()
                _close_expired(pool, idle_before)
                return None
            transport = connection.transport
            if connection.usable and transport is not None and not transport.is_closing():
                connection.reused = True
                return connection
        return None

    def _drop_idle(self, origin: tuple[str, int, bool]) -> None:
        for connection in self._idle.pop(origin, ()):
            connection.close()

    def _keep(self, origin: tuple[str, int, bool], connection: _Exchange) -> None:
        if not connection.usable or self._closed:
            connection.close()
            return
        pool = self._idle.get(origin)
        if pool is None:
            pool = self._idle[origin] = deque()
        if len(pool) >= self._max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        pool.append(connection)
        if self._sweep is None:
            self._schedule_sweep()

    async def _connect(self, target: _Target, remaining_s: float) -> _Exchange:
        host, port, tls = target.origin
        limit = min(self._connect_timeout_s, remaining_s)
        if limit <= 0:
            raise UpstreamError(FailureKind.TIMEOUT, "no time left to connect")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(limit):
                _, connection = await loop.create_connection(
                    lambda: _Exchange(loop, self._max),
                    host,
                    port,
                    ssl=self._tls if tls else None,
                    server_hostname=target.server_hostname,
                )
        except TimeoutError:
            raise UpstreamError(FailureKind.TIMEOUT, f"no connection in {limit:.3g} s") from None
        except OSError as exc:  # ssl.SSLError included
            raise UpstreamError(FailureKind.TRANSPORT, type(exc).__name__) from None
        return connection

    def _parse(self, url: str) -> _Target:
        target = parse_target(url)
        if len(self._targets) >= _MAX_TARGETS:
            self._targets.clear()
        self._targets[url] = target
        return target


def parse_target(url: str) -> _Target:
    """Parse a node URL into its pool key and request head; bad URLs are transport failures."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UpstreamError(FailureKind.TRANSPORT, "invalid node URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UpstreamError(FailureKind.TRANSPORT, "invalid node URL")
    if not (_PRINTABLE.fullmatch(parts.netloc) and _PRINTABLE.fullmatch(url)):
        raise UpstreamError(FailureKind.TRANSPORT, "invalid node URL")  # no header injection
    tls = parts.scheme == "https"
    host = parts.hostname
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {parts.netloc.rpartition('@')[2]}",
        "User-Agent: chainrouter",
        "Content-Type: application/json",
    ]
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        lines.append(f"Authorization: Basic {base64.b64encode(pair.encode()).decode()}")
    text = "\r\n".join(lines) + "\r\nContent-Length: "
    return _Target(
        origin=(host, port or (443 if tls else 80), tls),
        server_hostname=host if tls else None,
        head=text.encode(),
    )


def _close_expired(pool: deque[_Exchange], idle_before: float) -> None:
    while pool and pool[0].idle_since < idle_before:  # the oldest sit at the left
        pool.popleft().close()


def _classify(status: int, body: bytes) -> UpstreamReply:
    if 200 <= status < 300:
        return UpstreamReply(body)
    if status == 429:
        raise UpstreamError(FailureKind.RATE_LIMITED, "HTTP 429", status)
    raise UpstreamError(FailureKind.HTTP_STATUS, f"HTTP {status}", status)
