"""Port helpers, against real sockets of this process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.playground.errors import PortInUseError, ServiceError
from cdc.playground.ports import (
    ensure_port_free,
    find_listener,
    free_port,
    parse_listening_inodes,
    port_is_free,
    wait_for_port,
)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock
    sock.close()


def own_name() -> str:
    return Path(f"/proc/{os.getpid()}/comm").read_text().strip()


def test_free_port_can_be_bound() -> None:
    port = free_port()
    assert 0 < port < 65536
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_listening_port_is_not_free(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert not port_is_free(port)
    listener.close()
    assert port_is_free(port)


def test_ensure_port_free_names_the_holder_and_the_option(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    with pytest.raises(PortInUseError) as failure:
        ensure_port_free(port, "source MariaDB", "--source-port")
    assert str(failure.value) == (
        f"source MariaDB: port {port} on 127.0.0.1 is already in use "
        f"(by pid {os.getpid()} {own_name()}); "
        "stop that process or choose another port with --source-port"
    )


def test_ensure_port_free_without_option(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    with pytest.raises(PortInUseError, match=r"stop that process or choose another port$"):
        ensure_port_free(port, "etcd")


def test_ensure_port_free_accepts_a_free_port() -> None:
    ensure_port_free(free_port(), "etcd")


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_ensure_port_free_rejects_impossible_ports(port: int) -> None:
    with pytest.raises(ServiceError, match=f"etcd: port {port} is not a TCP port"):
        ensure_port_free(port, "etcd")


def test_find_listener_sees_this_process(listener: socket.socket) -> None:
    owner = find_listener(listener.getsockname()[1])
    assert owner is not None
    assert owner.pid == os.getpid()


def test_find_listener_ignores_ports_nobody_listens_on() -> None:
    assert find_listener(free_port()) is None


def test_parse_listening_inodes_keeps_only_listeners_of_the_port() -> None:
    # Rows of /proc/net/tcp: port 0x0CF4 = 3316; state 0A is LISTEN, 01 ESTABLISHED.
    rows = [
        "   0: 0100007F:0CF4 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        "     0        0 4242 1 0000000000000000 100 0 0 10 0",
        "   1: 0100007F:0CF4 0100007F:D2A0 01 00000000:00000000 00:00000000 00000000"
        "     0        0 5151 1 0000000000000000 20 4 30 10 -1",
        "   2: 0100007F:0CF5 00000000:0000 0A 00000000:00000000 00:00000000 00000000"
        "     0        0 6161 1 0000000000000000 100 0 0 10 0",
        "garbage",
    ]
    assert parse_listening_inodes(rows, 3316) == {"4242"}
    assert parse_listening_inodes(rows, 3317) == {"6161"}
    assert parse_listening_inodes(rows, 80) == set()


def test_wait_for_port_returns_once_listening(listener: socket.socket) -> None:
    wait_for_port("127.0.0.1", listener.getsockname()[1], timeout=5)


def test_wait_for_port_times_out_with_the_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("line one\nstill starting\n")
    began = time.monotonic()
    with pytest.raises(ServiceError) as failure:
        wait_for_port("127.0.0.1", free_port(), timeout=0.3, logs=(log,))
    assert time.monotonic() - began < 5
    assert "after 0s" in str(failure.value)
    assert f"--- last lines of {log} ---\nline one\nstill starting" in str(failure.value)


def test_wait_for_port_fails_early_when_the_process_exits(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; print('bad option --x', file=sys.stderr); sys.exit(3)",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    began = time.monotonic()
    with pytest.raises(ServiceError) as failure:
        wait_for_port("127.0.0.1", free_port(), timeout=60, proc=proc, logs=(log,))
    assert time.monotonic() - began < 30
    message = str(failure.value)
    assert "exited with code 3 before listening" in message
    assert "bad option --x" in message


def test_wait_for_port_names_a_program_started_from_one_command_string() -> None:
    proc = subprocess.Popen("exit 4", shell=True)
    with pytest.raises(ServiceError, match=r"^exit 4 exited with code 4 before listening"):
        wait_for_port("127.0.0.1", free_port(), timeout=60, proc=proc)
