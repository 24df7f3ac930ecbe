"""Fixtures of the store tests: stores on the shared etcd, and private etcd members.

The shared ``etcd_server`` / ``etcd_prefix`` come from tests/conftest.py. Tests
that must restart etcd or need TLS or authentication get a private member of
their own from ``private_etcd`` (started here, stopped at the end of the test
module), so the shared server is never disturbed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cdc.playground.ports import free_port
from cdc.store import EtcdConfig, EtcdStore


@pytest.fixture
def store_config(etcd_server, etcd_prefix: str) -> EtcdConfig:
    return EtcdConfig(endpoints=(etcd_server.endpoint,), prefix=etcd_prefix, dial_timeout=3.0)


@pytest.fixture
def open_store(store_config: EtcdConfig) -> Iterator[Callable[..., EtcdStore]]:
    """Opens stores (each its own connection) on the test's prefix; all closed afterwards."""
    opened: list[EtcdStore] = []

    def make(config: EtcdConfig | None = None) -> EtcdStore:
        store = EtcdStore(config or store_config)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: Callable[..., EtcdStore]) -> EtcdStore:
    return open_store()


@dataclass
class PrivateEtcd:
    """One etcd member started by a test module, restartable with the same data."""

    base: Path
    extra: list[str]
    scheme: str = "http"
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        client = f"{self.scheme}://{self.endpoint}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        argv = [
            "etcd",
            f"--name=m-{self.client_port}",
            f"--data-dir={self.base / 'data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=m-{self.client_port}={peer}",
            *self.extra,
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        with open(self.base / "etcd.log", "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                tail = (self.base / "etcd.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"private etcd exited with {self.proc.returncode}:\n{tail}")
            try:
                with socket.create_connection(("127.0.0.1", self.client_port), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("private etcd did not open its client port") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


@pytest.fixture(scope="module")
def private_etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., PrivateEtcd]]:
    """``private_etcd(*extra_args, scheme="http")`` starts a member; all stop with the module."""
    started: list[PrivateEtcd] = []

    def start(*extra: str, scheme: str = "http") -> PrivateEtcd:
        member = PrivateEtcd(tmp_path_factory.mktemp("etcd-private"), list(extra), scheme)
        started.append(member)
        member.start()
        return member

    yield start
    for member in started:
        member.stop()


@pytest.fixture
def connect_when_ready() -> Iterator[Callable[[EtcdConfig], EtcdStore]]:
    """``connect_when_ready(config)``: a store once a just-started member answers."""
    opened: list[EtcdStore] = []

    def connect(config: EtcdConfig, timeout: float = 15.0) -> EtcdStore:
        deadline = time.monotonic() + timeout
        while True:
            try:
                store = EtcdStore(config)
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
                continue
            opened.append(store)
            return store

    yield connect
    for store in opened:
        store.close()
