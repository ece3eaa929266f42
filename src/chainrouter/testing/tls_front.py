"""An HTTPS (and WSS) front for tests: terminates TLS on a loopback port and passes each POST,
path included, to a plain-HTTP target (an anvil node, the fault-injecting upstream), and each
WebSocket connection to the target's ws:// address, message by message.

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
    def __init__(
        self, target: str, ssl_context: ssl.SSLContext | None, *, redirect_to: str | None = None
    ) -> None:
        """`ssl_context` None serves plain HTTP: a relay that only counts what passes.
        `redirect_to`: answer every request with a 307 to that URL instead."""
        self._target = target.rstrip("/")
        self._redirect_to = redirect_to
        self._ssl = ssl_context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0
        self.posts = 0  # POST requests passed on, for tests that check where traffic went
        self.requests = 0  # every request received

    @property
    def url(self) -> str:
        if self._ssl is None:
            return f"http://127.0.0.1:{self.port}"
        return f"https://localhost:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"wss://localhost:{self.port}"

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        self.requests += 1
        if self._redirect_to is not None:
            raise web.HTTPTemporaryRedirect(self._redirect_to)
        self.posts += 1
        async with self._session.post(
            self._target + request.path_qs,
            data=await request.read(),
            headers={"content-type": request.headers.get("content-type", "application/json")},
            allow_redirects=False,
        ) as answer:
            body = await answer.read()
            return web.Response(status=answer.status, body=body, content_type="application/json")

    async def _forward_ws(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        self.requests += 1
        if self._redirect_to is not None:
            raise web.HTTPTemporaryRedirect(self._redirect_to)
        client = web.WebSocketResponse()
        await client.prepare(request)
        target = "ws" + self._target.removeprefix("http") + request.path_qs
        async with self._session.ws_connect(target) as upstream:

            async def pump(
                source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
                sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
            ) -> None:
                async for message in source:
                    if message.type is aiohttp.WSMsgType.TEXT:
                        await sink.send_str(message.data)
                    elif message.type is aiohttp.WSMsgType.BINARY:
                        await sink.send_bytes(message.data)

            pumps = [
                asyncio.ensure_future(pump(client, upstream)),
                asyncio.ensure_future(pump(upstream, client)),
            ]
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for task in pumps:
                task.cancel()
        await client.close()
        return client

    async def _start(self) -> None:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._forward)
        app.router.add_route("GET", "/{tail:.*}", self._forward_ws)
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
