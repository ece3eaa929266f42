"""TLS for tests: a private CA (trustme) whose certificate for localhost and 127.0.0.1 fronts
real nodes with https:// and wss://, and a mining anvil behind such a front (WebSocket nodes must
deliver newHeads, so it mines a block every second)."""

from __future__ import annotations

import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from chainrouter.testing.tls_front import TlsFront
from tests.anvil import anvil_binary, free_port, wait_until_answering

MINING_CHAIN = 31339


@dataclass(frozen=True)
class Tls:
    ca: trustme.CA
    ca_file: Path
    server_context: ssl.SSLContext


def make_tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    ca = trustme.CA()
    ca_file = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    return Tls(ca, ca_file, context)


@dataclass(frozen=True)
class MiningNode:
    http: str  # plain, for the test itself
    https: str  # through the TLS front
    wss: str


def start_mining_anvil(tls: Tls) -> Iterator[MiningNode]:
    """An anvil of chain 31339 that mines a block every second (WebSocket nodes must deliver a
    newHeads notification), behind an HTTPS/WSS front."""
    port = free_port()
    process = subprocess.Popen(
        [
            anvil_binary(),
            "--port",
            str(port),
            "--chain-id",
            str(MINING_CHAIN),
            "--block-time",
            "1",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(url)
        with TlsFront(url, tls.server_context) as front:
            yield MiningNode(url, front.url, front.ws_url)
    finally:
        process.terminate()
        process.wait(10)
