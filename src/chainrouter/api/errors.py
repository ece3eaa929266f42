"""One error shape for every management API error: `{"error": {"code", "message", "details"}}`.

`code` is machine-readable and stable; `message` is for people; `details` (validation problems,
per-URL screening failures) is present when there is more to say.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException

from chainrouter.api.jsonio import respond
from chainrouter.management.errors import (
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    ManagementError,
    NotFoundError,
    RateLimitedError,
    ScreeningFailedError,
    UnauthenticatedError,
)
from chainrouter.stores.sql.engine import database_away
from chainrouter.validation import error_message, format_path

log = logging.getLogger(__name__)


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(_Closed):
    field: str | None = None
    message: str
    url: str | None = None


class ErrorInfo(_Closed):
    code: str
    message: str
    details: list[ErrorDetail] | None = None


class ErrorBody(_Closed):
    error: ErrorInfo


_STATUS: dict[type[ManagementError], int] = {
    UnauthenticatedError: 401,
    ForbiddenError: 403,
    NotFoundError: 404,
    ConflictError: 409,
    InvalidInputError: 422,
    ScreeningFailedError: 400,
    RateLimitedError: 429,
}
_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "rate_limited",
}


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    info = ErrorInfo(
        code=code,
        message=message,
        details=None if details is None else [ErrorDetail(**d) for d in details],
    )
    return respond(ErrorBody(error=info), status, headers=headers, exclude_none=True)


def _status_of(exc: ManagementError) -> int:
    status = getattr(exc, "status", None)  # an error of its own kind may say its status
    if isinstance(status, int):
        return status
    for kind in type(exc).__mro__:
        if kind in _STATUS:
            return _STATUS[kind]
    return 400


async def _management_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ManagementError)
    headers = None
    if isinstance(exc, RateLimitedError):
        headers = {"Retry-After": str(max(1, round(exc.retry_after_s + 0.5)))}
    return error_response(_status_of(exc), exc.code, exc.message, exc.details, headers)


def _location(loc: tuple[int | str, ...]) -> str:
    """FastAPI prefixes where a value came from: ("body", "allowed_domains", 0) becomes
    `allowed_domains[0]`, ("query", "limit") becomes `limit`."""
    if not loc:
        return "(request)"
    source, *rest = loc
    if not rest:
        return str(source)
    return format_path(rest)


async def _validation_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "invalid_json", "the request body is not valid JSON")
    details = [
        {"field": _location(tuple(e.get("loc", ()))), "message": error_message(e)} for e in errors
    ]
    summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:3])
    return error_response(422, "invalid_input", f"invalid request: {summary}", details)


async def _http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "error")
    message = str(exc.detail) if exc.detail else code.replace("_", " ")
    if exc.status_code == 404 and message == "Not Found":
        message = "no such route; see /docs for the API"
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, code, message, headers=headers)


DATABASE_RETRY_AFTER_S = 5  # what a client is told to wait while the database is away


async def _database_error(request: Request, exc: Exception) -> Response:
    """The database is unreachable or restarting: 503 and when to try again, nothing written
    (the statement's transaction did not commit). A failure that would happen again as it is
    stays a 500."""
    if not database_away(exc):
        return await _unexpected_error(request, exc)
    return database_unavailable(exc)


def database_unavailable(exc: Exception, headers: dict[str, str] | None = None) -> Response:
    """The answer to a call the database was away for (`database_away`)."""
    log.warning("database unavailable to the management API: %s", type(exc).__name__)
    return error_response(
        503,
        "database_unavailable",
        "the database cannot be reached; nothing was changed, try again shortly",
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S), **(headers or {})},
    )


async def _unexpected_error(_request: Request, exc: Exception) -> Response:
    log.exception("unexpected error in the management API", exc_info=exc)
    return error_response(500, "internal_error", "internal server error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ManagementError, _management_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(SQLAlchemyError, _database_error)
    app.add_exception_handler(Exception, _unexpected_error)
