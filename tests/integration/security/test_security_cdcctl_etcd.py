"""`cdcctl capture list --etcd` against an etcd that wants TLS, a client certificate and a
password (issue #18): with cdc-server's own flags it reads the captures; without the CA,
the certificate or the user it cannot, and says so; the password never shows."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from secured_etcd import SecuredEtcd, secured_etcd
from security_helpers import Certs

from cdc.api.health import is_serving
from cdc.cli.main import main as cdcctl
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

PASSWORD = f"etcd-{secrets.token_hex(8)}"


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[SecuredEtcd]:
    with secured_etcd(tmp_path_factory.mktemp("secured-etcd"), certs, PASSWORD) as running:
        yield running


@pytest.fixture(scope="module")
def capture(etcd: SecuredEtcd, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cdc-server registered in that etcd, through its --etcd-* flags."""
    port = free_port()
    log = tmp_path_factory.mktemp("secured-capture") / "server.log"
    argv = [sys.executable, "-m", "capture.main", *etcd.flags(), f"--addr=127.0.0.1:{port}"]
    argv += ["--capture-id=secured-1", "--cluster-id=secured", "--lease-ttl=5"]
    with log.open("wb") as out:
        env = {**os.environ, "CDC_ETCD_PASSWORD": PASSWORD}
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 30
        while not is_serving(f"127.0.0.1:{port}", timeout=0.5):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"cdc-server did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield "secured-1"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("CDC_"):
            monkeypatch.delenv(name)
    return monkeypatch


def _list(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    code = cdcctl(["capture", "list", "--cluster-id=secured", *flags])
    out, err = capsys.readouterr()
    return code, out, err


def test_capture_list_reads_a_secured_etcd_with_the_flags(
    etcd: SecuredEtcd, capture: str, clean_env: pytest.MonkeyPatch, capsys
) -> None:
    clean_env.setenv("CDC_ETCD_PASSWORD", PASSWORD)
    code, out, err = _list(capsys, *etcd.flags())
    assert code == 0, err
    assert [row["id"] for row in json.loads(out)] == [capture]


def test_the_flags_also_come_from_the_environment(
    etcd: SecuredEtcd, capture: str, clean_env: pytest.MonkeyPatch, capsys
) -> None:
    certs = etcd.certs
    for name, value in (
        ("CDC_ETCD", etcd.endpoint),
        ("CDC_ETCD_CA", certs.pem("ca")),
        ("CDC_ETCD_CERT", certs.pem("client")),
        ("CDC_ETCD_KEY", certs.key("client")),
        ("CDC_ETCD_USER", "root"),
        ("MY_ETCD_PW", PASSWORD),
    ):
        clean_env.setenv(name, value)
    code, out, err = _list(capsys, "--etcd-password-env=MY_ETCD_PW")
    assert code == 0, err
    assert [row["id"] for row in json.loads(out)] == [capture]


def test_missing_pieces_are_clear_errors(
    etcd: SecuredEtcd, capture: str, clean_env: pytest.MonkeyPatch, capsys, tmp_path: Path
) -> None:
    flags = etcd.flags()
    without = {name: [f for f in flags if not f.startswith(name)] for name in ("--etcd-ca",)}
    code, _, err = _list(capsys, *flags)
    assert (
        code == 2 and "--etcd-password-env: --etcd-user is set but $CDC_ETCD_PASSWORD is not" in err
    )
    clean_env.setenv("CDC_ETCD_PASSWORD", PASSWORD)
    code, _, err = _list(capsys, *without["--etcd-ca"])
    assert code == 2 and "--etcd-ca: a client certificate needs TLS" in err
    no_tls = [f for f in flags if not f.startswith(("--etcd-ca", "--etcd-cert", "--etcd-key"))]
    code, _, err = _list(capsys, *no_tls)
    assert code == 3 and "is unavailable" in err, err
    no_cert = [f for f in flags if not f.startswith(("--etcd-cert", "--etcd-key"))]
    code, _, err = _list(capsys, *no_cert)
    assert code == 3 and "is unavailable" in err, err
    clean_env.setenv("CDC_ETCD_PASSWORD", "wrong-" + PASSWORD)
    code, _, err = _list(capsys, *flags)
    assert code == 3 and "authentication failed" in err, err
    assert PASSWORD not in err and "Traceback" not in err
