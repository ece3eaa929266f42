"""An HTTPS front for tests: terminates TLS on a loopback port and passes each POST, path
included, to a plain-HTTP target (an anvil node, the fault-injecting upstream).

Screening only dials https:// URLs, and anvil speaks plain HTTP; with a test CA (the test suite
uses trustme) this lets the real screening code reach real nodes.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
from types import TracebackType

import aiohttp
from aiohttp import web


class TlsFront:
    def __init__(self, target: str, ssl_context: ssl.SSLContext) -> None:
        self._target = target.rstrip("/")
        self._ssl = ssl_context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        async with self._session.post(
            self._target + request.path_qs,
            data=await request.read(),
            headers={"content-type": request.headers.get("content-type", "application/json")},
            allow_redirects=False,
        ) as answer:
            body = await answer.read()
            return web.Response(status=answer.status, body=body, content_type="application/json")

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self._ssl)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        self.port = server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def __enter__(self) -> TlsFront:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
