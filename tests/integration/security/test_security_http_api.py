"""The HTTP API of `cdc-server --http-addr` behind the tokens and the admin API's TLS (#19).

Each route does one gRPC method and needs the role ``capture.access`` gives it:
without a token every API route is 401, the read-only token reads and gets 403
on pause, resume and remove (nothing changes), the admin token acts, and what
it does is what `cdcctl changefeed query` then reports. The console's page is
open (it holds no data); /metrics needs a token as on --metrics-addr. Over
--tls-cert it is HTTPS with the admin API's certificate, and with --tls-ca it
wants a client certificate.
"""

from __future__ import annotations

import json
import secrets
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from security_helpers import Certs, RunningServer, cdc_server
from testkit import execute

from cdc.api.channel import ClientSecurity
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

ADMIN = f"admin-{secrets.token_hex(12)}"
READ = f"read-{secrets.token_hex(12)}"
PW_ENV = "CDC_HTTP_SOURCE_PW"
READS = ("/api/v1/changefeeds", "/api/v1/changefeeds/web", "/api/v1/changefeeds/web/lag",
         "/api/v1/captures", "/api/v1/capture")  # fmt: skip
ACTIONS = (("POST", "/api/v1/changefeeds/web/pause"), ("POST", "/api/v1/changefeeds/web/resume"),
           ("DELETE", "/api/v1/changefeeds/web"))  # fmt: skip


def _call(
    url: str,
    method: str = "GET",
    token: str | None = None,
    *,
    json_type: bool = True,
    context: ssl.SSLContext | None = None,
) -> tuple[int, str]:
    request = urllib.request.Request(url, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if method != "GET" and json_type:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


@pytest.fixture
def server(
    etcd_server: EtcdServer, source_db: MariaDBServer, tmp_path: Path
) -> Iterator[tuple[RunningServer, str, Path]]:
    (tmp_path / "admin").write_text(ADMIN + "\n")
    (tmp_path / "read").write_text(READ + "\n")
    port = free_port()
    args = [
        f"--auth-token-file={tmp_path / 'admin'}",
        f"--read-token-file={tmp_path / 'read'}",
        f"--http-addr=127.0.0.1:{port}",
    ]
    env = {PW_ENV: source_db.password}
    with cdc_server(etcd_server.endpoint, tmp_path / "server.log", args, env=env) as running:
        yield running, f"http://127.0.0.1:{port}", tmp_path / "admin"


def _state(capsys: pytest.CaptureFixture[str], address: str, token_file: Path) -> str:
    argv = ["changefeed", "query", "-c", "web", "--simple", "--server", address]
    code = cdcctl([*argv, "--token-file", str(token_file)])
    out, err = capsys.readouterr()
    assert code == 0, err
    return str(json.loads(out)["state"])


def test_reads_need_a_token_actions_the_admin_one(
    server: tuple[RunningServer, str, Path],
    source_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    running, base, admin_file = server
    execute(source_db, f"CREATE TABLE `{source_database}`.t (id INT PRIMARY KEY)")
    source = f"mysql://{source_db.user}@127.0.0.1:{source_db.port}/?password-env={PW_ENV}"
    code = cdcctl([
        "changefeed", "create", "--changefeed-id", "web", "--source-uri", source,
        "--sink-uri", "blackhole://", "--filter-rule", f"{source_database}.*",
        "--snapshot-mode", "never", "--server", running.address, "--token-file", str(admin_file),
    ])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()

    for path in READS:
        status, body = _call(base + path)
        assert status == 401 and json.loads(body)["error"] == "UNAUTHENTICATED", path
        status, body = _call(base + path, token=READ)
        assert status == 200, (path, body)
    listed = json.loads(_call(base + READS[0], token=READ)[1])
    assert [(c["id"], c["state"]) for c in listed] == [("web", "normal")]
    detail = json.loads(_call(base + READS[1], token=READ)[1])
    assert detail["config"]["source-uri"] == source  # a reference, not a secret
    assert source_db.password not in json.dumps(detail)

    for method, path in ACTIONS:
        assert _call(base + path, method)[0] == 401, path
        status, body = _call(base + path, method, READ)
        assert status == 403 and json.loads(body)["error"] == "PERMISSION_DENIED", path
    assert _state(capsys, running.address, admin_file) == "normal"

    status, body = _call(base + ACTIONS[0][1], "POST", ADMIN, json_type=False)
    assert status == 415 and "Content-Type: application/json" in body
    assert _state(capsys, running.address, admin_file) == "normal"

    status, body = _call(base + ACTIONS[0][1], "POST", ADMIN)
    assert (status, json.loads(body)) == (200, {"id": "web", "state": "stopped"})
    assert _state(capsys, running.address, admin_file) == "stopped"
    status, body = _call(base + ACTIONS[1][1], "POST", ADMIN)
    assert (status, json.loads(body)["state"]) == (200, "normal")
    status, body = _call(base + "/api/v1/changefeeds/nothing/pause", "POST", ADMIN)
    assert status == 404 and json.loads(body)["error"] == "NOT_FOUND"
    status, body = _call(base + ACTIONS[2][1], "DELETE", ADMIN)
    assert (status, json.loads(body)) == (200, {"id": "web", "removed": True})
    assert json.loads(_call(base + READS[0], token=READ)[1]) == []

    page = _call(base + "/")
    assert page[0] == 200 and "<title>cdc console</title>" in page[1]
    assert _call(base + "/metrics")[0] == 401
    metrics = _call(base + "/metrics", token=READ)
    assert metrics[0] == 200 and "cdc_capture_is_owner" in metrics[1]

    log = running.log.read_text()
    assert "refused a call to /cdc.v1.ChangefeedService/PauseChangefeed: the read-only" in log
    assert f"console and HTTP API on {base}/" in log
    assert ADMIN not in log and READ not in log


def test_https_with_the_admin_apis_certificate_and_client_certificates(
    etcd_server: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    port = free_port()
    args = [
        f"--tls-cert={certs.pem('server')}",
        f"--tls-key={certs.key('server')}",
        f"--tls-ca={certs.pem('ca')}",
        f"--http-addr=127.0.0.1:{port}",
    ]
    security = ClientSecurity(certs.pem("ca"), certs.pem("client"), certs.key("client"))
    with cdc_server(etcd_server.endpoint, tmp_path / "s.log", args, security=security) as server:
        base = f"https://127.0.0.1:{port}"
        with_cert = ssl.create_default_context(cafile=certs.pem("ca"))
        with_cert.load_cert_chain(certs.pem("client"), certs.key("client"))
        status, body = _call(base + "/api/v1/captures", context=with_cert)
        assert status == 200 and json.loads(body)[0]["id"] == "sec-1"
        without = ssl.create_default_context(cafile=certs.pem("ca"))
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            _call(base + "/api/v1/captures", context=without)
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _call(f"http://127.0.0.1:{port}/api/v1/captures")
        assert _call(base + "/", context=with_cert)[0] == 200
        assert f"console and HTTP API on {base}/" in server.log.read_text()
