"""nginx as a JSON-RPC upstream and as the `proxy_pass` baseline, for benchmarks.

The static upstream answers every call with one fixed result. Under `/chain/{hex id}/` it plays a
node of that chain: the result is the chain's ID, which is right for `eth_chainId`, so the
router's health checks keep its nodes, and the same head for all nodes of a chain, so they stay
in sync.

The echo upstream (`echo_nginx`, nginx's JavaScript module) reads each request and answers every
call of it, single or batch, under the call's own id: the chain's ID to `eth_chainId`, one head
to `eth_blockNumber`, and `0x1` to anything else. Ids are read as JavaScript reads JSON: integers
beyond 2**53 lose digits, so the benchmarks use small ones.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

STATIC_BODY = '{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}'

# The upstream and the proxy run as two nginx instances of one worker each, so that the proxy, like
# the routers, has a process of its own and reaches its upstream in another. One worker serving
# both (as before 2026-11-23) spent part of its core on the upstream's answers, and answered its
# own upstream requests without waking another process: measured the same day, 48,000 against
# 69,000 requests/s for the proxy at full load, and 13 against 24 µs added with one connection.
_COMMON = """
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
{server}
}}
"""
_UPSTREAM_SERVER = """
    server {{
        listen 127.0.0.1:{static_port};
        location / {{
            default_type application/json;
            return 200 '{body}';
        }}
        location ~ ^/chain/(?<chain>[0-9a-f]+)/ {{
            default_type application/json;
            return 200 '{{"jsonrpc":"2.0","id":1,"result":"0x$chain"}}';
        }}
    }}
"""
_PROXY_SERVER = """
    upstream static_upstream {{ server 127.0.0.1:{static_port}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{proxy_port};
        location / {{
            proxy_pass http://static_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
"""


_ECHO_SCRIPT = """
function answer(call, chain) {
    var result = call.method === "eth_chainId" ? chain
        : call.method === "eth_blockNumber" ? "0x10d4f" : "0x1";
    return {jsonrpc: "2.0", id: call.id, result: result};
}
function echo(r) {
    var chain = "0x" + r.variables.chain;
    var request;
    try {
        request = JSON.parse(r.requestText);
    } catch (e) {
        r.return(400, '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}');
        return;
    }
    var out = Array.isArray(request)
        ? request.map(function (call) { return answer(call, chain); })
        : answer(request, chain);
    r.headersOut["Content-Type"] = "application/json";
    r.return(200, JSON.stringify(out));
}
export default {echo};
"""
_ECHO_MODULE = "load_module /usr/lib/nginx/modules/ngx_http_js_module.so;\n"
_ECHO_SERVER = """
    js_import echo from {dir}/echo.js;
    server {{
        listen 127.0.0.1:{echo_port};
        client_body_buffer_size 64k;
        location ~ ^/chain/(?<chain>[0-9a-f]+)/ {{
            js_content echo.echo;
        }}
    }}
"""


@dataclass(frozen=True, slots=True)
class Nginx:
    """The master process ids of the two nginx instances (each has one worker below it)."""

    upstream: int
    proxy: int


def require_tools() -> None:
    missing = [tool for tool in ("nginx", "wrk", "taskset") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(
            f"missing {', '.join(missing)}: apt-get install nginx wrk util-linux "
            "(make bench does this)"
        )


def wait_until_serving(url: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            httpx.post(url, content=b"{}", timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not start serving")


def wait_until_ready(base: str, timeout_s: float = 60.0) -> None:
    """Until `base`/health answers 200: a router or API that is ready to serve."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{base} did not become ready")


@contextmanager
def anvil(chain_id: int) -> Iterator[tuple[str, int]]:
    """A local anvil node of `chain_id` (the npm package's binary): its URL and port."""
    port = free_port()
    binary = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "anvil"
    process = subprocess.Popen(
        [str(binary), "--port", str(port), "--chain-id", str(chain_id), "--silent"],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url)
        yield url, port
    finally:
        process.terminate()
        process.wait(30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _one_nginx(server: str, module: str = "", **values: object) -> Iterator[int]:
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "nginx.conf"
        (Path(directory) / "echo.js").write_text(_ECHO_SCRIPT)
        server = server.format(dir=directory, **values)
        config.write_text(module + _COMMON.format(dir=directory, server=server))
        process = subprocess.Popen(
            ["nginx", "-c", str(config), "-p", directory],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            yield process.pid
        finally:
            process.terminate()
            process.wait(timeout=10)


@contextmanager
def nginx(static_port: int, proxy_port: int) -> Iterator[Nginx]:
    """Run the static upstream and, in a process of its own, the proxy in front of it."""
    with (
        _one_nginx(_UPSTREAM_SERVER, static_port=static_port, body=STATIC_BODY) as upstream,
        _one_nginx(_PROXY_SERVER, static_port=static_port, proxy_port=proxy_port) as proxy,
    ):
        wait_until_serving(f"http://127.0.0.1:{static_port}/")
        wait_until_serving(f"http://127.0.0.1:{proxy_port}/")
        yield Nginx(upstream, proxy)


@contextmanager
def echo_nginx(echo_port: int, proxy_port: int) -> Iterator[Nginx]:
    """Run the echo upstream and, in a process of its own, the proxy in front of it."""
    with (
        _one_nginx(_ECHO_SERVER, _ECHO_MODULE, echo_port=echo_port) as upstream,
        _one_nginx(_PROXY_SERVER, static_port=echo_port, proxy_port=proxy_port) as proxy,
    ):
        wait_until_serving(f"http://127.0.0.1:{echo_port}/chain/1/")
        wait_until_serving(f"http://127.0.0.1:{proxy_port}/chain/1/")
        yield Nginx(upstream, proxy)
