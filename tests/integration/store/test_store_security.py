"""TLS and authentication against private etcd members: working setups and clear refusals."""

from __future__ import annotations

import json
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from cdc.errors import ConfigError
from cdc.store import EtcdConfig, EtcdStore, StoreUnavailable

pytestmark = pytest.mark.integration


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
        "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip


def _make_cert(directory: Path, ca: str, name: str, usage: str) -> None:
    ext = directory / f"{name}.ext"
    ext.write_text(f"subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n")
    _openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", str(ext),
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA with a server and a client certificate, and an unrelated second CA."""
    directory = tmp_path_factory.mktemp("certs")
    _make_ca(directory, "ca")
    _make_ca(directory, "other-ca")
    _make_cert(directory, "ca", "server", "serverAuth")
    _make_cert(directory, "ca", "client", "clientAuth")
    return directory


@pytest.fixture(scope="module")
def tls_etcd(private_etcd, certs: Path):
    """An etcd serving only TLS and requiring client certificates signed by ``ca``."""
    return private_etcd(
        f"--cert-file={certs / 'server.pem'}",
        f"--key-file={certs / 'server.key'}",
        f"--trusted-ca-file={certs / 'ca.pem'}",
        "--client-cert-auth=true",
        scheme="https",
    )


def _gateway(endpoint: str, path: str, body: dict) -> None:
    """One call of etcd's JSON gateway (the tests' etcdctl: none is installed)."""
    request = urllib.request.Request(
        f"http://{endpoint}/v3/{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        response.read()


@pytest.fixture(scope="module")
def auth_etcd(private_etcd):
    """An etcd with authentication on (root user, random password, 1 s auth tokens)."""
    member = private_etcd("--auth-token=simple", "--auth-token-ttl=1")
    password = secrets.token_hex(12)
    deadline = time.monotonic() + 15
    while True:
        try:
            _gateway(member.endpoint, "auth/role/add", {"name": "root"})
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    _gateway(member.endpoint, "auth/user/add", {"name": "root", "password": password})
    _gateway(member.endpoint, "auth/user/grant", {"user": "root", "role": "root"})
    _gateway(member.endpoint, "auth/enable", {})
    member.password = password
    return member


def _config(endpoint: str, **kwargs) -> EtcdConfig:
    return EtcdConfig(endpoints=(endpoint,), prefix="/cdc/security", dial_timeout=3.0, **kwargs)


def test_tls_with_a_client_certificate_works(tls_etcd, certs: Path, connect_when_ready) -> None:
    config = _config(
        tls_etcd.endpoint,
        ca=str(certs / "ca.pem"),
        cert=str(certs / "client.pem"),
        key=str(certs / "client.key"),
    )
    store = connect_when_ready(config)
    store.put(store.keys.capture("c"), {"addr": "x"})
    assert store.get(store.keys.capture("c")).json()["addr"] == "x"


def test_plain_client_to_a_tls_server_is_refused_clearly(tls_etcd, connect_when_ready) -> None:
    with pytest.raises(StoreUnavailable) as info:
        EtcdStore(_config(tls_etcd.endpoint))
    message = str(info.value)
    assert message.startswith(f"etcd at {tls_etcd.endpoint} is unavailable")
    assert "TLS is off (no CA file set), so etcd must serve plain http" in message


def test_tls_client_to_a_plain_server_is_refused_clearly(etcd_server, certs: Path) -> None:
    with pytest.raises(StoreUnavailable) as info:
        EtcdStore(_config(etcd_server.endpoint, ca=str(certs / "ca.pem")))
    message = str(info.value)
    assert message.startswith(f"etcd at {etcd_server.endpoint} is unavailable")
    assert "TLS handshake failed" in message
    assert f"check that etcd serves TLS (https) on {etcd_server.endpoint}" in message


def test_a_server_signed_by_another_ca_is_refused(tls_etcd, certs: Path) -> None:
    config = _config(
        tls_etcd.endpoint,
        ca=str(certs / "other-ca.pem"),
        cert=str(certs / "client.pem"),
        key=str(certs / "client.key"),
    )
    with pytest.raises(StoreUnavailable, match="TLS handshake failed") as info:
        EtcdStore(config)
    assert "that this CA file signed the server's certificate" in str(info.value)


def test_a_missing_client_certificate_is_refused(tls_etcd, certs: Path) -> None:
    with pytest.raises(StoreUnavailable, match=f"etcd at {tls_etcd.endpoint} is unavailable"):
        EtcdStore(_config(tls_etcd.endpoint, ca=str(certs / "ca.pem")))


def test_an_unreadable_ca_file_is_a_config_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match="cannot read") as info:
        EtcdStore(_config("127.0.0.1:1", ca=str(missing)))
    assert info.value.field == "etcd.ca"


def test_right_credentials_work_and_tokens_are_renewed(auth_etcd, connect_when_ready) -> None:
    store = connect_when_ready(
        _config(auth_etcd.endpoint, user="root", password=auth_etcd.password)
    )
    key = store.keys.capture("c")
    store.put(key, {"n": 1})
    time.sleep(2.5)  # the 1 s auth token has expired by now
    store.put(key, {"n": 2})
    assert store.get(key).json()["n"] == 2
    seen: list[int] = []
    handle = store.watch_key(key, lambda e: seen.append(e.kv.json()["n"]))
    store.put(key, {"n": 3})
    deadline = time.monotonic() + 5
    while seen != [3] and time.monotonic() < deadline:
        time.sleep(0.05)
    handle.cancel()
    assert seen == [3]


def test_a_wrong_password_is_refused_clearly(auth_etcd) -> None:
    wrong = secrets.token_hex(8)
    with pytest.raises(StoreUnavailable) as info:
        EtcdStore(_config(auth_etcd.endpoint, user="root", password=wrong))
    message = str(info.value)
    assert "authentication failed for user 'root'" in message
    assert "check the etcd user and password" in message
    assert wrong not in message


def test_missing_credentials_are_refused_clearly(auth_etcd) -> None:
    with pytest.raises(StoreUnavailable, match="set the etcd user and password"):
        EtcdStore(_config(auth_etcd.endpoint))


def test_credentials_for_a_server_without_auth(etcd_server) -> None:
    with pytest.raises(StoreUnavailable, match="authentication disabled"):
        EtcdStore(_config(etcd_server.endpoint, user="root", password=secrets.token_hex(4)))


def test_a_watch_attached_with_an_expired_token_still_delivers(
    auth_etcd, connect_when_ready
) -> None:
    store = connect_when_ready(
        _config(auth_etcd.endpoint, user="root", password=auth_etcd.password)
    )
    key = store.keys.barrier("cf")
    revision = store.put(key, {"n": 1})
    time.sleep(2.5)  # the token expires; the next thing the store does is attach a watch
    seen: list[int] = []
    handle = store.watch_key(key, lambda e: seen.append(e.kv.json()["n"]), start_revision=revision)
    store.put(key, {"n": 2})
    deadline = time.monotonic() + 5
    while seen != [1, 2] and time.monotonic() < deadline:
        time.sleep(0.05)
    handle.cancel()
    assert seen == [1, 2]
