"""Bounding what the management API reads of a request before it knows who sent it.

FastAPI reads and parses a request's whole body before a route's dependencies (authentication
among them) run. So this middleware, in front of the app:

- refuses a body larger than `CHAINROUTER_API_MAX_BODY_BYTES` with 413: at once when
  Content-Length says so, otherwise as soon as the chunks received pass the bound (they are
  counted as they arrive, never buffered past it);
- on the routes that need a management token, authenticates it before any of the body is read,
  and answers 401 without reading it when the token is missing or not valid. The principal it
  found is kept in the request's state, so the route's own dependency does not look it up again.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chainrouter.api.errors import database_unavailable, error_response
from chainrouter.management.access import HEADER, authenticate
from chainrouter.management.errors import UnauthenticatedError
from chainrouter.stores.sql.engine import database_away

PRINCIPAL_STATE = "principal"
# Routes that need a management token: nothing of their bodies is read without one.
_PRIVATE_PREFIXES = (
    "/api-keys",
    "/usage",
    "/provider",
    "/admin",
    "/account",
    "/tokens",
    "/billing",
)
_HEADER = HEADER.lower().encode()
# The unread rest of a refused body may still be on its way: that connection is not reused.
_CLOSE = {"connection": "close"}


class BodyGuard:
    def __init__(self, app: ASGIApp, *, engine: Engine, max_body_bytes: int) -> None:
        self._app = app
        self._engine = engine
        self._max = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self._max:
            response = error_response(413, "payload_too_large", self._too_large(), headers=_CLOSE)
            await response(scope, receive, send)
            return
        if scope["path"].startswith(_PRIVATE_PREFIXES) and _may_have_body(scope, headers):
            token = headers.get(_HEADER)
            try:
                principal = await run_in_threadpool(
                    authenticate, self._engine, token.decode("latin-1") if token else None
                )
            except UnauthenticatedError as refused:
                response = error_response(401, refused.code, refused.message, headers=_CLOSE)
                await response(scope, receive, send)
                return
            except SQLAlchemyError as failed:
                if not database_away(failed):
                    raise
                await database_unavailable(failed, _CLOSE)(scope, receive, send)
                return
            scope.setdefault("state", {})[PRINCIPAL_STATE] = principal
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max:
                    # An HTTP exception: FastAPI passes it on from reading the body, and the
                    # API's handler answers it in the error shape.
                    raise HTTPException(413, self._too_large(), headers=_CLOSE)
            return message

        await self._app(scope, counted_receive, send)

    def _too_large(self) -> str:
        return f"the request body may be at most {self._max} bytes"


def _may_have_body(scope: Scope, headers: dict[bytes, bytes]) -> bool:
    return scope["method"] not in ("GET", "HEAD", "OPTIONS", "DELETE") or (
        b"content-length" in headers or b"transfer-encoding" in headers
    )
