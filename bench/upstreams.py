"""nginx as a static JSON-RPC upstream and as the `proxy_pass` baseline, for benchmarks.

The upstream answers every call with one fixed result. Under `/chain/{hex id}/` it plays a node of
that chain: the result is the chain's ID, which is right for `eth_chainId`, so the router's health
checks keep its nodes, and the same head for all nodes of a chain, so they stay in sync.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

STATIC_BODY = '{"jsonrpc":"2.0","id":1,"result":"0x10d4f"}'

_CONFIG = """
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
    upstream static_upstream {{ server 127.0.0.1:{static_port}; keepalive 64; }}
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
    server {{
        listen 127.0.0.1:{proxy_port};
        location / {{
            proxy_pass http://static_upstream;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
}}
"""


def require_tools() -> None:
    missing = [tool for tool in ("nginx", "wrk") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(
            f"missing {', '.join(missing)}: apt-get install nginx wrk (make bench does this)"
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


@contextmanager
def nginx(static_port: int, proxy_port: int) -> Iterator[int]:
    """Run one nginx worker serving the static upstream and the proxy in front of it; yields the
    master's process id (the worker runs below it)."""
    with tempfile.TemporaryDirectory() as directory:
        config = Path(directory) / "nginx.conf"
        config.write_text(
            _CONFIG.format(
                dir=directory, static_port=static_port, proxy_port=proxy_port, body=STATIC_BODY
            )
        )
        process = subprocess.Popen(
            ["nginx", "-c", str(config), "-p", directory],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_until_serving(f"http://127.0.0.1:{static_port}/")
            wait_until_serving(f"http://127.0.0.1:{proxy_port}/")
            yield process.pid
        finally:
            process.terminate()
            process.wait(timeout=10)
