"""Redis servers for tests that need one of their own: a real one they may stop, make full or
start again on the same port, and one that hangs (accepts connections, never answers)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
import time

from tests.anvil import free_port


class PrivateRedis:
    """A Redis of this test's own, which it may stop."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        binary = shutil.which("redis-server")
        assert binary, "redis-server is installed by .ci/run"
        self.process = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while self.cli("ping").strip() != b"PONG":
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def cli(self, *args: str) -> bytes:
        return subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, check=False
        ).stdout

    def keys(self, pattern: str = "chainrouter:cache:*") -> list[bytes]:
        return self.cli("--scan", "--pattern", pattern).split()

    def wait_for_keys(self, count: int) -> None:
        deadline = time.monotonic() + 10
        while True:
            found = self.keys()
            if len(found) >= count:
                return
            assert time.monotonic() < deadline, f"{len(found)} cached answers in Redis"
            time.sleep(0.02)

    def spoil_every_key(self) -> None:
        for key in self.keys():
            self.cli("SET", key.decode(), "not json {")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


class SilentRedis:
    """A listener that accepts connections and never answers: a Redis that hangs."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                self.held.append(self.socket.accept()[0])

    def open_connections(self) -> int:
        """The connections accepted that the client has not closed."""
        count = 0
        for held in self.held:
            held.setblocking(False)
            try:
                while held.recv(65536):  # what the client sent, up to its end if it closed
                    pass
            except BlockingIOError:
                count += 1  # nothing more, and no end: still open
            except OSError:
                pass
        return count

    def close(self) -> None:
        # Closing alone would leave the thread's accept() listening (it holds the socket): a
        # server started next on the port would not get the connections.
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self.thread.join(5)
        for held in self.held:
            held.close()
