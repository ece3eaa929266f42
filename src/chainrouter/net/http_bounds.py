"""uvicorn's HTTP protocol with the bounds it lacks on slow clients (docs/security.md, "Slow
clients"), for the management API and the Python executor's server.

uvicorn closes a kept-alive connection left idle after an answer, but gives no limit to a
request's head or body: a client that connects and sends nothing, or drips its headers or its
body, holds a connection (and memory) for as long as it likes. Here a request's head must be
complete within `head_timeout_s` of the connection's opening or of the request's first byte,
and its body within `body_timeout_s` of the head; otherwise the connection is closed (an
application reading the body sees the client gone). The native executor's server has its own
(native/src/server.rs).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class BoundedHttpTools(HttpToolsProtocol):
    # Set per process from the settings (`bound`), before the server accepts a connection.
    head_timeout_s = 30.0
    body_timeout_s = 30.0

    _deadline: asyncio.TimerHandle | None = None

    @classmethod
    def bound(cls, head_timeout_s: float, body_timeout_s: float) -> type[BoundedHttpTools]:
        cls.head_timeout_s = head_timeout_s
        cls.body_timeout_s = body_timeout_s
        return cls

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.head_timeout_s)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._deadline is None:  # a later request on a kept connection
            self._arm(self.head_timeout_s)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        self._arm(self.body_timeout_s)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()
