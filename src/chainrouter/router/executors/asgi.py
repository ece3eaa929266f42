"""The Python executor's server: the router as an ASGI application, served by uvicorn.

It reads the request (the body within the size limit), runs the router's answer to it as a
program on `PythonExecutor`, and writes the `HttpAnswer`. Everything else (routes, statuses,
headers) is the router's own (`http_face.py`), as under the native server. uvicorn was chosen by
measurement (docs/decisions.md, "The executors"); it also serves the management API.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import uvicorn

from chainrouter.net.client_ip import IpNetwork
from chainrouter.net.http_bounds import BoundedHttpTools
from chainrouter.router.contract import HttpRequest
from chainrouter.router.executors.process import (
    assemble_worker,
    settings_dial_rule,
    settle_heap,
)
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.executors.websocket import serve_websocket
from chainrouter.router.http_face import RouterFace
from chainrouter.router.runtime import RouterRuntime
from chainrouter.settings import Settings

log = logging.getLogger(__name__)

_WANTED = {
    b"origin": "origin",
    b"referer": "referer",
    b"x-forwarded-for": "forwarded_for",
    b"content-type": "content_type",
    b"content-length": "content_length",
}


class RouterApp:
    """An ASGI application; its lifespan builds the worker's router and stops it."""

    def __init__(self, build: Callable[[], tuple[RouterRuntime, list[IpNetwork], Settings]]):
        self._build = build
        self.runtime: RouterRuntime | None = None
        self.executor: PythonExecutor | None = None
        self._face: RouterFace | None = None
        self._max_body = 0
        self._trusted: list[IpNetwork] = []

    def attach(
        self, runtime: RouterRuntime, trusted: list[IpNetwork], executor: PythonExecutor
    ) -> None:
        self.runtime = runtime
        self.executor = executor
        self._trusted = trusted
        self._face = runtime.face(trusted, executor)
        self._max_body = runtime.service.max_body_bytes

    def drain(self) -> None:
        """`/health` answers 503 from now on (the router is stopping)."""
        if self._face is not None:
            self._face.drain()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "websocket":
            runtime, executor = self.runtime, self.executor
            assert runtime is not None, "served before the lifespan started"
            assert executor is not None
            await serve_websocket(runtime, executor, self._trusted, scope, receive, send)
            return
        if scope["type"] != "http":
            return
        face, executor = self._face, self.executor
        assert face is not None, "served before the lifespan started"
        assert executor is not None
        found: dict[str, str] = {}
        for name, value in scope["headers"]:
            key = _WANTED.get(name)
            if key is not None:
                found[key] = value.decode("latin-1")
        body = await _read_within(receive, found.get("content_length"), self._max_body)
        client = scope.get("client")
        request = HttpRequest(
            scope["method"],
            scope["path"],
            found.get("origin"),
            found.get("referer"),
            found.get("forwarded_for"),
            found.get("content_type"),
            client[0] if client else "",
            body,
        )
        answer = await executor.run(face.respond(request))
        raw = [(name.encode(), value.encode("latin-1")) for name, value in answer.headers]
        if body is None:  # the rest of an over-size body was never read
            raw.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": answer.status, "headers": raw})
        await send({"type": "http.response.body", "body": answer.body})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.runtime is None:
                    runtime, trusted, settings = self._build()
                    self.attach(runtime, trusted, _executor(runtime, settings))
                    settle_heap()
                assert self.runtime is not None
                assert self.executor is not None
                await self.runtime.start_background(self.executor)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.runtime is not None and self.executor is not None:
                    await self.runtime.stop()
                    await self.executor.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


class DrainingServer(uvicorn.Server):
    """uvicorn's server for one worker, draining at SIGTERM or SIGINT as the native executor
    does (docs/deployment.md, "Draining"): `/health` answers 503 at once while the router
    serves on for `delay_s`, so that the load balancer takes it out; then uvicorn's own stop
    (no new connections, WebSocket clients closed with 1012, what is in flight finished). A
    second signal stops at once."""

    def __init__(self, config: uvicorn.Config, *, delay_s: float) -> None:
        super().__init__(config)
        self._delay_s = delay_s
        self._timer: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._delay_s <= 0 or self._timer is not None:
            if self._timer is not None:
                self._timer.cancel()
            super().handle_exit(sig, frame)
            return
        app = self.config.loaded_app
        if isinstance(app, RouterApp):
            app.drain()
        log.info("draining: /health answers 503 for %.1f s, then the router stops", self._delay_s)
        self._timer = threading.Timer(self._delay_s, super().handle_exit, (sig, frame))
        self._timer.daemon = True
        self._timer.start()


def _executor(runtime: RouterRuntime, settings: Settings) -> PythonExecutor:
    return PythonExecutor(
        runtime.limiter,
        max_response_bytes=settings.max_response_bytes,
        connect_timeout_s=settings.upstream_connect_timeout_s,
        ca_file=settings.outbound_ca_file,
        rule=settings_dial_rule(settings),
    )


async def _read_within(receive: Any, declared: str | None, limit: int) -> bytes | None:
    """The request body, or None when it is larger than `limit` (not read any further)."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def create_app() -> RouterApp:
    """uvicorn's factory (`chainrouter.router.executors.asgi:create_app`); settings come from
    the environment."""

    def build() -> tuple[RouterRuntime, list[IpNetwork], Settings]:
        from chainrouter.settings import load_settings

        settings = load_settings()
        # This worker's connections are made after its start: they get these bounds.
        BoundedHttpTools.bound(settings.request_head_timeout_s, settings.request_body_timeout_s)
        runtime, trusted = assemble_worker(settings)
        return runtime, trusted, settings

    return RouterApp(build)
