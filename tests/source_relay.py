"""A source address that can move to another server, as a DNS name moves to a promoted replica.

``Relay(port)`` listens on a free loopback port and forwards every connection to
``port``; ``switch(other)`` drops every forwarded connection (clients see a lost
connection) and forwards the next ones to ``other``. Importable as
``source_relay`` (pytest puts tests/ on ``sys.path`` for its root conftest).
"""

from __future__ import annotations

import contextlib
import socket
import threading

from cdc.playground.ports import free_port

__all__ = ["Relay"]


class Relay:
    """See the module docstring; ``close()`` when done."""

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self.target = target_port
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def switch(self, target_port: int) -> None:
        """From now on to ``target_port``; every open connection is cut."""
        with self._lock:
            self.target = target_port
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()
        self.switch(self.target)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                target = self.target
            try:
                upstream = socket.create_connection(("127.0.0.1", target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets |= {client, upstream}
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pipe, args=(src, dst), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(1 << 16):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_RDWR)
