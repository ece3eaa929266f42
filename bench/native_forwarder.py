"""The smallest forwarder on the native executor: its floor, without the pipeline.

`python -m bench.native_forwarder PORT` serves on the same Rust HTTP server, driver and client as
the router (`chainrouter._native`, the default executor), running a one-line Python handler: read
the body, `Forward` it to BENCH_UPSTREAM, answer with the upstream's body. BENCH_CLIENT=echo
answers at once instead, without any upstream: the server's own ceiling. What the router costs
beyond this is its pipeline (key, domain, credits, validation, routing, billing) and its glue.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading

from chainrouter.ratelimit.window import MemoryLimiter
from chainrouter.router.contract import Failure, Forward, HttpAnswer, HttpRequest
from chainrouter.router.executors.native import load_native_module, new_driver

_UPSTREAM = os.environ.get("BENCH_UPSTREAM", "http://127.0.0.1:9001/")
_ECHO = os.environ.get("BENCH_CLIENT", "native") == "echo"
_HEADERS = [("content-type", "application/json")]
_ECHO_ANSWER = b'{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}'
_MAX_BYTES = 1 << 20
_MAX_CONNECTIONS = 10_000


async def forward(request: HttpRequest) -> HttpAnswer:
    if request.body is None:
        return HttpAnswer(413, _HEADERS, b"")
    if _ECHO:
        return HttpAnswer(200, _HEADERS, _ECHO_ANSWER)
    answer = await Forward(_UPSTREAM, request.body, 10.0)
    if isinstance(answer, Failure):
        return HttpAnswer(502, _HEADERS, b"")
    return HttpAnswer(200, _HEADERS, answer)


def main() -> None:
    native = load_native_module()
    loop = asyncio.new_event_loop()  # never run: the handler acquires nothing
    driver = new_driver(
        native, MemoryLimiter(), loop, max_response_bytes=_MAX_BYTES, connect_timeout_s=5.0
    )
    # Head and body deadlines and the connection bound as the router's defaults have them.
    server = native.NativeServer(forward, driver, _MAX_BYTES, 30.0, 30.0, _MAX_CONNECTIONS)
    listener = socket.create_server(("127.0.0.1", int(sys.argv[1])), backlog=2048)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    serving = threading.Thread(target=server.serve, args=(listener.fileno(),), daemon=True)
    serving.start()
    stopped.wait()
    server.stop()
    serving.join(timeout=10)


if __name__ == "__main__":
    main()
