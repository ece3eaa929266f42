"""The two watch tools: new heads or event logs as they arrive, for a bounded count and time.

An agent cannot hold a socket, so the tool holds one for it: it opens a WebSocket to the router
(`ws://` for an `http://` router URL, `wss://` for `https://`), subscribes, collects
notifications until `limit` arrived or `maxSeconds` passed, unsubscribes and closes. The
connection is retried on the primary and backup routers as calls are (network errors, HTTP 429
and 5xx answering the upgrade); once subscribed, a dropped connection ends the watch with what
arrived so far. A refused upgrade (unknown key, no credits, chain not served) comes back as the
router's JSON-RPC error, unchanged. Each notification is billed at the chain's WebSocket price.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import Field
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from chainrouter.companion.config import CompanionConfig
from chainrouter.companion.evm_values import Addresses, Chain, Topic
from chainrouter.companion.remote import backoff_s
from chainrouter.companion.toolkit import CamelArguments, Result, ToolError, ToolSpec
from chainrouter.net.correlation import BATCH_ID_HEADER

HEADS_DEFAULT, HEADS_MAX = 5, 100
LOGS_DEFAULT, LOGS_MAX = 100, 1000
SECONDS_DEFAULT, SECONDS_MAX = 30, 120
_MAX_MESSAGE_BYTES = 1 << 20
# Nothing an agent reads in a header: 512 hex digits of bloom filter.
_HEADER_NOISE = ("logsBloom",)

StoppedBy = Literal["limit", "time", "closed", "credits"]


class WatchHeadsArgs(CamelArguments):
    chain_id: Chain
    limit: int = Field(
        default=HEADS_DEFAULT, ge=1, le=HEADS_MAX, description="Stop after this many new heads."
    )
    max_seconds: int = Field(
        default=SECONDS_DEFAULT, ge=1, le=SECONDS_MAX, description="Stop after this long at most."
    )


class WatchLogsArgs(CamelArguments):
    chain_id: Chain
    address: Addresses | None = Field(
        default=None, description="One contract address or a list of them; none: any."
    )
    topics: list[Topic] | None = Field(
        default=None,
        max_length=4,
        description="Up to 4 positions; each null (any), a topic, or a list of topics (any of).",
    )
    limit: int = Field(
        default=LOGS_DEFAULT, ge=1, le=LOGS_MAX, description="Stop after this many logs."
    )
    max_seconds: int = Field(
        default=SECONDS_DEFAULT, ge=1, le=SECONDS_MAX, description="Stop after this long at most."
    )


@dataclass
class Watched:
    batch_id: str | None
    stopped_by: StoppedBy = "time"
    items: list[Any] = field(default_factory=list)
    closing: dict[str, Any] | None = None  # the router's last words, when it ended the watch


def socket_url(router: str, chain_id: int, api_key: str) -> str:
    scheme, rest = router.split("://", 1)
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/rpc/{chain_id}/{api_key}"


class RouterSockets:
    """WebSocket watches on the primary and backup routers."""

    def __init__(self, config: CompanionConfig) -> None:
        self._key = config.api_key
        self._routers = config.router_urls
        self._attempts = 1 + config.retry_attempts
        self._timeout_s = config.timeout_ms / 1000

    async def watch(
        self, chain_id: int, params: list[Any], limit: int, max_seconds: float
    ) -> Watched:
        failures: list[str] = []
        for attempt in range(self._attempts):
            router = self._routers[attempt % len(self._routers)]
            if attempt:
                await asyncio.sleep(backoff_s(attempt))
            try:
                async with connect(
                    socket_url(router, chain_id, self._key),
                    open_timeout=self._timeout_s,
                    max_size=_MAX_MESSAGE_BYTES,
                    user_agent_header="chainrouter-mcp",
                    proxy=None,
                ) as socket:
                    return await self._collect(socket, params, limit, max_seconds)
            except InvalidStatus as refused:
                status = refused.response.status_code
                if status != 429 and status < 500:
                    raise _refusal(refused) from None
                failures.append(f"{router}: HTTP {status}")
            except (OSError, TimeoutError, InvalidHandshake, ConnectionClosed) as exc:
                failures.append(f"{router}: {_describe(exc)}")
        raise ToolError(
            f"no router took the WebSocket after {self._attempts} attempt(s): "
            + "; ".join(failures),
            {"batchId": None},
        )

    async def _collect(
        self, socket: ClientConnection, params: list[Any], limit: int, max_seconds: float
    ) -> Watched:
        watched = Watched(socket.response.headers.get(BATCH_ID_HEADER) if socket.response else None)
        await socket.send(orjson.dumps(_call(1, "eth_subscribe", params)).decode())
        subscription = await self._subscribed(socket, watched)
        deadline = time.monotonic() + max_seconds
        try:
            while len(watched.items) < limit:
                left = deadline - time.monotonic()
                if left <= 0:
                    watched.stopped_by = "time"
                    return watched
                try:
                    async with asyncio.timeout(left):
                        message = orjson.loads(await socket.recv())
                except TimeoutError:
                    continue  # the deadline check above ends it
                if not isinstance(message, dict):
                    continue
                notified = message.get("params")
                if message.get("method") == "eth_subscription" and isinstance(notified, dict):
                    if notified.get("subscription") == subscription:
                        watched.items.append(notified.get("result"))
                elif message.get("id") is None and isinstance(message.get("error"), dict):
                    watched.closing = message["error"]  # e.g. out of credits, then closed
            watched.stopped_by = "limit"
            await _unsubscribe(socket, subscription)
        except ConnectionClosed as closed:
            watched.stopped_by = "credits" if closed.rcvd and closed.rcvd.code == 4002 else "closed"
            if watched.closing is None and closed.rcvd is not None:
                watched.closing = {"code": closed.rcvd.code, "reason": closed.rcvd.reason}
        return watched

    async def _subscribed(self, socket: ClientConnection, watched: Watched) -> str:
        """The subscription id, or the router's error as a tool error."""
        try:
            async with asyncio.timeout(self._timeout_s):
                while True:
                    answer = orjson.loads(await socket.recv())
                    if isinstance(answer, dict) and answer.get("id") == 1:
                        break
        except (TimeoutError, ConnectionClosed):
            raise ToolError(
                "the router did not answer eth_subscribe", {"batchId": watched.batch_id}
            ) from None
        error = answer.get("error")
        if isinstance(error, dict):
            raise ToolError(
                f"eth_subscribe failed: JSON-RPC error {error.get('code')}: {error.get('message')}",
                {"batchId": watched.batch_id, "error": error},
            )
        result = answer.get("result")
        if not isinstance(result, str):
            raise ToolError("eth_subscribe gave no subscription id", {"batchId": watched.batch_id})
        return result


async def _unsubscribe(socket: ClientConnection, subscription: str) -> None:
    """Best effort: closing the socket ends the subscription anyway."""
    with contextlib.suppress(ConnectionClosed):
        await socket.send(orjson.dumps(_call(2, "eth_unsubscribe", [subscription])).decode())


def _call(request_id: int, method: str, params: list[Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _refusal(refused: InvalidStatus) -> ToolError:
    """The router's refusal of the upgrade, with its JSON-RPC error passed through."""
    response = refused.response
    batch_id = response.headers.get(BATCH_ID_HEADER)
    try:
        body = orjson.loads(response.body or b"")
    except orjson.JSONDecodeError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ToolError(
            f"the router refused the WebSocket with HTTP {response.status_code}",
            {"batchId": batch_id, "httpStatus": response.status_code},
        )
    return ToolError(
        f"the router refused the WebSocket: JSON-RPC error {error.get('code')}: "
        f"{error.get('message')}",
        {"batchId": batch_id, "httpStatus": response.status_code, "error": error},
    )


def _describe(exc: BaseException) -> str:
    # The URL carries the API key: say what happened, never where exactly.
    if isinstance(exc, TimeoutError):
        return "no WebSocket handshake in time"
    if isinstance(exc, OSError):
        return "connection failed (is it running and reachable?)"
    if isinstance(exc, ConnectionClosed):
        return "the connection closed before the subscription was made"
    return f"WebSocket handshake failed ({type(exc).__name__})"


def _result(kind: str, chain_id: int, watched: Watched, started: float, items: str) -> Result:
    result: Result = {
        "batchId": watched.batch_id,
        "chainId": chain_id,
        "subscription": kind,
        "stoppedBy": watched.stopped_by,
        "seconds": round(time.monotonic() - started, 3),
        "count": len(watched.items),
        items: watched.items,
    }
    if watched.closing is not None:
        result["closing"] = watched.closing
    return result


class WatchTools:
    def __init__(self, sockets: RouterSockets) -> None:
        self._sockets = sockets

    async def heads(self, args: WatchHeadsArgs) -> Result:
        started = time.monotonic()
        watched = await self._sockets.watch(
            args.chain_id, ["newHeads"], args.limit, args.max_seconds
        )
        watched.items = [
            {k: v for k, v in head.items() if k not in _HEADER_NOISE}
            for head in watched.items
            if isinstance(head, dict)
        ]
        result = _result("newHeads", args.chain_id, watched, started, "heads")
        numbers = [int(h["number"], 16) for h in watched.items if isinstance(h.get("number"), str)]
        if numbers:
            result["blocks"] = {"first": numbers[0], "last": numbers[-1]}
        return result

    async def logs(self, args: WatchLogsArgs) -> Result:
        started = time.monotonic()
        log_filter = args.model_dump(
            by_alias=True, exclude_none=True, include={"address", "topics"}
        )
        watched = await self._sockets.watch(
            args.chain_id, ["logs", log_filter], args.limit, args.max_seconds
        )
        result = _result("logs", args.chain_id, watched, started, "logs")
        result["removed"] = sum(
            1 for log in watched.items if isinstance(log, dict) and log.get("removed") is True
        )
        return result


def watch_tools(config: CompanionConfig) -> list[ToolSpec[Any]]:
    tools = WatchTools(RouterSockets(config))
    bounds = (
        "Holds a WebSocket for the agent and returns when `limit` notifications arrived or "
        f"`maxSeconds` (default {SECONDS_DEFAULT}, at most {SECONDS_MAX}) passed, whichever is "
        "first; stoppedBy says which. Each notification is billed at the chain's WebSocket "
        "price (GET /prices/ws)."
    )
    return [
        ToolSpec(
            "rpc_watch_heads",
            "Watch new blocks",
            f"New block headers of a chain as they are mined, in order. {bounds}",
            WatchHeadsArgs,
            tools.heads,
            idempotent=False,
        ),
        ToolSpec(
            "rpc_watch_logs",
            "Watch event logs",
            "Event logs of new blocks as they are mined, optionally by contract address and "
            "topics; after a reorg, the orphaned logs come again with removed: true. " + bounds,
            WatchLogsArgs,
            tools.logs,
            idempotent=False,
        ),
    ]
