"""The native server's own contract with its handler (`chainrouter._native.NativeServer`).

The router's behaviour on this server is checked in `test_server.py` and through every pipeline
test; this module checks what the Rust side does by itself: what it passes the handler, how it
writes an answer given at once or after waits, and what a client gets when the handler fails,
answers something malformed, or the body is over the limit.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest

from chainrouter.router.native_io import NativeUpstream, Sleep, Spawn
from chainrouter.router.native_server import load_native_module
from chainrouter.testing.faulty_upstream import FaultyUpstream
from tests.router.conftest import driver_on

Handler = Callable[..., Coroutine[Any, Any, Any]]
_CALL = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'


@contextmanager
def served(handler: Handler, *, max_body_bytes: int = 1024) -> Iterator[str]:
    """`handler` behind a native server on a free port; yields its base URL."""
    native = load_native_module()
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    driver = driver_on(loop)
    server = native.NativeServer(handler, driver, max_body_bytes, 30.0)
    listener = socket.create_server(("127.0.0.1", 0))
    serving = threading.Thread(target=server.serve, args=(listener.fileno(),), daemon=True)
    serving.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.stop()
        serving.join(10)
        listener.close()
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(10)
        loop.close()


def test_the_handler_gets_method_path_headers_peer_and_body() -> None:
    seen: list[tuple[Any, ...]] = []

    async def handler(*args: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        seen.append(args)
        return 200, [("content-type", "application/json")], b"{}"

    with served(handler) as url:
        httpx.post(
            f"{url}/rpc/1/key",
            content=_CALL,
            headers={
                "Origin": "https://app.example.com",
                "Referer": "https://app.example.com/page",
                "X-Forwarded-For": "203.0.113.9",
            },
        )
        httpx.get(f"{url}/health")
    assert seen == [
        (
            "POST",
            "/rpc/1/key",
            "https://app.example.com",
            "https://app.example.com/page",
            "203.0.113.9",
            "127.0.0.1",
            _CALL,
        ),
        ("GET", "/health", None, None, None, "127.0.0.1", b""),
    ]


def test_an_answer_given_without_waiting_is_written_as_given() -> None:
    async def handler(*_: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        headers = [
            ("content-type", "application/json"),
            ("x-batch-id", "b-1"),
            ("vary", "origin"),
            ("x-other", "a"),
            ("x-other", "b"),
        ]
        return 201, headers, b'{"ok":true}'

    with served(handler) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=_CALL)
    assert response.status_code == 201
    assert response.content == b'{"ok":true}'
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-batch-id"] == "b-1"
    assert response.headers["vary"] == "origin"
    assert response.headers.get_list("x-other") == ["a", "b"]


def test_an_answer_given_after_waiting_on_a_node_is_written(upstream: FaultyUpstream) -> None:
    client = NativeUpstream()

    async def handler(*_: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        first = await client.post(upstream.url("/ok"), _CALL, timeout_s=5)
        second = await client.post(upstream.url("/ok"), _CALL, timeout_s=5)
        return 200, [("content-type", "application/json")], first.body + b"\n" + second.body

    with served(handler) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=_CALL)
    assert response.status_code == 200
    assert [orjson.loads(line)["id"] for line in response.content.splitlines()] == [1, 1]


def _assert_internal_error(response: httpx.Response) -> None:
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    assert orjson.loads(response.content) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": "internal error"},
    }


def test_a_handler_that_raises_before_waiting_gets_an_internal_error_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def handler(*_: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        raise ValueError("a bug")

    with served(handler) as url:
        _assert_internal_error(httpx.post(f"{url}/rpc/1/key", content=_CALL))
    [record] = [r for r in caplog.records if r.name == "chainrouter.router.native_server"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)
    assert "a bug" in caplog.text


def test_a_handler_that_raises_after_waiting_gets_an_internal_error(
    upstream: FaultyUpstream,
) -> None:
    client = NativeUpstream()

    async def handler(*_: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        await client.post(upstream.url("/ok"), _CALL, timeout_s=5)
        raise ValueError("a bug")

    with served(handler) as url:
        _assert_internal_error(httpx.post(f"{url}/rpc/1/key", content=_CALL))


def test_a_malformed_answer_gets_an_internal_error_and_the_server_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[Any] = [
        (99999, [], b""),  # not an HTTP status
        (200, [("bad name", "v")], b""),
        (200, [("x-ok", "line\nbreak")], b""),
        (200, [], "text, not bytes"),
        "not a tuple",
    ]

    async def handler(*_: Any) -> Any:
        return answers.pop(0) if answers else (200, [], b"fine")

    with served(handler) as url, httpx.Client() as client:
        for _ in range(5):
            _assert_internal_error(client.post(f"{url}/rpc/1/key", content=_CALL))
        assert client.post(f"{url}/rpc/1/key", content=_CALL).content == b"fine"
    logged = [r for r in caplog.records if r.name == "chainrouter.router.native_server"]
    assert len(logged) == 5


def test_an_over_size_body_reaches_the_handler_as_none_and_the_connection_closes() -> None:
    bodies: list[bytes | None] = []

    async def handler(*args: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        bodies.append(args[-1])
        return 413, [("content-type", "application/json")], b"{}"

    with served(handler, max_body_bytes=1024) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=b"x" * 1025)
        within = httpx.post(f"{url}/rpc/1/key", content=b"x" * 1024)
    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    assert "connection" not in within.headers
    assert bodies == [None, b"x" * 1024]


def test_awaiting_what_the_driver_cannot_do_fails_loudly() -> None:
    async def handler(*_: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        try:
            await asyncio.sleep(0)  # a bare yield, which only an event loop understands
        except RuntimeError as exc:
            return 200, [], str(exc).encode()
        return 200, [], b"awaited without a loop"

    with served(handler) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=_CALL)
    assert b"cannot await" in response.content


def test_a_handler_can_sleep_and_spawn_coroutines_whose_failures_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran = threading.Event()

    async def beside() -> None:
        await Sleep(0.05)
        ran.set()

    async def failing() -> None:
        await Sleep(0)
        raise ValueError("a background bug")

    async def handler(*_: Any) -> tuple[int, list[tuple[str, str]], bytes]:
        started = time.monotonic()
        await Sleep(0.05)
        slept = time.monotonic() - started
        await Spawn(beside())
        await Spawn(failing())
        return 200, [], f"{slept:.3f} {ran.is_set()}".encode()

    with served(handler) as url:
        slept, ran_before_answer = httpx.post(f"{url}/rpc/1/key", content=_CALL).text.split()
        assert ran.wait(5)
        deadline = time.monotonic() + 5
        while "a background bug" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
    assert float(slept) >= 0.05
    assert ran_before_answer == "False"  # the answer did not wait for it
    [record] = [r for r in caplog.records if r.name == "chainrouter.router.native_io"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)


def test_a_coroutine_spawned_from_another_thread_runs_while_the_driver_is_driven() -> None:
    loop = asyncio.new_event_loop()
    try:
        driver = driver_on(loop)
        ran = threading.Event()

        async def job() -> None:
            await Sleep(0.01)
            ran.set()

        async def pause() -> None:
            await Sleep(0.2)

        driver.spawn(job())
        time.sleep(0.05)
        assert not ran.is_set()  # nothing drives the runtime yet
        driver.run(pause())
        assert ran.is_set()
    finally:
        loop.close()
