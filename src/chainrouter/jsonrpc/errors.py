"""The router's failures: each carries the HTTP status and JSON-RPC code of spec section 7."""

from __future__ import annotations

from enum import IntEnum
from typing import Any


class RpcCode(IntEnum):
    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    INSUFFICIENT_CREDITS = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000
    CHAIN_NOT_SUPPORTED = -32001
    METHOD_NOT_SUPPORTED = -32002
    ALL_NODES_ON_COOLDOWN = -32003
    LOG_RANGE_TOO_LARGE = -32005
    NO_BLOCK_PARAM_CAPABLE_NODES = -32007
    NO_PROVIDERS_AVAILABLE = -32008
    ALL_NODES_FAILED = -32009
    NO_OPCODE_CAPABLE_NODES = -32011
    INSUFFICIENT_HISTORY = -32012
    NO_SINGLE_PROVIDER = -32013
    ANSWER_TOO_LARGE = -32014  # a request's answers past its bound (docs/security.md)
    PUBLIC_RATE_LIMITED = -32029
    PUBLIC_CAPACITY_EXHAUSTED = -32030
    KEY_RATE_LIMITED = -32031  # the API key's own rate limit (not in the spec's table)


class RpcError(Exception):
    """A request the router answers with an error instead of an upstream result."""

    def __init__(
        self,
        http_status: int,
        code: RpcCode,
        message: str,
        data: Any = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.code = code
        self.message = message
        self.data = data
        self.retry_after_s = retry_after_s  # a 429's Retry-After: when a retry could succeed

    def __repr__(self) -> str:
        return f"RpcError({self.http_status}, {self.code.name}, {self.message!r})"

    def error_object(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": int(self.code), "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def parse_error(detail: str) -> RpcError:
    return RpcError(400, RpcCode.PARSE_ERROR, f"parse error: {detail}")


def invalid_request(detail: str) -> RpcError:
    return RpcError(400, RpcCode.INVALID_REQUEST, f"invalid request: {detail}")


def body_too_large(limit: int) -> RpcError:
    # 413 rather than 400: the body was not read, so its validity is unknown, and proxies and
    # clients know what 413 means.
    return RpcError(413, RpcCode.INVALID_REQUEST, f"request body exceeds {limit} bytes")


def batch_too_large(size: int, limit: int) -> RpcError:
    return RpcError(
        400, RpcCode.INVALID_REQUEST, f"batch of {size} requests exceeds the maximum of {limit}"
    )
