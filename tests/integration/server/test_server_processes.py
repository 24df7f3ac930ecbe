"""Real `cdc-server` processes against the real etcd: registration, owner failover, errors."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdc.api.health import is_serving
from cdc.cli.capture_cmd import list_captures
from cdc.playground.etcd import EtcdServer
from cdc.playground.ports import free_port
from cdc.store import EtcdConfig, EtcdStore
from cdc.store.keys import cluster_prefix

TTL = 2


class Server:
    def __init__(self, proc: subprocess.Popen[bytes], capture_id: str, port: int, log: Path):
        self.proc, self.capture_id, self.port, self.log = proc, capture_id, port, log


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


@pytest.fixture
def cluster_id(etcd_server: EtcdServer) -> Iterator[str]:
    cluster = f"test-{uuid.uuid4().hex[:8]}"
    yield cluster
    prefix = cluster_prefix(cluster)
    with etcd_server.store(prefix) as store:
        store.delete_prefix(prefix + "/")


@pytest.fixture
def store(etcd_server: EtcdServer, cluster_id: str) -> Iterator[EtcdStore]:
    config = EtcdConfig((etcd_server.endpoint,), prefix=cluster_prefix(cluster_id))
    with EtcdStore(config) as store:
        yield store


@pytest.fixture
def start_server(
    etcd_server: EtcdServer, cluster_id: str, tmp_path: Path
) -> Iterator[Callable[[str], Server]]:
    servers: list[Server] = []

    def start(name: str) -> Server:
        port = free_port()
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "capture.main",
                    f"--etcd={etcd_server.endpoint}",
                    f"--addr=127.0.0.1:{port}",
                    f"--capture-id={name}",
                    f"--cluster-id={cluster_id}",
                    f"--lease-ttl={TTL}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = Server(proc, name, port, log)
        servers.append(server)
        _wait(lambda: is_serving(f"127.0.0.1:{port}", timeout=0.5), 30, f"{name} to serve")
        return server

    yield start
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
        server.proc.wait()


def _owner(store: EtcdStore) -> str | None:
    owners = [c["id"] for c in list_captures(store) if c["is_owner"]]
    assert len(owners) <= 1, owners
    return owners[0] if owners else None


def test_one_owner_and_failover_after_sigkill(
    start_server: Callable[[str], Server], store: EtcdStore
) -> None:
    first = start_server("capture-a")
    _wait(lambda: _owner(store) == "capture-a", 10, "capture-a to be owner")
    second = start_server("capture-b")
    _wait(lambda: len(list_captures(store)) == 2, 10, "both captures registered")
    assert _owner(store) == "capture-a"

    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    # The owner key and the capture key expire with the dead capture's lease.
    _wait(lambda: _owner(store) == "capture-b", 4 * TTL + 5, "capture-b to take over")
    _wait(
        lambda: [c["id"] for c in list_captures(store)] == ["capture-b"],
        4 * TTL + 5,
        "the dead capture's key to expire",
    )
    assert "owner term starts" in second.log.read_text()


def test_sigterm_resigns_and_deregisters(
    start_server: Callable[[str], Server], store: EtcdStore
) -> None:
    first = start_server("capture-a")
    _wait(lambda: _owner(store) == "capture-a", 10, "capture-a to be owner")
    start_server("capture-b")
    first.proc.send_signal(signal.SIGTERM)
    assert first.proc.wait(timeout=20) == 0
    # Resigning deletes the owner key and revokes the lease at once: the capture
    # key is gone before its TTL could have run out on its own.
    assert [c["id"] for c in list_captures(store)] in (["capture-b"], [])
    _wait(lambda: _owner(store) == "capture-b", 2 * TTL + 5, "capture-b to take over")
    log = first.log.read_text()
    assert "received SIGTERM" in log and "resigned as owner" in log


#: tgkill(2)'s system call number: a signal sent to one thread of another process.
_TGKILL = {"x86_64": 234, "aarch64": 131}


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` installed (/proc's SigCgt)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def test_sigterm_taken_by_another_thread_still_stops_the_server(
    start_server: Callable[[str], Server],
) -> None:
    """The kernel may hand a process's SIGTERM to any of its threads; Python then only
    sets a flag that the main thread reads between bytecodes. A main thread parked in a
    wait without a timeout never read it: a cdc-server ignored a SIGTERM in a test run
    (in Kubernetes it would be SIGKILLed after the grace period, unregistered by its
    lease's expiry only). Sent to one of its other threads, the signal stops it."""
    if platform.machine() not in _TGKILL:
        pytest.skip(f"tgkill's number on {platform.machine()} is not known here")
    server = start_server("capture-a")
    pid = server.proc.pid
    _wait(lambda: _catches(pid, signal.SIGTERM), 10, "the SIGTERM handler")
    other = min(int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(_TGKILL[platform.machine()], pid, other, signal.SIGTERM) == 0
    assert server.proc.wait(timeout=20) == 0
    assert "received SIGTERM" in server.log.read_text()


def _run_server(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "capture.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CDC_ETCD": ""},
    )


def test_unreachable_etcd_is_a_clear_error() -> None:
    port = free_port()
    result = _run_server(f"--etcd=127.0.0.1:{port}", f"--addr=127.0.0.1:{free_port()}")
    assert result.returncode == 3
    assert f"127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr


def test_taken_admin_port_is_a_clear_error(etcd_server: EtcdServer, cluster_id: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_server(
            f"--etcd={etcd_server.endpoint}",
            f"--addr=127.0.0.1:{port}",
            f"--cluster-id={cluster_id}",
        )
    assert result.returncode == 3
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--addr=8300"], "--addr"),
        (["--addr=127.0.0.1:8300", "--lease-ttl=1"], "--lease-ttl"),
        (["--addr=127.0.0.1:8300"], "--etcd"),
        (["--addr=127.0.0.1:8300", "--etcd=127.0.0.1:notaport"], "etcd"),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args: list[str], field: str) -> None:
    if not any(a.startswith("--etcd") for a in args) and field != "--etcd":
        args = [*args, "--etcd=127.0.0.1:2379"]
    result = _run_server(*args)
    assert result.returncode == 2, result.stderr
    assert field in result.stderr
