"""Shared by the security tests: certificates made with openssl, and real cdc-server processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from cdc.api.channel import ClientSecurity
from cdc.api.health import is_serving
from cdc.playground.ports import free_port
from cdc.store import EtcdConfig, EtcdStore
from cdc.store.keys import cluster_prefix


def _openssl(directory: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)


def _key_and_csr(directory: Path, name: str) -> None:
    _openssl(
        directory,
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
    )  # fmt: skip


def _make_ca(directory: Path, name: str) -> None:
    _openssl(
        directory,
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}",
    )  # fmt: skip


def _make_cert(directory: Path, ca: str, name: str, extensions: str) -> None:
    _key_and_csr(directory, name)
    (directory / f"{name}.ext").write_text(extensions)
    _openssl(
        directory,
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
    )  # fmt: skip


@dataclass(frozen=True)
class Certs:
    """``<name>.pem`` and ``<name>.key`` files in ``directory``."""

    directory: Path

    def pem(self, name: str) -> str:
        return str(self.directory / f"{name}.pem")

    def key(self, name: str) -> str:
        return str(self.directory / f"{name}.key")


def make_certs(directory: Path) -> Certs:
    """A CA with a server certificate (127.0.0.1, localhost) and a client certificate;
    a second, unrelated CA with a client certificate of its own."""
    server = "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"
    client = "extendedKeyUsage=clientAuth\n"
    for ca in ("ca", "other-ca"):
        _make_ca(directory, ca)
    _make_cert(directory, "ca", "server", server)
    _make_cert(directory, "ca", "client", client)
    _make_cert(directory, "other-ca", "other-client", client)
    return Certs(directory)


@dataclass(frozen=True)
class RunningServer:
    address: str
    cluster_id: str
    log: Path
    store: EtcdStore
    proc: subprocess.Popen[bytes]


@contextmanager
def cdc_server(
    etcd_endpoint: str,
    log: Path,
    args: Sequence[str] = (),
    *,
    env: dict[str, str] | None = None,
    security: ClientSecurity | None = None,
) -> Iterator[RunningServer]:
    """A cdc-server process with ``args`` on a free port, its own cluster id; its keys removed."""
    port = free_port()
    cluster = f"sec-{uuid.uuid4().hex[:8]}"
    argv = [
        sys.executable,
        "-m",
        "capture.main",
        f"--etcd={etcd_endpoint}",
        f"--addr=127.0.0.1:{port}",
        "--capture-id=sec-1",
        f"--cluster-id={cluster}",
        "--lease-ttl=2",
        *args,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
        )
    address = f"127.0.0.1:{port}"
    try:
        with EtcdStore(EtcdConfig((etcd_endpoint,), prefix=cluster_prefix(cluster))) as store:
            deadline = time.monotonic() + 30
            while not is_serving(address, timeout=0.5, security=security):
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"cdc-server did not start:\n{log.read_text()}")
                time.sleep(0.1)
            yield RunningServer(address, cluster, log, store, proc)
            store.delete_prefix(cluster_prefix(cluster) + "/")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_server(*args: str) -> subprocess.CompletedProcess[str]:
    """`cdc-server` with ``args`` run to its end (for flags that make it exit)."""
    return subprocess.run(
        [sys.executable, "-m", "capture.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CDC_ETCD": "", "CDC_AUTH_TOKEN_FILE": ""},
    )
