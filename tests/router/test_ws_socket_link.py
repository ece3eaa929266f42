"""The native executor's side of a WebSocket connection (router/executors/native_websocket.py):
frames read and written with wsproto over the socket the Rust server relays. A message in
fragments is one message; a ping is answered; an oversize message closes with 1009; a client
silent through two pings is dropped."""

from __future__ import annotations

import asyncio
import socket

import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, Ping, Pong, TextMessage

from chainrouter.router.executors.native_websocket import SocketLink

pytestmark = pytest.mark.anyio


async def _pair(max_bytes: int = 1 << 20) -> tuple[SocketLink, socket.socket, Connection]:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    theirs.setblocking(False)
    return SocketLink(reader, writer, max_bytes), theirs, Connection(ConnectionType.CLIENT)


async def _send(sock: socket.socket, frames: bytes) -> None:
    await asyncio.get_running_loop().sock_sendall(sock, frames)


async def _events(sock: socket.socket, client: Connection) -> list[object]:
    data = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 65536), 5)
    client.receive_data(data or None)
    return list(client.events())


async def test_a_fragmented_message_is_one_and_a_ping_is_answered() -> None:
    link, peer, client = await _pair()
    await _send(peer, client.send(TextMessage(data='{"a":', message_finished=False)))
    await _send(peer, client.send(Ping(payload=b"hi")))
    await _send(peer, client.send(TextMessage(data='"b"}', message_finished=True)))
    assert await link.receive() == '{"a":"b"}'
    assert [type(e) for e in await _events(peer, client)] == [Pong]
    await link.send(b'{"ok":true}')
    [answer] = await _events(peer, client)
    assert isinstance(answer, TextMessage)
    assert answer.data == '{"ok":true}'
    await link.close(1000, "bye")
    [closing] = await _events(peer, client)
    assert isinstance(closing, CloseConnection)
    assert closing.code == 1000
    peer.close()


async def test_an_oversize_message_closes_with_1009() -> None:
    link, peer, client = await _pair(max_bytes=16)
    await _send(peer, client.send(TextMessage(data="x" * 17)))
    assert await link.receive() is None
    [closing] = await _events(peer, client)
    assert isinstance(closing, CloseConnection)
    assert closing.code == 1009
    peer.close()


async def test_a_client_silent_through_two_pings_is_dropped() -> None:
    link, peer, client = await _pair()
    await asyncio.wait_for(link.keep_alive(every_s=0.1), 5)
    seen = []
    while True:
        data = await asyncio.wait_for(asyncio.get_running_loop().sock_recv(peer, 65536), 5)
        if not data:
            break
        client.receive_data(data)
        seen += list(client.events())
    assert any(isinstance(e, Ping) for e in seen)
    assert isinstance(seen[-1], CloseConnection)
    assert seen[-1].code == 1001
    peer.close()
