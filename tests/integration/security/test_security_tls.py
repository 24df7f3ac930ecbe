"""The admin API over TLS and mutual TLS, against real cdc-server processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from security_helpers import Certs, RunningServer, cdc_server

from capture.main import main as server_main
from cdc.api.channel import ClientSecurity
from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.api.health import is_serving
from cdc.api.health import main as health_main
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_server(
    etcd_server: EtcdServer, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    args = [f"--tls-cert={certs.pem('server')}", f"--tls-key={certs.key('server')}"]
    log = tmp_path_factory.mktemp("tls") / "server.log"
    security = ClientSecurity(ca=certs.pem("ca"))
    with cdc_server(etcd_server.endpoint, log, args, security=security) as server:
        yield server


@pytest.fixture(scope="module")
def mtls_server(
    etcd_server: EtcdServer, certs: Certs, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    args = [
        f"--tls-cert={certs.pem('server')}",
        f"--tls-key={certs.key('server')}",
        f"--tls-ca={certs.pem('ca')}",
    ]
    log = tmp_path_factory.mktemp("mtls") / "server.log"
    security = ClientSecurity(certs.pem("ca"), certs.pem("client"), certs.key("client"))
    with cdc_server(etcd_server.endpoint, log, args, security=security) as server:
        yield server


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cdcctl_with_the_ca_talks_tls(
    tls_server: RunningServer, certs: Certs, capsys, monkeypatch
) -> None:
    server = ["--server", tls_server.address]
    code, out, err = _cli(capsys, "capture", "list", *server, "--tls-ca", certs.pem("ca"))
    assert code == 0, err
    assert [c["id"] for c in json.loads(out)] == ["sec-1"]
    monkeypatch.setenv("CDC_TLS_CA", certs.pem("ca"))
    code, out, err = _cli(capsys, "changefeed", "list", *server)
    assert (code, json.loads(out)) == (0, []), err
    assert "TLS" in tls_server.log.read_text()


def test_plain_text_client_is_refused_with_a_hint(
    tls_server: RunningServer, certs: Certs, capsys
) -> None:
    code, _, err = _cli(capsys, "changefeed", "list", "--server", tls_server.address)
    assert code == 3
    assert f"cannot reach the cdc-server at {tls_server.address} (UNAVAILABLE" in err
    assert "if the server uses TLS, pass --tls-ca FILE" in err

    with grpc.insecure_channel(tls_server.address) as channel:
        api = admin_pb2_grpc.ChangefeedServiceStub(channel)
        with pytest.raises(grpc.RpcError) as info:
            api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), timeout=5)
    assert info.value.code() is grpc.StatusCode.UNAVAILABLE


def test_a_server_signed_by_another_ca_is_refused(
    tls_server: RunningServer, certs: Certs, capsys
) -> None:
    args = ("capture", "list", "--server", tls_server.address, "--tls-ca", certs.pem("other-ca"))
    code, _, err = _cli(capsys, *args)
    assert code == 3
    assert "check --tls-ca" in err


def test_health_over_tls(tls_server: RunningServer, certs: Certs, capsys) -> None:
    assert is_serving(tls_server.address, security=ClientSecurity(ca=certs.pem("ca")))
    assert not is_serving(tls_server.address, timeout=1.0)
    assert health_main([tls_server.address, "--tls-ca", certs.pem("ca")]) == 0
    assert health_main([tls_server.address, "--timeout", "1"]) == 1
    assert capsys.readouterr().out.split() == ["SERVING", "NOT", "SERVING"]


def test_the_certificate_name_can_differ_from_the_host_dialled(
    tls_server: RunningServer, certs: Certs, capsys
) -> None:
    ca = ("--tls-ca", certs.pem("ca"))
    assert health_main([tls_server.address, *ca, "--tls-server-name", "localhost"]) == 0
    assert health_main([tls_server.address, *ca, "--tls-server-name", "cdc.example.test"]) == 1
    server = ("capture", "list", "--server", tls_server.address, *ca)
    code, _, err = _cli(capsys, *server, "--tls-server-name", "localhost")
    assert code == 0, err
    code, _, err = _cli(capsys, *server, "--tls-server-name", "cdc.example.test")
    assert code == 3 and "check --tls-ca" in err


def test_mutual_tls_needs_a_client_certificate_of_the_ca(
    mtls_server: RunningServer, certs: Certs, capsys
) -> None:
    base = ("capture", "list", "--server", mtls_server.address, "--tls-ca", certs.pem("ca"))
    code, out, err = _cli(
        capsys, *base, "--tls-cert", certs.pem("client"), "--tls-key", certs.key("client")
    )
    assert code == 0, err
    assert [c["id"] for c in json.loads(out)] == ["sec-1"]

    code, _, err = _cli(capsys, *base)
    assert code == 3 and "cannot reach the cdc-server" in err and "--tls-cert" in err
    code, _, err = _cli(
        capsys,
        *base,
        "--tls-cert",
        certs.pem("other-client"),
        "--tls-key",
        certs.key("other-client"),
    )
    assert code == 3
    assert not is_serving(
        mtls_server.address, timeout=1.0, security=ClientSecurity(ca=certs.pem("ca"))
    )
    assert "mutual TLS" in mtls_server.log.read_text()


def test_client_tls_flags_are_checked(tls_server: RunningServer, certs: Certs, capsys) -> None:
    server = ("changefeed", "list", "--server", tls_server.address)
    code, _, err = _cli(
        capsys, *server, "--tls-ca", certs.pem("ca"), "--tls-cert", certs.pem("client")
    )
    assert code == 2 and "--tls-key" in err
    code, _, err = _cli(
        capsys, *server, "--tls-cert", certs.pem("client"), "--tls-key", certs.key("client")
    )
    assert code == 2 and "--tls-ca" in err
    code, _, err = _cli(capsys, *server, "--tls-ca", "/nonexistent/ca.pem")
    assert code == 2 and "--tls-ca: cannot read /nonexistent/ca.pem" in err


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (["--tls-cert={server}"], "--tls-key"),
        (["--tls-key={server_key}"], "--tls-cert"),
        (["--tls-ca={ca}"], "--tls-ca"),
        (["--tls-cert={client}", "--tls-key={server_key}"], "--tls-key"),
        (["--tls-cert={server}", "--tls-key={server_key}", "--tls-ca={missing}"], "--tls-ca"),
        (["--tls-cert={server}", "--tls-key={server_key}", "--tls-ca={server_key}"], "--tls-ca"),
    ],
)
def test_bad_server_tls_flags_exit_2(
    certs: Certs, tmp_path: Path, flags: list[str], field: str, capsys
) -> None:
    files = {
        "server": certs.pem("server"),
        "server_key": certs.key("server"),
        "client": certs.pem("client"),
        "ca": certs.pem("ca"),
        "missing": str(tmp_path / "missing.pem"),
    }
    args = [f.format(**files) for f in flags]
    assert server_main(["--etcd=127.0.0.1:2379", "--addr=127.0.0.1:8300", *args]) == 2
    assert f"cdc-server: error: {field}:" in capsys.readouterr().err
