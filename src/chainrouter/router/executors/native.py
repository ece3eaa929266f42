"""The native executor (`chainrouter._native`, Rust): its Python side, workers and their stop.

The Rust HTTP server hands each request to the router as a program (contract.py) and steps it on
the server's thread, carrying out `Forward`, `Gather`, `Wait` and `Spawn` itself. `Acquire` needs
the rate limiter, which is Python: the driver calls `host_acquirer`'s function for it, which
answers at once from the in-process limiter, or hands the Redis limiter's await to the worker's
event loop and gives the driver its future to wait on.

A worker has two threads. The server's thread runs the Rust server and client, the requests and
the health checker; the main thread runs an asyncio event loop for the storage sync (its database
calls in worker threads) and for Redis. Signals reach the main thread: SIGTERM or SIGINT drains the
worker (`drain`): `/health` answers 503 for `drain_delay_s` while it still serves, so that the
load balancer takes it out first; then its WebSocket clients are told to reconnect (1012), the
server stops accepting and the requests in flight get `shutdown_grace_s` to finish, and the
metered usage is written.

With several workers, this process binds the socket and starts each worker as a child process
sharing it (`python -m chainrouter.router.executors.native FD`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from chainrouter.net.outbound import DialRule
from chainrouter.ratelimit.window import Limiter, MemoryLimiter
from chainrouter.router.contract import Acquire, Program
from chainrouter.router.executors.native_websocket import WsClients, websocket_handler
from chainrouter.router.executors.process import (
    assemble_worker,
    settings_dial_rule,
    settle_heap,
)
from chainrouter.router.fast.memo import native_fast_path
from chainrouter.settings import Settings, load_settings

log = logging.getLogger(__name__)
T = TypeVar("T")

_BACKLOG = 2048
_WS_CLOSE_S = 5.0  # WebSocket sessions get this long to end once told to reconnect
_IDLE_UPSTREAM_S = 30.0  # kept connections to nodes close after this long unused
_USER_AGENT = "chainrouter"


def load_native_module() -> Any:
    try:
        from chainrouter import _native
    except ImportError as exc:
        raise SystemExit(
            "the native executor is not built (CHAINROUTER_RPC_SERVER=native): run `make setup`, "
            f"which builds it with cargo from Debian's Rust packages ({exc})"
        ) from exc
    return _native


def host_acquirer(
    limiter: Limiter, loop: asyncio.AbstractEventLoop
) -> Callable[[Acquire], float | concurrent.futures.Future[float]]:
    """How the driver carries out `Acquire`: the result at once, or a future to wait on."""
    if isinstance(limiter, MemoryLimiter):
        return lambda command: limiter.try_acquire(command.buckets)
    return lambda command: asyncio.run_coroutine_threadsafe(limiter.acquire(command.buckets), loop)


def new_driver(
    native: Any,
    limiter: Limiter,
    loop: asyncio.AbstractEventLoop,
    *,
    max_response_bytes: int,
    connect_timeout_s: float,
    idle_s: float = _IDLE_UPSTREAM_S,
    ca_file: Path | None = None,
    rule: DialRule | None = None,
) -> Any:
    """The Rust driver of programs, with its client to nodes; `loop` serves the Redis limiter;
    `rule` judges each address a new connection would use (None: any)."""
    return native.Driver(
        host_acquirer(limiter, loop),
        rule.problem_of if rule is not None and rule.checks else None,
        max_response_bytes,
        connect_timeout_s,
        idle_s,
        str(ca_file) if ca_file else None,
        _USER_AGENT,
    )


class NativeExecutor:
    """The native driver, as asyncio code (the tests) hands programs to it: each `run` steps its
    program on a thread of its own, as the server's thread would."""

    name = "native"

    def __init__(self, driver: Any) -> None:
        self.driver = driver

    async def run(self, program: Coroutine[Any, Any, T]) -> T:
        result: T = await asyncio.to_thread(self.driver.run, program)
        return result

    def spawn(self, program: Program) -> None:
        self.driver.spawn(program)

    async def close(self) -> None:
        return None  # connections and spawned programs end with the driver's runtime


def serve_native(settings: Settings) -> int:
    """Serve until SIGTERM or SIGINT; the exit status."""
    native = load_native_module()
    family = socket.AF_INET6 if ":" in settings.rpc_host else socket.AF_INET
    listener = socket.create_server(
        (settings.rpc_host, settings.rpc_port), family=family, backlog=_BACKLOG
    )
    if settings.rpc_workers == 1:
        return run_worker(settings, listener, native)
    return _supervise(
        settings.rpc_workers, listener, settings.drain_delay_s + settings.shutdown_grace_s
    )


def run_worker(settings: Settings, listener: socket.socket, native: Any) -> int:
    runtime, trusted = assemble_worker(settings, native_fast_path(native, settings))
    loop = _new_event_loop()
    driver = new_driver(
        native,
        runtime.limiter,
        loop,
        max_response_bytes=settings.max_response_bytes,
        connect_timeout_s=settings.upstream_connect_timeout_s,
        ca_file=settings.outbound_ca_file,
        rule=settings_dial_rule(settings),
    )
    executor = NativeExecutor(driver)
    face = runtime.face(trusted, executor)
    server = native.NativeServer(
        face.respond,
        executor.driver,
        settings.max_body_bytes,
        settings.request_head_timeout_s,
        settings.request_body_timeout_s,
        settings.max_connections,
    )
    deps = runtime.service.deps
    if runtime.settle is not None and deps.grants is not None:
        server.apply_decisions(deps.grants.memo, runtime.settle)
    clients = WsClients()
    server.accept_websockets(
        websocket_handler(
            runtime, executor.driver, loop, settings.ws_max_message_bytes, trusted, clients
        )
    )
    settle_heap()
    stopping = asyncio.Event()
    hurry = asyncio.Event()  # a second signal: no more waiting for the balancer
    failures: list[BaseException] = []

    def signalled() -> None:
        (hurry if stopping.is_set() else stopping).set()

    def serve() -> None:
        try:
            server.serve(listener.fileno())
        except BaseException as exc:  # reported by the main thread, which then stops
            failures.append(exc)
        finally:
            # The loop is gone only when the stop gave up waiting for this thread.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)

    async def start() -> None:
        # The checker runs on the server's thread, beside the requests, from when it serves: on
        # the event loop's thread its checks took the interpreter's lock from them.
        await runtime.start_background(executor)
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, signalled)

    serving = threading.Thread(target=serve, name="native-server", daemon=True)
    try:
        loop.run_until_complete(start())
        serving.start()
        loop.run_until_complete(stopping.wait())
        # The loop keeps running meanwhile: requests in flight may need it (Redis limits).
        loop.run_until_complete(
            drain(
                face.drain,
                clients,
                server.stop,
                serving,
                delay_s=0.0 if failures else settings.drain_delay_s,
                grace_s=settings.shutdown_grace_s,
                hurry=hurry,
            )
        )
        loop.run_until_complete(runtime.stop())
    finally:
        loop.close()
        listener.close()
    for failure in failures:
        log.error("the native server stopped", exc_info=failure)
    return 1 if failures else 0


async def drain(
    mark: Callable[[], None],
    clients: WsClients,
    stop_accepting: Callable[[], None],
    serving: threading.Thread,
    *,
    delay_s: float,
    grace_s: float,
    hurry: asyncio.Event,
) -> None:
    """A worker's stop, up to writing its usage: `mark` it draining (`/health` 503) and go on
    serving for `delay_s` (or until `hurry`), so that the balancer sends its new requests
    elsewhere; tell the WebSocket clients to reconnect; stop accepting, and give what is in
    flight `grace_s` to finish (the server's thread, `serving`, ends when it has)."""
    mark()
    if delay_s > 0:
        log.info("draining: /health answers 503 for %.1f s, then the router stops", delay_s)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay_s):
                await hurry.wait()
    closed = await clients.close_all(min(grace_s, _WS_CLOSE_S))
    if closed:
        log.info("%d WebSocket clients told to reconnect (1012)", closed)
    stop_accepting()
    await asyncio.to_thread(serving.join, grace_s)
    if serving.is_alive():
        log.warning("requests still in flight after %.0f s; stopping anyway", grace_s)


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; asyncio's loop still works
        loop = asyncio.new_event_loop()
    else:
        loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def _supervise(workers: int, listener: socket.socket, stop_s: float) -> int:
    """Run `workers` child processes on the shared socket until a signal, or one of them dies."""
    fd = listener.fileno()
    # This interpreter and module, with a descriptor number: nothing from outside.
    command = [sys.executable, "-m", "chainrouter.router.executors.native", str(fd)]
    children = [subprocess.Popen(command, pass_fds=[fd]) for _ in range(workers)]  # noqa: S603
    listener.close()  # the children hold it now
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    status = 0
    while not stop.is_set():
        ended = [child for child in children if child.poll() is not None]
        if ended:
            log.error(
                "router worker %d exited with %s; stopping", ended[0].pid, ended[0].returncode
            )
            status = 1
            break
        stop.wait(0.5)
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    # A worker's own stop is bounded by its settings (`stop_s`: drain and grace) and the
    # usage's write: this only catches one that hangs past them.
    deadline = time.monotonic() + stop_s + 30
    for child in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(max(0.1, deadline - time.monotonic()))
        if child.poll() is None:
            child.kill()
            status = 1
    return status


def main() -> int:
    """A worker started by `_supervise`: the listening socket is inherited as descriptor argv[1]."""
    fd = int(sys.argv[1])
    listener = socket.socket(fileno=fd)
    # Ctrl-C reaches the whole process group; the supervisor relays SIGTERM, and the worker
    # takes either as a stop.
    return run_worker(load_settings(), listener, load_native_module())


if __name__ == "__main__":
    sys.exit(main())
