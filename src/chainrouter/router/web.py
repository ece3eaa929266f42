"""The router on granian's RSGI interface: reads the request, and writes what `RouterFace`
answers (routes, statuses and headers are all there). docs/decisions.md says why granian, and
when the native server (`native_server.py`) is used instead."""

from __future__ import annotations

import asyncio
from typing import Any

from chainrouter.net.client_ip import IpNetwork, peer_ip
from chainrouter.router.http_face import RouterFace
from chainrouter.router.process import assemble_worker, settle_heap
from chainrouter.router.runtime import RouterRuntime


class RouterApp:
    """An RSGI application; granian calls `__rsgi_init__` and `__rsgi_del__` in each worker."""

    def __init__(self, build: Any) -> None:
        self._build = build  # () -> RouterRuntime, run in the worker
        self.runtime: RouterRuntime | None = None
        self._face: RouterFace | None = None
        self._max_body = 0

    def __rsgi_init__(self, loop: asyncio.AbstractEventLoop) -> None:
        runtime, trusted = self._build()
        self.attach(runtime, trusted)
        settle_heap()
        loop.run_until_complete(self._start())

    async def _start(self) -> None:
        assert self.runtime is not None
        self.runtime.start_background()

    def __rsgi_del__(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.runtime is not None:
            loop.run_until_complete(self.runtime.stop())

    def attach(self, runtime: RouterRuntime, trusted: list[IpNetwork]) -> None:
        self.runtime = runtime
        self._face = RouterFace(runtime, trusted)
        self._max_body = runtime.service.max_body_bytes

    async def __rsgi__(self, scope: Any, protocol: Any) -> None:
        if scope.proto != "http":
            return
        face = self._face
        assert face is not None
        headers = scope.headers
        body = await self._read_body(protocol, headers.get("content-length"))
        status, answer_headers, answer = await face.respond(
            scope.method,
            scope.path,
            headers.get("origin"),
            headers.get("referer"),
            headers.get("x-forwarded-for"),
            peer_ip(scope.client),
            body,
        )
        if status == 204:
            protocol.response_empty(status, answer_headers)
        else:
            protocol.response_bytes(status, answer_headers, answer)

    async def _read_body(self, protocol: Any, declared: str | None) -> bytes | None:
        """The request body, or None when it is larger than allowed (not read any further)."""
        if declared is not None and declared.isdigit():
            if int(declared) > self._max_body:
                return None
            body: bytes = await protocol()
            return body
        chunks: list[bytes] = []
        size = 0
        async for chunk in protocol:
            size += len(chunk)
            if size > self._max_body:
                return None
            chunks.append(chunk)
        return b"".join(chunks)


def create_app() -> RouterApp:
    """Granian's factory (`chainrouter.router.web:create_app`); settings come from the env."""

    def build() -> tuple[RouterRuntime, list[IpNetwork]]:
        from chainrouter.settings import load_settings

        return assemble_worker(load_settings())

    return RouterApp(build)
