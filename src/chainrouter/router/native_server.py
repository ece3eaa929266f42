"""The router on the native server (`chainrouter._native`): workers, their threads, their stop.

A worker has two threads. The server's thread runs the Rust HTTP server and client and steps
the pipeline's coroutines (`native_io`), and the health checker's beside them; the main thread
runs an asyncio event loop for the storage sync (its database calls in worker threads) and for
the awaits that need it (Redis). Signals reach the main thread: SIGTERM or SIGINT stops the
server, lets the requests in flight finish, then writes the metered usage, as under granian.

With several workers, this process binds the socket and starts each worker as a child process
sharing it (`python -m chainrouter.router.native_server FD`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from chainrouter.router.http_face import RouterFace
from chainrouter.router.native_io import NATIVE
from chainrouter.router.process import assemble_worker, settle_heap
from chainrouter.settings import Settings, load_settings

log = logging.getLogger(__name__)

_BACKLOG = 2048
_STOP_GRACE_S = 30.0  # requests in flight get this long to finish at a stop
_HEADER_TIMEOUT_S = 30.0  # a client must send a request's head within this
_IDLE_UPSTREAM_S = 30.0  # kept connections to nodes close after this long unused
_USER_AGENT = "chainrouter"


def load_native_module() -> Any:
    try:
        from chainrouter import _native  # type: ignore[attr-defined]
    except ImportError as exc:
        raise SystemExit(
            "the native server is not built (CHAINROUTER_RPC_SERVER=native): run `make setup`, "
            f"which builds it with cargo from Debian's Rust packages ({exc})"
        ) from exc
    return _native


def new_driver(native: Any, settings: Settings, loop: asyncio.AbstractEventLoop) -> Any:
    """The Rust driver of the pipeline's coroutines, with its client to nodes; `loop` runs
    what they await that needs asyncio."""
    return native.Driver(
        functools.partial(asyncio.run_coroutine_threadsafe, loop=loop),
        settings.max_response_bytes,
        settings.upstream_connect_timeout_s,
        _IDLE_UPSTREAM_S,
        str(settings.outbound_ca_file) if settings.outbound_ca_file else None,
        _USER_AGENT,
    )


def serve_native(settings: Settings) -> int:
    """Serve until SIGTERM or SIGINT; the exit status."""
    native = load_native_module()
    family = socket.AF_INET6 if ":" in settings.rpc_host else socket.AF_INET
    listener = socket.create_server(
        (settings.rpc_host, settings.rpc_port), family=family, backlog=_BACKLOG
    )
    if settings.rpc_workers == 1:
        return run_worker(settings, listener, native)
    return _supervise(settings.rpc_workers, listener)


def run_worker(settings: Settings, listener: socket.socket, native: Any) -> int:
    runtime, trusted = assemble_worker(settings, native=True)
    face = RouterFace(runtime, trusted)
    loop = _new_event_loop()
    driver = new_driver(native, settings, loop)
    server = native.NativeServer(face.respond, driver, settings.max_body_bytes, _HEADER_TIMEOUT_S)
    settle_heap()
    stopping = asyncio.Event()
    failures: list[BaseException] = []

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
        runtime.start_background(health_checks=False)
        # Checks on the server's thread, beside the requests (they begin as it starts serving):
        # on the event loop's thread they took the interpreter's lock from them.
        driver.spawn(runtime.health.run(runtime.current_nodes, NATIVE))
        for signum in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(signum, stopping.set)

    serving = threading.Thread(target=serve, name="native-server", daemon=True)
    try:
        loop.run_until_complete(start())
        serving.start()
        loop.run_until_complete(stopping.wait())
        server.stop()
        # The loop keeps running meanwhile: requests in flight may need it (Redis limits).
        loop.run_until_complete(asyncio.to_thread(serving.join, _STOP_GRACE_S))
        if serving.is_alive():
            log.warning("requests still in flight after %.0f s; stopping anyway", _STOP_GRACE_S)
        loop.run_until_complete(runtime.stop())
    finally:
        loop.close()
        listener.close()
    for failure in failures:
        log.error("the native server stopped", exc_info=failure)
    return 1 if failures else 0


def _new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency; asyncio's loop still works
        loop = asyncio.new_event_loop()
    else:
        loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def _supervise(workers: int, listener: socket.socket) -> int:
    """Run `workers` child processes on the shared socket until a signal, or one of them dies."""
    fd = listener.fileno()
    # This interpreter and module, with a descriptor number: nothing from outside.
    command = [sys.executable, "-m", "chainrouter.router.native_server", str(fd)]
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
    deadline = time.monotonic() + _STOP_GRACE_S + 30
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
