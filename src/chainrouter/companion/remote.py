"""The companion's two HTTP conversations: JSON-RPC with the routers, REST with the management API.

Router calls are retried on the failures the spec names retryable (HTTP 429, HTTP 5xx, timeouts,
network errors), with exponential backoff, alternating between the primary and the backup router.
Anything else the router answers, JSON-RPC errors included, is the answer. Every tool is read-only
on chain, so a retried call cannot do something twice.

Management calls go to one server. Only reads (GET) are retried: a retried create could create
twice. Secrets travel in the URL path (API key) and a header (token); neither is ever logged, and
failure messages name the server, never the full URL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import orjson

from chainrouter.companion.config import CompanionConfig
from chainrouter.net.correlation import BATCH_ID_HEADER

log = logging.getLogger("chainrouter.companion")

_FIRST_BACKOFF_S = 0.25
_MAX_BACKOFF_S = 8.0
_MAX_RETRY_AFTER_S = 10.0
_JSON_HEADERS = {"content-type": "application/json", "accept": "application/json"}


class ServiceUnavailableError(Exception):
    """No usable answer after every allowed attempt; the message says what each attempt met."""


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: status, parsed JSON body (None when the body was not JSON), batch id."""

    status: int
    body: Any
    batch_id: str | None
    attempts: int
    raw_text: str = ""

    @property
    def is_json(self) -> bool:
        return self.body is not None


def backoff_s(retry: int) -> float:
    """The pause before retry number `retry` (1, 2, ...): doubling from 0.25 s, a little jitter
    so that many companions do not retry in step."""
    base = min(_FIRST_BACKOFF_S * 2.0 ** (retry - 1), _MAX_BACKOFF_S)
    return base * random.uniform(0.9, 1.1)


def _retry_after_s(response: httpx.Response) -> float:
    try:
        return min(max(float(response.headers.get("retry-after", "0")), 0.0), _MAX_RETRY_AFTER_S)
    except ValueError:
        return 0.0


def _describe(exc: httpx.HTTPError, timeout_ms: int) -> str:
    # str(exc) of some httpx errors embeds the request URL, which carries the API key.
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout_ms} ms"
    if isinstance(exc, httpx.ConnectError):
        return "connection failed (is it running and reachable?)"
    return f"network error ({type(exc).__name__})"


def _is_retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _is_json_rpc(body: Any) -> bool:
    """A JSON-RPC response or batch of them (a router's own error answers are such)."""
    if isinstance(body, list):
        return bool(body) and all(isinstance(item, dict) and "jsonrpc" in item for item in body)
    return isinstance(body, dict) and body.get("jsonrpc") == "2.0"


def _parse(content: bytes, exact_decimals: bool) -> Any:
    if not content:
        return None
    try:
        if exact_decimals:
            return json.loads(content, parse_float=Decimal)
        return orjson.loads(content)
    except ValueError:
        return None


def _answer(response: httpx.Response, attempts: int, *, exact_decimals: bool) -> Answer:
    body = _parse(response.content, exact_decimals)
    return Answer(
        status=response.status_code,
        body=body,
        batch_id=response.headers.get(BATCH_ID_HEADER),
        attempts=attempts,
        raw_text="" if body is not None else response.text[:200],
    )


class RouterClient:
    """JSON-RPC over HTTP to `/rpc/{chainId}/{apiKey}` of the primary and backup routers."""

    def __init__(self, config: CompanionConfig, http: httpx.AsyncClient) -> None:
        self._http = http
        self._key = config.api_key
        self._routers = config.router_urls
        self._attempts = 1 + config.retry_attempts
        self._timeout_ms = config.timeout_ms

    async def post(self, chain_id: int, payload: Any) -> Answer:
        """The routers' answer to `payload` (one call or a batch). Raises
        `ServiceUnavailableError` when every attempt met a network error or timeout; when the last
        attempt got an HTTP answer, even a 429 or 5xx, that answer is returned so that its
        JSON-RPC error reaches the user."""
        content = orjson.dumps(payload)
        failures: list[str] = []
        last: Answer | None = None
        wait_s = 0.0
        for attempt in range(self._attempts):
            router = self._routers[attempt % len(self._routers)]
            if attempt:
                await asyncio.sleep(max(backoff_s(attempt), wait_s))
            wait_s = 0.0
            try:
                response = await self._http.post(
                    f"{router}/rpc/{chain_id}/{self._key}", content=content, headers=_JSON_HEADERS
                )
            except httpx.HTTPError as exc:
                failures.append(f"{router}: {_describe(exc, self._timeout_ms)}")
                last = None
                continue
            last = _answer(response, attempt + 1, exact_decimals=False)
            if not _is_retryable(response.status_code):
                return last
            failures.append(f"{router}: HTTP {response.status_code}")
            next_router = self._routers[(attempt + 1) % len(self._routers)]
            if next_router == router:  # Retry-After speaks for this router only
                wait_s = _retry_after_s(response)
        log.warning("router call failed after %d attempts: %s", self._attempts, "; ".join(failures))
        if last is not None and _is_json_rpc(last.body):
            return last
        raise ServiceUnavailableError(
            f"no router answered after {self._attempts} attempt(s): {'; '.join(failures)}"
        )


class ManagementClient:
    """The management API, with the management token (when one is configured) in `X-Api-Key`."""

    def __init__(self, config: CompanionConfig, http: httpx.AsyncClient) -> None:
        self._http = http
        self._base = config.api_server_url
        self._token = config.management_token
        self._attempts = 1 + config.retry_attempts
        self._timeout_ms = config.timeout_ms

    @property
    def base_url(self) -> str:
        return self._base

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
    ) -> Answer:
        """The API's answer; JSON numbers are read as exact decimals. Raises
        `ServiceUnavailableError` when the server cannot be reached (or keeps failing, for
        reads)."""
        headers = dict(_JSON_HEADERS)
        if self._token is not None:
            headers["x-api-key"] = self._token
        content = None if body is None else json.dumps(body, default=str).encode()
        attempts = self._attempts if method == "GET" else 1
        failures: list[str] = []
        last: Answer | None = None
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(backoff_s(attempt))
            try:
                response = await self._http.request(
                    method, f"{self._base}{path}", params=params, content=content, headers=headers
                )
            except httpx.HTTPError as exc:
                failures.append(_describe(exc, self._timeout_ms))
                last = None
                continue
            last = _answer(response, attempt + 1, exact_decimals=True)
            if not _is_retryable(response.status_code):
                return last
            failures.append(f"HTTP {response.status_code}")
        if last is not None and last.is_json:
            return last
        raise ServiceUnavailableError(
            f"the management API at {self._base} did not answer usefully after {attempts} "
            f"attempt(s): {'; '.join(failures)}"
        )


def build_http_client(config: CompanionConfig) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=httpx.Timeout(config.timeout_ms / 1000),
        follow_redirects=False,
        headers={"user-agent": "chainrouter-mcp"},
    )
