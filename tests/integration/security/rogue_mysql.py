"""A rogue MySQL server for the tests of issue #18, speaking just enough of the protocol.

It greets like MariaDB offering an authentication plugin, takes the client's
handshake response, then plays a script of authentication packets (``RECV``
reads one packet of the client). If the script ends in an OK packet it answers
every command with OK, except ``LOAD DATA``, which it answers by asking for the
local file ``ask_for``, as a malicious server may whatever the statement said.
Everything the client sends after its handshake response is kept, to prove
what never left the client.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Sequence

RECV = b""
OK = b"\x00\x00\x00\x02\x00\x00\x00"
SALT = b"abcdefghijklmnopqrst"
# LONG_PASSWORD, LONG_FLAG, CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS,
# SECURE_CONNECTION, MULTI_RESULTS, PLUGIN_AUTH: no SSL, so no TLS is possible.
_CAPABILITIES = 1 | 4 | 8 | 512 | 8192 | 32768 | (1 << 17) | (1 << 19)
_COM_QUIT, _COM_QUERY = 1, 3


def auth_switch(plugin: str) -> bytes:
    """The packet switching the client to ``plugin`` with a fresh salt."""
    return b"\xfe" + plugin.encode() + b"\0" + SALT + b"\0"


def _packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq % 256]) + payload


def _greeting(plugin: str) -> bytes:
    return (
        b"\x0a5.5.5-10.11.0-MariaDB-rogue\0"
        + (7).to_bytes(4, "little")
        + SALT[:8]
        + b"\0"
        + (_CAPABILITIES & 0xFFFF).to_bytes(2, "little")
        + bytes([33])
        + (2).to_bytes(2, "little")
        + (_CAPABILITIES >> 16).to_bytes(2, "little")
        + bytes([21])
        + b"\0" * 10
        + SALT[8:]
        + b"\0"
        + plugin.encode()
        + b"\0"
    )


class _Closed(Exception):
    pass


def _read(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise _Closed
        data += chunk
    return data


class RogueServer:
    """Serves clients one after another until ``close``; see the module's docstring."""

    def __init__(
        self, plugin: str, script: Sequence[bytes] = (OK,), ask_for: str | None = None
    ) -> None:
        self.plugin, self.script, self.ask_for = plugin, tuple(script), ask_for
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.after_handshake = b""  # every byte a client sent after its handshake response
        self.client_packets: list[bytes] = []  # the same, as packet payloads
        self.file_requests = 0
        self.file_data = b""  # what clients sent in answer to a file request
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                with contextlib.suppress(_Closed, OSError):
                    self._session(conn)

    def _receive(self, conn: socket.socket) -> tuple[int, bytes]:
        header = _read(conn, 4)
        payload = _read(conn, int.from_bytes(header[:3], "little"))
        self.after_handshake += header + payload
        self.client_packets.append(payload)
        return header[3], payload

    def _session(self, conn: socket.socket) -> None:
        conn.sendall(_packet(0, _greeting(self.plugin)))
        header = _read(conn, 4)
        _read(conn, int.from_bytes(header[:3], "little"))  # user, scramble: not kept
        seq = 2
        for step in self.script:
            if step == RECV:
                seq = self._receive(conn)[0] + 1
            else:
                conn.sendall(_packet(seq, step))
                seq += 1
        if self.script[-1:] != (OK,):
            while True:  # keep whatever the client still sends
                self._receive(conn)
        while True:
            _, command = self._receive(conn)
            if command[:1] == bytes([_COM_QUIT]):
                return
            if (
                command[:1] == bytes([_COM_QUERY])
                and command[1:].lstrip().upper().startswith(b"LOAD DATA")
                and self.ask_for is not None
            ):
                self._ask_for_file(conn)
            else:
                conn.sendall(_packet(1, OK))

    def _ask_for_file(self, conn: socket.socket) -> None:
        self.file_requests += 1
        assert self.ask_for is not None
        conn.sendall(_packet(1, b"\xfb" + self.ask_for.encode()))
        while True:
            seq, payload = self._receive(conn)
            if not payload:
                break
            self.file_data += payload
        conn.sendall(_packet(seq + 1, OK))

    def close(self) -> None:
        self._closing.set()
        # a thread blocked in accept() is not woken by close(): give it one last client
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._thread.join(timeout=15)
        self.listener.close()
