"""Sending a JSON-RPC body to one upstream node, with a deadline and a size bound.

`UpstreamClient` is the extension point (a real pyreqwest client in production; tests use real
servers, never a mock). Every way a node can fail is reported as an `UpstreamError` with a kind,
which decides whether the router fails over and what the client is told when every node fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Protocol

from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import PyreqwestError, RequestTimeoutError
from pyreqwest.response import Response

_JSON = {"content-type": "application/json"}


class FailureKind(StrEnum):
    TRANSPORT = "transport"  # refused, reset, DNS, TLS: nothing usable came back
    TIMEOUT = "timeout"
    RATE_LIMITED = "rate_limited"  # HTTP 429
    HTTP_STATUS = "http_status"  # any other non-2xx status
    INVALID_ANSWER = "invalid_answer"  # 2xx, but not the JSON-RPC answer to what was asked
    TOO_LARGE = "too_large"


class UpstreamError(Exception):
    def __init__(self, kind: FailureKind, detail: str, status: int | None = None) -> None:
        super().__init__(f"{kind.value}: {detail}")
        self.kind = kind
        self.detail = detail
        self.status = status


@dataclass(frozen=True, slots=True)
class UpstreamReply:
    body: bytes


class UpstreamClient(Protocol):
    async def post(self, url: str, body: bytes, *, timeout_s: float) -> UpstreamReply:
        """POST `body`; return a 2xx answer's body or raise `UpstreamError`."""
        ...

    async def close(self) -> None: ...


class PyreqwestUpstream:
    """The production client: a pooled pyreqwest (Rust reqwest) client, chosen by measurement."""

    def __init__(self, *, max_response_bytes: int, connect_timeout_s: float = 5.0) -> None:
        self._max = max_response_bytes
        self._client: Client = (
            ClientBuilder()
            .connect_timeout(timedelta(seconds=connect_timeout_s))
            .follow_redirects(False)
            .user_agent("chainrouter")
            .build()
        )

    async def post(self, url: str, body: bytes, *, timeout_s: float) -> UpstreamReply:
        # The request timeout covers the whole exchange, body included, so a node that drips
        # its answer a byte at a time is cut off at the deadline too (tested).
        request = (
            self._client.post(url)
            .headers(_JSON)
            .body_bytes(body)
            .timeout(timedelta(seconds=timeout_s))
            .build_streamed()
        )
        try:
            async with request as response:
                status = response.status
                if status == 429:
                    raise UpstreamError(FailureKind.RATE_LIMITED, "HTTP 429", status)
                if not 200 <= status < 300:
                    raise UpstreamError(FailureKind.HTTP_STATUS, f"HTTP {status}", status)
                return UpstreamReply(await self._read_bounded(response))
        except RequestTimeoutError:
            raise UpstreamError(FailureKind.TIMEOUT, f"no answer within {timeout_s} s") from None
        except PyreqwestError as exc:
            raise UpstreamError(FailureKind.TRANSPORT, type(exc).__name__) from None

    async def _read_bounded(self, response: Response) -> bytes:
        declared = response.get_header("content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self._max:
                raise UpstreamError(FailureKind.TOO_LARGE, f"answer of {declared} bytes")
            return bytes(await response.bytes())  # the size is known and acceptable
        # No length announced (chunked): read piece by piece and stop at the bound.
        reader = response.body_reader
        chunks: list[bytes] = []
        size = 0
        while (chunk := await reader.read_chunk()) is not None:
            size += len(chunk)
            if size > self._max:
                raise UpstreamError(FailureKind.TOO_LARGE, f"answer over {self._max} bytes")
            chunks.append(bytes(chunk))
        return b"".join(chunks)

    async def close(self) -> None:
        await self._client.close()
