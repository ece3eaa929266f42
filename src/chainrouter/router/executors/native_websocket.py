"""The native executor's WebSocket connections, once accepted: the Rust server answers the
upgrade with the router's 101 (http_face.py), then relays the client's bytes to one end of a
socket pair and hands the other end here, on the worker's event loop. There wsproto (sans-I/O
frames) reads and writes the messages, and a `WsSession` serves them (router/ws/session.py);
its calls run on the native driver like any request."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

from chainrouter.net.client_ip import IpNetwork, client_address, client_block
from chainrouter.router.contract import HttpRequest
from chainrouter.router.pipeline import Reply
from chainrouter.router.runtime import RouterRuntime
from chainrouter.router.ws.session import WsSession

log = logging.getLogger(__name__)

_TOO_BIG = 1009  # RFC 6455: a message too big to take
_POLICY = 1008
_ABORT_S = 5.0  # a client that reads nothing is dropped this long after its close
_GONE = 1001  # RFC 6455: going away
RESTARTING = 1012  # IANA's registry: service restart, the client may reconnect (to another router)
PING_EVERY_S = 20.0


class SocketLink:
    """A `ClientLink` over a stream carrying WebSocket frames (the handshake already done)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_bytes: int
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._max = max_bytes
        self._frames = Connection(ConnectionType.SERVER)
        self._parts: list[str | bytes] = []
        self._size = 0
        self.heard = time.monotonic()  # the client's last frame of any kind

    async def keep_alive(self, every_s: float = PING_EVERY_S) -> None:
        """Ping the client every `every_s`; one silent for two pings running is dropped (as
        uvicorn does for the Python executor's clients)."""
        while self._frames.state is ConnectionState.OPEN:
            await asyncio.sleep(every_s)
            if time.monotonic() - self.heard > 2 * every_s:
                self.abort(_GONE, "no answer to pings")
                return
            with contextlib.suppress(Exception):
                self._writer.write(self._frames.send(Ping()))

    async def receive(self) -> str | bytes | None:
        frames = self._frames
        while True:
            for event in frames.events():
                if isinstance(event, TextMessage | BytesMessage):
                    data = event.data
                    self._parts.append(data if isinstance(data, str) else bytes(data))
                    # The bound is in bytes, as the client sent them: wsproto hands text over
                    # decoded, and a character is up to 4 bytes of UTF-8.
                    self._size += len(data.encode() if isinstance(data, str) else data)
                    if self._size > self._max:
                        await self.close(_TOO_BIG, "message too big")
                        return None
                    if event.message_finished:
                        return self._message()
                elif isinstance(event, Ping):
                    self._writer.write(frames.send(event.response()))
                elif isinstance(event, CloseConnection):
                    if frames.state is ConnectionState.REMOTE_CLOSING:
                        self._writer.write(frames.send(event.response()))
                    return None
            data = await self._reader.read(65536)
            if not data:
                return None
            self.heard = time.monotonic()
            frames.receive_data(data)

    def _message(self) -> str | bytes:
        parts, self._parts, self._size = self._parts, [], 0
        if isinstance(parts[0], str):
            return "".join(part for part in parts if isinstance(part, str))
        return b"".join(part for part in parts if isinstance(part, bytes))

    async def send(self, message: bytes) -> None:
        if self._frames.state is not ConnectionState.OPEN:
            # Closing (a ping unanswered, a message too large): the session must not count it
            # as sent, nor bill it.
            raise ConnectionError("the WebSocket is closing")
        self._writer.write(self._frames.send(TextMessage(data=message.decode())))
        await self._writer.drain()

    def start_closing(self, code: int, reason: str) -> None:
        """Send the close frame; the session ends when the client answers it (`receive`)."""
        if self._frames.state is ConnectionState.OPEN:
            with contextlib.suppress(Exception):
                self._writer.write(self._frames.send(CloseConnection(code=code, reason=reason)))

    def abort(self, code: int, reason: str) -> None:
        """The close frame goes after what is queued, then the connection is dropped: at once
        if the client reads, after `_ABORT_S` if it does not."""
        if self._frames.state is ConnectionState.OPEN:
            with contextlib.suppress(Exception):
                self._writer.write(self._frames.send(CloseConnection(code=code, reason=reason)))
        transport = self._writer.transport
        transport.close()
        asyncio.get_running_loop().call_later(_ABORT_S, transport.abort)

    async def close(self, code: int, reason: str) -> None:
        if self._frames.state is ConnectionState.OPEN:
            with contextlib.suppress(Exception):
                self._writer.write(self._frames.send(CloseConnection(code=code, reason=reason)))
                await self._writer.drain()
        self._writer.close()


class WsClients:
    """The worker's WebSocket clients, so that a stop can tell them to reconnect elsewhere: the
    server's graceful stop does not wait for a connection once it is upgraded."""

    def __init__(self) -> None:
        self.links: set[SocketLink] = set()
        self.tasks: set[asyncio.Task[None]] = set()  # asyncio keeps only weak references

    async def close_all(self, within_s: float) -> int:
        """Tell every client to reconnect (1012, service restart) and wait, `within_s` at most,
        for each to answer the close, which ends its session; those that have not by then are
        dropped. How many there were."""
        links = list(self.links)
        for link in links:
            link.start_closing(RESTARTING, "router restarting; reconnect")
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=within_s)
        for link in list(self.links):
            link.abort(RESTARTING, "router restarting; reconnect")
        return len(links)


def websocket_handler(
    runtime: RouterRuntime,
    driver: Any,
    loop: asyncio.AbstractEventLoop,
    max_bytes: int,
    trusted: Sequence[IpNetwork],
    clients: WsClients | None = None,
) -> Callable[[HttpRequest, int], None]:
    """What the native server calls, on its thread, with each accepted connection's request
    and descriptor: the session starts on the event loop."""
    held = clients if clients is not None else WsClients()
    tasks = held.tasks

    def start(request: HttpRequest, fd: int) -> None:
        address = client_block(client_address(request.peer, request.forwarded_for, trusted))
        task = loop.create_task(
            _serve(runtime, driver, loop, request, fd, max_bytes, held, address)
        )
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def taken(request: HttpRequest, fd: int) -> None:
        loop.call_soon_threadsafe(start, request, fd)

    return taken


async def _serve(
    runtime: RouterRuntime,
    driver: Any,
    loop: asyncio.AbstractEventLoop,
    request: HttpRequest,
    fd: int,
    max_bytes: int,
    clients: WsClients,
    address: str,
) -> None:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    link = SocketLink(reader, writer, max_bytes)
    clients.links.add(link)
    try:
        await _session(runtime, driver, loop, request, link, writer, address)
    finally:
        clients.links.discard(link)


async def _session(
    runtime: RouterRuntime,
    driver: Any,
    loop: asyncio.AbstractEventLoop,
    request: HttpRequest,
    link: SocketLink,
    writer: asyncio.StreamWriter,
    address: str,
) -> None:
    service, hub = runtime.service, runtime.hub
    assert hub is not None
    chain_segment, api_key = request.path[5:].split("/")
    origin, referer = request.origin, request.referer
    checked = service.check_upgrade(chain_segment, api_key, origin=origin, referer=referer)
    access = checked.access
    if checked.refusal is not None or access is None or hub.open(access, address) is not None:
        await link.close(_POLICY, "refused")  # the configuration changed since the 101
        return

    async def handle(body: bytes) -> Reply:
        answered: asyncio.Future[Reply] = loop.create_future()

        def settle(reply: Reply | None, error: BaseException | None) -> None:
            if answered.done():
                return
            if error is not None:
                answered.set_exception(error)
            else:
                answered.set_result(reply)  # type: ignore[arg-type]

        async def program() -> None:  # on the native driver, as any request runs
            try:
                reply = await service.handle_keyed(
                    chain_segment, api_key, body, origin=origin, referer=referer
                )
            except BaseException as exc:
                loop.call_soon_threadsafe(settle, None, exc)
                raise
            loop.call_soon_threadsafe(settle, reply, None)

        driver.spawn(program())
        return await answered

    deps = service.deps
    session = WsSession(
        link,
        checked,
        hub,
        handle,
        deps.credits,
        deps.meter,
        runtime.ws_limits,
        lambda: (
            service.check_upgrade(chain_segment, api_key, origin=origin, referer=referer).refusal
        ),
    )
    pinging = asyncio.create_task(link.keep_alive())
    hub.watch(session)
    try:
        await session.run()
    except Exception:
        log.exception("a WebSocket session failed")
    finally:
        hub.unwatch(session)
        pinging.cancel()
        hub.close(access, address)
        writer.close()
