"""A private etcd that wants TLS, a client certificate and a user's password, for the tests
of the etcd flags (cdc-server's and cdcctl's).

Started from the session's certificates (``Certs``: the server certificate names
127.0.0.1); authentication is switched on through etcd's own Auth API (user
``root`` with the ``root`` role, what ``etcdctl auth enable`` does).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from pyetcd.etcdrpc import rpc_pb2, rpc_pb2_grpc
from security_helpers import Certs

from cdc.playground.ports import free_port

USER = "root"


@dataclass(frozen=True)
class SecuredEtcd:
    endpoint: str
    password: str
    certs: Certs

    def flags(self) -> list[str]:
        """cdc-server's and cdcctl's flags for it (the password goes in CDC_ETCD_PASSWORD)."""
        return [
            f"--etcd={self.endpoint}",
            f"--etcd-ca={self.certs.pem('ca')}",
            f"--etcd-cert={self.certs.pem('client')}",
            f"--etcd-key={self.certs.key('client')}",
            f"--etcd-user={USER}",
        ]


def _channel(endpoint: str, certs: Certs) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        Path(certs.pem("ca")).read_bytes(),
        Path(certs.key("client")).read_bytes(),
        Path(certs.pem("client")).read_bytes(),
    )
    return grpc.secure_channel(endpoint, credentials)


def _enable_auth(endpoint: str, certs: Certs, password: str) -> None:
    with _channel(endpoint, certs) as channel:
        auth = rpc_pb2_grpc.AuthStub(channel)
        deadline = time.monotonic() + 30
        while True:
            try:
                auth.RoleAdd(rpc_pb2.AuthRoleAddRequest(name="root"), timeout=5)
                break
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        auth.UserAdd(rpc_pb2.AuthUserAddRequest(name=USER, password=password), timeout=5)
        auth.UserGrantRole(rpc_pb2.AuthUserGrantRoleRequest(user=USER, role="root"), timeout=5)
        auth.AuthEnable(rpc_pb2.AuthEnableRequest(), timeout=5)


@contextmanager
def secured_etcd(directory: Path, certs: Certs, password: str) -> Iterator[SecuredEtcd]:
    client, peer = free_port(), free_port()
    url, peer_url = f"https://127.0.0.1:{client}", f"http://127.0.0.1:{peer}"
    argv = [
        "etcd", "--name=secured", f"--data-dir={directory / 'data'}",
        f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
        f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=secured={peer_url}", "--initial-cluster-state=new",
        f"--cert-file={certs.pem('server')}", f"--key-file={certs.key('server')}",
        f"--trusted-ca-file={certs.pem('ca')}", "--client-cert-auth",
        "--logger=zap", "--log-outputs=stderr",
    ]  # fmt: skip
    with (directory / "etcd.log").open("wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    try:
        endpoint = f"127.0.0.1:{client}"
        try:
            _enable_auth(endpoint, certs, password)
        except grpc.RpcError as exc:
            pytest.fail(
                f"the secured etcd did not start: {exc}\n{(directory / 'etcd.log').read_text()}"
            )
        yield SecuredEtcd(endpoint, password, certs)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
