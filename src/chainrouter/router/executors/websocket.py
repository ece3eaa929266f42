"""The Python executor's WebSocket endpoint: `ws://host:port/rpc/{chainId}/{apiKey}` as uvicorn
hands it over (ASGI `websocket`). The upgrade passes the keyed route's access checks and a
per-key bound, or is refused with the HTTP status and JSON-RPC error of spec section 7; then a
`WsSession` serves the connection (router/ws/session.py). The free tier's path refuses
WebSocket (docs/websocket.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from chainrouter.jsonrpc.errors import RpcCode, RpcError
from chainrouter.jsonrpc.responses import error_response
from chainrouter.net.client_ip import IpNetwork, client_address, client_block
from chainrouter.router.executors.python import PythonExecutor
from chainrouter.router.pipeline import Reply
from chainrouter.router.runtime import RouterRuntime
from chainrouter.router.ws.session import WsSession

_DENIAL = "websocket.http.response"  # the ASGI extension for an HTTP answer to an upgrade


class AsgiLink:
    """A `ClientLink` over ASGI's websocket messages."""

    def __init__(self, receive: Any, send: Any) -> None:
        self._receive = receive
        self._send = send

    async def receive(self) -> str | bytes | None:
        message = await self._receive()
        if message["type"] != "websocket.receive":
            return None  # websocket.disconnect
        text: str | None = message.get("text")
        if text is not None:
            return text
        data: bytes | None = message.get("bytes")
        return data

    async def send(self, message: bytes) -> None:
        await self._send({"type": "websocket.send", "text": message.decode()})

    async def close(self, code: int, reason: str) -> None:
        await self._send({"type": "websocket.close", "code": code, "reason": reason})

    def abort(self, code: int, reason: str) -> None:
        # uvicorn sends the close frame and drops a client that does not answer it in time.
        self._aborting = asyncio.ensure_future(self.close(code, reason))


async def serve_websocket(
    runtime: RouterRuntime,
    executor: PythonExecutor,
    trusted: Sequence[IpNetwork],
    scope: dict[str, Any],
    receive: Any,
    send: Any,
) -> None:
    hub = runtime.hub
    assert hub is not None
    service = runtime.service
    headers: dict[bytes, str] = {name: value.decode("latin-1") for name, value in scope["headers"]}
    origin, referer = headers.get(b"origin"), headers.get(b"referer")
    path: str = scope["path"]
    parts = path[5:].split("/") if path.startswith("/rpc/") else []
    if len(parts) != 2 or not parts[0] or not parts[1] or parts[0] == "evm":
        message = "WebSocket is served at /rpc/{chainId}/{apiKey}, with a key"
        await _deny(scope, send, RpcError(404, RpcCode.INVALID_REQUEST, message))
        return
    chain_segment, api_key = parts
    request = service.check_upgrade(chain_segment, api_key, origin=origin, referer=referer)
    if request.refusal is not None:
        await _deny(scope, send, request.refusal)
        return
    access = request.access
    assert access is not None
    client = scope.get("client")
    peer = client[0] if client else ""
    address = client_block(client_address(peer, headers.get(b"x-forwarded-for"), trusted))
    refusal = hub.open(access, address)
    if refusal is not None:
        await _deny(scope, send, refusal)
        return
    try:
        if (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})

        async def handle(body: bytes) -> Reply:
            program = service.handle_keyed(
                chain_segment, api_key, body, origin=origin, referer=referer
            )
            return await executor.run(program)

        deps = service.deps
        session = WsSession(
            AsgiLink(receive, send),
            request,
            hub,
            handle,
            deps.credits,
            deps.meter,
            runtime.ws_limits,
            lambda: (
                service.check_upgrade(
                    chain_segment, api_key, origin=origin, referer=referer
                ).refusal
            ),
        )
        hub.watch(session)
        try:
            await session.run()
        finally:
            hub.unwatch(session)
    finally:
        hub.close(access, address)


async def _deny(scope: dict[str, Any], send: Any, refusal: RpcError) -> None:
    """Refuse the upgrade with the refusal's HTTP status and JSON-RPC error (where the server
    supports answering an upgrade with HTTP; else a policy close, which it sends as 403)."""
    if _DENIAL in scope.get("extensions", {}):
        await send(
            {
                "type": "websocket.http.response.start",
                "status": refusal.http_status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "websocket.http.response.body", "body": error_response(refusal)})
        return
    await send({"type": "websocket.close", "code": 1008, "reason": refusal.message[:120]})
