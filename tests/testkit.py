"""Small helpers the test folders share (importable as ``testkit``: pytest puts this
folder on ``sys.path`` for its root conftest)."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cdc.model.position import Position
from cdc.playground.errors import ServiceError
from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.packages import ETCD_PACKAGES, MARIADB_PACKAGES, ensure_packages
from cdc.playground.ports import free_port
from cdc.source.flavor import current_position, detect


def _start(server: MariaDBServer | EtcdServer) -> None:
    try:
        server.start()
    except ServiceError as exc:
        pytest.fail(f"cannot start {server!r}:\n{exc}", pytrace=False)


def running_mariadb(
    factory: pytest.TempPathFactory, name: str, server_id: int, *, binlog: bool
) -> Iterator[MariaDBServer]:
    """A private MariaDB on a free loopback port for a session fixture to yield from
    (row binlog, full images and metadata, GTID when ``binlog``); stopped afterwards."""
    ensure_packages(MARIADB_PACKAGES)
    spec = MariaDBSpec(
        name=name,
        base_dir=factory.mktemp(f"{name}-db"),
        port=free_port(),
        server_id=server_id,
        binlog=binlog,
    )
    server = MariaDBServer(spec, die_with_parent=True)
    _start(server)
    yield server
    server.stop()


def running_etcd(factory: pytest.TempPathFactory, name: str) -> Iterator[EtcdServer]:
    """A private single-member etcd on free loopback ports, for a session fixture to
    yield from; stopped afterwards."""
    ensure_packages(ETCD_PACKAGES)
    client_port = free_port()
    peer_port = free_port()
    while peer_port == client_port:
        peer_port = free_port()
    spec = EtcdSpec(
        name=name,
        base_dir=factory.mktemp(f"{name}-etcd"),
        client_port=client_port,
        peer_port=peer_port,
    )
    server = EtcdServer(spec, die_with_parent=True)
    _start(server)
    yield server
    server.stop()


def wait_for(condition: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """The first truthy value of ``condition()``, polled every ``every`` seconds;
    AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def run_python(code: str) -> str:
    """What ``code`` prints when a fresh interpreter runs it: what a process that starts
    with those imports has (modules, threads, frozen objects). Raises, with the
    interpreter's stderr, if it fails."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise AssertionError(f"the probe failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def execute(server: MariaDBServer, *statements: str) -> list[tuple[Any, ...]]:
    """Runs ``statements`` on a connection of its own (autocommit); the rows of the last."""
    conn = server.connect()
    try:
        rows: list[tuple[Any, ...]] = []
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
                rows = list(cur.fetchall())
        return rows
    finally:
        conn.close()


def position_now(server: MariaDBServer) -> Position:
    """The server's binlog position now."""
    conn = server.connect()
    try:
        return current_position(conn, detect(conn))
    finally:
        conn.close()


class Outage:
    """A TCP forwarder from a free loopback port to ``target_port``, to take a server away.

    ``cut()`` stops listening and drops every forwarded connection, so clients
    see a lost connection and then "connection refused", as when the server is
    down; ``restore()`` listens on the same port again.
    """

    def __init__(self, target_port: int) -> None:
        self.port = free_port()
        self._target = target_port
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        listener, self._listener = self._listener, None
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in ([listener] if listener else []) + list(sockets):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self._target))
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
