"""The native executor's server and driver, with a handler of the test's own
(`chainrouter._native.NativeServer`, `Driver`).

The router's behaviour on this executor is checked in `test_server.py` and through every pipeline
test; this module checks what the Rust side does by itself: the `HttpRequest` it passes the
handler, how it writes an `HttpAnswer` given at once or after commands, the commands it carries
out, and what a client gets when the handler fails, answers something malformed, or the body is
over the limit.
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

from chainrouter.ratelimit.window import Bucket, Limiter, MemoryLimiter
from chainrouter.router.contract import (
    Acquire,
    Failure,
    Forward,
    HttpAnswer,
    HttpRequest,
    Spawn,
    Wait,
)
from chainrouter.router.executors.native import NativeExecutor, load_native_module, new_driver
from chainrouter.testing.faulty_upstream import FaultyUpstream

Handler = Callable[[HttpRequest], Coroutine[Any, Any, Any]]
_CALL = b'{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}'


def _driver(loop: asyncio.AbstractEventLoop, limiter: Limiter | None = None) -> Any:
    return new_driver(
        load_native_module(),
        limiter or MemoryLimiter(),
        loop,
        max_response_bytes=1 << 20,
        connect_timeout_s=2.0,
    )


@contextmanager
def served(
    handler: Handler,
    *,
    max_body_bytes: int = 1024,
    body_timeout_s: float = 30.0,
    max_connections: int = 10_000,
) -> Iterator[str]:
    """`handler` behind a native server on a free port; yields its base URL."""
    native = load_native_module()
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    driver = _driver(loop)
    server = native.NativeServer(
        handler, driver, max_body_bytes, 30.0, body_timeout_s, max_connections
    )
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


def test_the_handler_gets_the_request_as_the_contracts_http_request() -> None:
    seen: list[HttpRequest] = []

    async def handler(request: HttpRequest) -> HttpAnswer:
        seen.append(request)
        return HttpAnswer(200, [("content-type", "application/json")], b"{}")

    with served(handler) as url:
        httpx.post(
            f"{url}/rpc/1/key",
            content=_CALL,
            headers={
                "Origin": "https://app.example.com",
                "Referer": "https://app.example.com/page",
                "X-Forwarded-For": "203.0.113.9",
                "Content-Type": "application/json; charset=utf-8",
            },
        )
        httpx.get(f"{url}/health?x=1")
    assert seen == [
        HttpRequest(
            "POST",
            "/rpc/1/key",
            "https://app.example.com",
            "https://app.example.com/page",
            "203.0.113.9",
            "application/json; charset=utf-8",
            "127.0.0.1",
            _CALL,
        ),
        HttpRequest("GET", "/health", None, None, None, None, "127.0.0.1", b""),
    ]


def test_an_answer_given_without_waiting_is_written_as_given() -> None:
    async def handler(_: HttpRequest) -> HttpAnswer:
        headers = [
            ("content-type", "application/json"),
            ("x-batch-id", "b-1"),
            ("vary", "origin"),
            ("x-other", "a"),
            ("x-other", "b"),
        ]
        return HttpAnswer(201, headers, b'{"ok":true}')

    with served(handler) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=_CALL)
    assert response.status_code == 201
    assert response.content == b'{"ok":true}'
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-batch-id"] == "b-1"
    assert response.headers["vary"] == "origin"
    assert response.headers.get_list("x-other") == ["a", "b"]


def test_an_answer_given_after_forwarding_to_nodes_is_written(upstream: FaultyUpstream) -> None:
    async def handler(_: HttpRequest) -> HttpAnswer:
        first = await Forward(upstream.url("/ok"), _CALL, 5)
        second = await Forward(upstream.url("/status/503"), _CALL, 5)
        assert isinstance(first, bytes)
        assert isinstance(second, Failure)
        body = first + b"\n" + orjson.dumps([second.kind, second.status])
        return HttpAnswer(200, [("content-type", "application/json")], body)

    with served(handler) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=_CALL)
    assert response.status_code == 200
    first, second = response.content.splitlines()
    assert orjson.loads(first)["id"] == 1
    assert orjson.loads(second) == ["http_status", 503]


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
    async def handler(_: HttpRequest) -> HttpAnswer:
        raise ValueError("a bug")

    with served(handler) as url:
        _assert_internal_error(httpx.post(f"{url}/rpc/1/key", content=_CALL))
    [record] = [r for r in caplog.records if r.name == "chainrouter.router.executors.native"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)
    assert "a bug" in caplog.text


def test_a_handler_that_raises_after_waiting_gets_an_internal_error(
    upstream: FaultyUpstream,
) -> None:
    async def handler(_: HttpRequest) -> HttpAnswer:
        await Forward(upstream.url("/ok"), _CALL, 5)
        raise ValueError("a bug")

    with served(handler) as url:
        _assert_internal_error(httpx.post(f"{url}/rpc/1/key", content=_CALL))


def test_a_malformed_answer_gets_an_internal_error_and_the_server_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers: list[Any] = [
        HttpAnswer(99999, [], b""),  # not an HTTP status
        HttpAnswer(200, [("bad name", "v")], b""),
        HttpAnswer(200, [("x-ok", "line\nbreak")], b""),
        HttpAnswer(200, [], "text, not bytes"),  # type: ignore[arg-type]
        (200, [], b"a tuple, not an HttpAnswer"),
    ]

    async def handler(_: HttpRequest) -> Any:
        return answers.pop(0) if answers else HttpAnswer(200, [], b"fine")

    with served(handler) as url, httpx.Client() as client:
        for _ in range(5):
            _assert_internal_error(client.post(f"{url}/rpc/1/key", content=_CALL))
        assert client.post(f"{url}/rpc/1/key", content=_CALL).content == b"fine"
    logged = [r for r in caplog.records if r.name == "chainrouter.router.executors.native"]
    assert len(logged) == 5


def test_an_over_size_body_reaches_the_handler_as_none_and_the_connection_closes() -> None:
    bodies: list[bytes | None] = []

    async def handler(request: HttpRequest) -> HttpAnswer:
        bodies.append(request.body)
        return HttpAnswer(413, [("content-type", "application/json")], b"{}")

    with served(handler, max_body_bytes=1024) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=b"x" * 1025)
        within = httpx.post(f"{url}/rpc/1/key", content=b"x" * 1024)
    assert response.status_code == 413
    assert response.headers["connection"] == "close"
    assert "connection" not in within.headers
    assert bodies == [None, b"x" * 1024]


def test_awaiting_what_is_not_a_command_fails_loudly() -> None:
    async def handler(_: HttpRequest) -> HttpAnswer:
        try:
            await asyncio.sleep(0)  # a bare yield, which only an event loop understands
        except RuntimeError as exc:
            return HttpAnswer(200, [], str(exc).encode())
        return HttpAnswer(200, [], b"awaited without a loop")

    with served(handler) as url:
        response = httpx.post(f"{url}/rpc/1/key", content=_CALL)
    assert response.content == b"a program awaited NoneType, which is not a command"


def test_a_handler_can_wait_and_spawn_programs_whose_failures_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ran = threading.Event()

    async def beside() -> None:
        await Wait(0.05)
        ran.set()

    async def failing() -> None:
        await Wait(0)
        raise ValueError("a background bug")

    async def handler(_: HttpRequest) -> HttpAnswer:
        started = time.monotonic()
        await Wait(0.05)
        slept = time.monotonic() - started
        await Spawn(beside())
        await Spawn(failing())
        return HttpAnswer(200, [], f"{slept:.3f} {ran.is_set()}".encode())

    with served(handler) as url:
        slept, ran_before_answer = httpx.post(f"{url}/rpc/1/key", content=_CALL).text.split()
        assert ran.wait(5)
        deadline = time.monotonic() + 5
        while "a background bug" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.01)
    assert float(slept) >= 0.05
    assert ran_before_answer == "False"  # the answer did not wait for it
    [record] = [r for r in caplog.records if r.name == "chainrouter.router.executors.native"]
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    assert isinstance(record.exc_info[1], ValueError)


def test_a_program_spawned_from_another_thread_runs_while_the_driver_is_driven() -> None:
    loop = asyncio.new_event_loop()
    try:
        driver = _driver(loop)
        ran = threading.Event()

        async def job() -> None:
            await Wait(0.01)
            ran.set()

        async def pause() -> None:
            await Wait(0.2)

        driver.spawn(job())
        time.sleep(0.05)
        assert not ran.is_set()  # nothing drives the runtime yet
        driver.run(pause())
        assert ran.is_set()
    finally:
        loop.close()


def test_acquire_is_answered_by_the_hosts_limiter_at_once_or_through_the_event_loop() -> None:
    """The in-process limiter answers on the server's thread; the Redis one's await goes to the
    event loop (here a limiter whose `acquire` must run there), and the driver waits for it."""
    bucket = Bucket("test", 2, 60.0)

    async def three_times() -> list[bool]:
        return [await Acquire([bucket]) == 0.0 for _ in range(3)]

    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    try:
        assert _driver(loop).run(three_times()) == [True, True, False]

        class OnTheLoop:  # a limiter whose awaits need the event loop, as Redis's do
            def __init__(self) -> None:
                self.inner = MemoryLimiter()
                self.loops: list[asyncio.AbstractEventLoop] = []

            async def acquire(self, buckets: Any) -> float:
                self.loops.append(asyncio.get_running_loop())
                return self.inner.try_acquire(buckets)

        on_loop = OnTheLoop()
        assert _driver(loop, on_loop).run(three_times()) == [True, True, False]  # type: ignore[arg-type]
        assert on_loop.loops == [loop] * 3
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(10)
        loop.close()


def test_the_native_executor_runs_programs_from_asyncio_code() -> None:
    async def main() -> list[Any]:
        executor = NativeExecutor(_driver(asyncio.get_running_loop()))

        async def program() -> str:
            await Wait(0.01)
            return "done"

        return [await executor.run(program())]

    assert asyncio.run(main()) == ["done"]


def test_a_body_that_does_not_arrive_in_time_is_408_and_the_handler_never_sees_it() -> None:
    """A client dripping its body holds no connection for long (docs/security.md)."""
    seen: list[HttpRequest] = []

    async def handler(request: HttpRequest) -> HttpAnswer:
        seen.append(request)
        return HttpAnswer(200, [], b"{}")

    with served(handler, body_timeout_s=0.3) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=5) as connection:
            connection.sendall(
                b"POST /rpc/1/key HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n{"
            )
            started = time.monotonic()
            answer = connection.recv(4096)
            waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408")
    assert b"connection: close" in answer.lower()
    assert 0.2 < waited < 3
    assert seen == []


def test_past_its_connection_bound_the_server_accepts_nothing_until_one_closes() -> None:
    """5,000 idle connections must not all be held (issue 35): beyond the bound, new ones wait
    in the kernel's backlog, and are served as soon as a place frees up."""

    async def handler(request: HttpRequest) -> HttpAnswer:
        return HttpAnswer(200, [("content-type", "application/json")], b"{}")

    with served(handler, max_connections=2) as url:
        host, port = url.removeprefix("http://").split(":")
        idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(2)]
        time.sleep(0.2)  # both accepted, holding the two places
        with socket.create_connection((host, int(port)), timeout=0.5) as waiting:
            waiting.sendall(b"POST /rpc/1/k HTTP/1.1\r\nHost: r\r\nContent-Length: 2\r\n\r\n{}")
            with pytest.raises(TimeoutError):
                waiting.recv(4096)  # not accepted: no answer
            idle[0].close()
            waiting.settimeout(5)
            assert waiting.recv(4096).startswith(b"HTTP/1.1 200")
        idle[1].close()
