"""A TCP relay on loopback that a test can shut like a cable pulled: every connection through it
is cut and new ones are refused until it is opened again. It stands between a client and a
real server (PostgreSQL, Redis), which go on running."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.anvil import free_port


class TcpGate:
    def __init__(
        self, target_port: int, target_host: str = "127.0.0.1", listen_host: str = "127.0.0.1"
    ) -> None:
        self.port = free_port()
        self._listen_host = listen_host
        self._target = (target_host, target_port)
        self._lock = threading.Lock()
        self._open_sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.accepted = 0  # connections taken, counted before they are relayed
        self.open()

    def open(self) -> None:
        listener = socket.create_server((self._listen_host, self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def shut(self) -> None:
        """Refuse new connections and cut the ones open (both ends see them end)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            # Wakes the thread blocked in accept() (a close alone would leave it accepting).
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self._lock:
            sockets, self._open_sockets = self._open_sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # shut
            self.accepted += 1
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open_sockets |= {client, server}
            for one, other in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(one, other), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
