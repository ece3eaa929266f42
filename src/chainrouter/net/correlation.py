"""Correlation ids for the `X-Batch-Id` header, which the router and the management API both send
so that a user's report of a failed call can be found in the logs."""

from __future__ import annotations

import secrets

from starlette.types import ASGIApp, Message, Receive, Scope, Send

BATCH_ID_HEADER = "x-batch-id"


class BatchIds:
    """A random per-process prefix and a counter in hexadecimal: unique, cheap, and in the
    order they were issued (compare the counters as numbers)."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(6) + "-"
        self._count = 0

    def next(self) -> str:
        self._count += 1
        return self._prefix + hex(self._count)[2:]


class BatchIdMiddleware:
    """Stamps every HTTP response of an ASGI app with a fresh `X-Batch-Id`."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._ids = BatchIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        batch_id = self._ids.next().encode()

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (BATCH_ID_HEADER.encode(), batch_id)]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, receive, stamped)
