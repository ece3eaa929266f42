"""The smallest forwarder on the router's native server: its floor, without the pipeline.

`python -m bench.native_forwarder PORT` serves on the same Rust HTTP server and client as the
router (`chainrouter._native`, the default server), driving a one-line Python handler: read the
body, POST it to BENCH_UPSTREAM, answer with the upstream's body. BENCH_CLIENT=echo answers at
once instead, without any upstream: the server's own ceiling. What the router costs beyond this is
its pipeline (key, domain, credits, validation, routing, billing) and the glue around it.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import socket
import sys
import threading

from chainrouter.router.http_face import Answer
from chainrouter.router.native_io import UpstreamPost
from chainrouter.router.native_server import load_native_module

_UPSTREAM = os.environ.get("BENCH_UPSTREAM", "http://127.0.0.1:9001/")
_ECHO = os.environ.get("BENCH_CLIENT", "native") == "echo"
_HEADERS = [("content-type", "application/json")]
_ECHO_ANSWER = b'{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}'
_MAX_BYTES = 1 << 20


# The native server's handler contract, as `RouterFace.respond` keeps it.
async def forward(
    method: str,
    path: str,
    origin: str | None,
    referer: str | None,
    forwarded_for: str | None,
    peer: str,
    body: bytes | None,
) -> Answer:
    if body is None:
        return 413, _HEADERS, b""
    if _ECHO:
        return 200, _HEADERS, _ECHO_ANSWER
    reply = await UpstreamPost(_UPSTREAM, body, 10.0)
    return 200, _HEADERS, reply.body


def main() -> None:
    native = load_native_module()
    loop = asyncio.new_event_loop()  # never run: the handler awaits only the upstream POST
    driver = native.Driver(
        functools.partial(asyncio.run_coroutine_threadsafe, loop=loop),
        _MAX_BYTES,
        5.0,  # connect timeout, s
        30.0,  # idle kept connections close after this, s
        None,  # no extra CA file
        "chainrouter-bench",
    )
    server = native.NativeServer(forward, driver, _MAX_BYTES, 30.0)
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
