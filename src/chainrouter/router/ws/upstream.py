"""One WebSocket connection to a node: JSON-RPC calls answered by id, and the notifications of
its subscriptions, read by one task. Dialled with aiohttp through the router's dial rule (the
addresses a name resolves to are checked as the HTTP client's are; an address written in the URL
too), every message within a size bound."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import logging
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from chainrouter.net.outbound import (
    CheckingResolver,
    DialRule,
    failure_text,
    refusing_redirects,
    url_origin,
)

log = logging.getLogger(__name__)


class UpstreamClosedError(ConnectionError):
    """The node closed the connection, or it failed."""


class NodeError(Exception):
    """The node answered a call with a JSON-RPC error."""

    def __init__(self, error: object) -> None:
        message = error.get("message") if isinstance(error, dict) else error
        super().__init__(str(message)[:300])
        self.error = error


class UpstreamSocket:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse, session: aiohttp.ClientSession) -> None:
        self._ws = ws
        self._session = session
        self._ids = itertools.count(1)
        self._answers: dict[int, asyncio.Future[Any]] = {}
        # subscription id -> what its notifications carry, each encoded as the node sent it
        self.notifications: dict[str, asyncio.Queue[bytes]] = {}
        self._early: dict[str, list[bytes]] = {}  # notifications ahead of their subscribe answer
        self._reader = asyncio.create_task(self._read(), name="ws-upstream-reader")
        self.closed = asyncio.Event()

    async def call(self, method: str, params: list[Any], timeout_s: float) -> Any:
        """The result of one call; `NodeError` for an error answer, `UpstreamClosedError` when
        the connection is gone, `TimeoutError` when the node is slower than `timeout_s`."""
        if self.closed.is_set():
            raise UpstreamClosedError("the connection is closed")
        call_id = next(self._ids)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[call_id] = answer
        try:
            request = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": params}
            await self._ws.send_bytes(orjson.dumps(request))
            async with asyncio.timeout(timeout_s):
                return await answer
        finally:
            self._answers.pop(call_id, None)

    async def subscribe(self, params: list[Any], timeout_s: float) -> asyncio.Queue[bytes]:
        """Subscribe (`eth_subscribe` with `params`); the queue of its notifications' results."""
        subscription = await self.call("eth_subscribe", params, timeout_s)
        if not isinstance(subscription, str):
            raise NodeError(f"eth_subscribe answered {str(subscription)[:80]}")
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        for early in self._early.pop(subscription, []):
            queue.put_nowait(early)
        self.notifications[subscription] = queue
        return queue

    async def _read(self) -> None:
        try:
            async for message in self._ws:
                if message.type not in (aiohttp.WSMsgType.TEXT, aiohttp.WSMsgType.BINARY):
                    break
                self._dispatch(message.data)
        except Exception as exc:  # the connection failed under us: the feed fails over
            log.info("WebSocket node connection failed: %s", failure_text(exc))
        finally:
            self.closed.set()
            for answer in self._answers.values():
                if not answer.done():
                    answer.set_exception(UpstreamClosedError("the node closed the connection"))

    def _dispatch(self, data: str | bytes) -> None:
        try:
            message = orjson.loads(data)
        except orjson.JSONDecodeError:
            log.info("a WebSocket node sent a message that is not JSON")
            return
        if not isinstance(message, dict):
            return
        if message.get("method") == "eth_subscription":
            params = message.get("params")
            if isinstance(params, dict) and isinstance(params.get("subscription"), str):
                result = orjson.dumps(params.get("result"))
                queue = self.notifications.get(params["subscription"])
                if queue is not None:
                    queue.put_nowait(result)
                elif len(self._early) < 16:
                    self._early.setdefault(params["subscription"], []).append(result)
            return
        call_id = message.get("id")
        answer = self._answers.get(call_id) if isinstance(call_id, int) else None
        if answer is None or answer.done():
            return
        if "error" in message:
            answer.set_exception(NodeError(message["error"]))
        else:
            answer.set_result(message.get("result"))

    async def close(self) -> None:
        """Close the connection and its session, even when cancelled on the way."""
        self._reader.cancel()
        try:
            with contextlib.suppress(Exception):
                await self._ws.close()
        finally:
            await self._session.close()

    async def __aenter__(self) -> UpstreamSocket:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.close()


async def open_upstream(
    url: str,
    *,
    rule: DialRule | None,
    ssl: Any,
    connect_timeout_s: float,
    max_message_bytes: int,
) -> UpstreamSocket:
    """Connect to the node at `url` (ws:// or wss://) as the dial rule allows."""
    host = urlsplit(url).hostname or ""
    if rule is not None and rule.checks:
        with contextlib.suppress(ValueError):
            problem = rule.problem(ipaddress.ip_address(host.strip("[]")))
            if problem is not None:
                raise UpstreamClosedError(f"{url_origin(url)}: the address is {problem}")
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(
            ssl=ssl,
            resolver=None if rule is None or not rule.checks else CheckingResolver(rule),
            use_dns_cache=False,
        ),
        trust_env=False,
        # A node that passed screening could later redirect the handshake to an address the
        # dial rule refuses (cloud metadata, loopback): a redirect is the node's failure.
        trace_configs=[refusing_redirects(_redirect_refused)],
    )
    try:
        # A node that stops answering pings (every 15 s) is taken for gone.
        ws = await asyncio.wait_for(
            session.ws_connect(url, max_msg_size=max_message_bytes, heartbeat=15.0),
            connect_timeout_s,
        )
    except aiohttp.ClientError as exc:  # refused upgrade (an HTTP status), TLS, DNS, reset
        await session.close()
        raise UpstreamClosedError(
            f"cannot open a WebSocket to the node: {failure_text(exc)}"
        ) from exc
    except BaseException:
        await session.close()
        raise
    return UpstreamSocket(ws, session)


def _redirect_refused(status: int) -> UpstreamClosedError:
    return UpstreamClosedError(f"the node answered the handshake with HTTP {status} (a redirect)")
