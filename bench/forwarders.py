"""Minimal forwarding apps, one per HTTP client, to choose the Python executor's server and
client.

Each is the smallest honest forwarder: read the request body, POST it to the upstream, answer with
the upstream's body. Configured by environment so that any ASGI server can import `app`:
BENCH_CLIENT (aiohttp, pyreqwest, httpx, echo) and BENCH_UPSTREAM (URL).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

Forward = Callable[[bytes], Awaitable[bytes]]
UPSTREAM = os.environ.get("BENCH_UPSTREAM", "http://127.0.0.1:9001/")
CLIENT = os.environ.get("BENCH_CLIENT", "pyreqwest")
_HEADERS = {"content-type": "application/json"}


def _pyreqwest() -> Forward:
    from pyreqwest.client import ClientBuilder

    client = ClientBuilder().build()

    async def forward(body: bytes) -> bytes:
        request = client.post(UPSTREAM).headers(_HEADERS).body_bytes(body).build()
        response = await request.send()
        return bytes(await response.bytes())

    return forward


def _aiohttp() -> Forward:
    import aiohttp

    # As the Python executor sets it up (executors/python.py).
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        skip_auto_headers=("Accept-Encoding",),
        auto_decompress=False,
    )

    async def forward(body: bytes) -> bytes:
        async with session.post(UPSTREAM, data=body, headers=_HEADERS) as response:
            return await response.read()

    return forward


def _httpx() -> Forward:
    import httpx

    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None))

    async def forward(body: bytes) -> bytes:
        response = await client.post(UPSTREAM, content=body, headers=_HEADERS)
        return response.content

    return forward


def _echo() -> Forward:
    """No upstream at all: the server's own ceiling."""
    answer = b'{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}'

    async def forward(body: bytes) -> bytes:
        return answer

    return forward


_FACTORIES = {
    "pyreqwest": _pyreqwest,
    "aiohttp": _aiohttp,
    "httpx": _httpx,
    "echo": _echo,
}
_forward: Forward | None = None


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _forward
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if _forward is None:  # made on first use, inside the server's event loop
        _forward = _FACTORIES[CLIENT]()
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    answer = await _forward(body)
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": answer})
