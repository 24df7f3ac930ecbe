"""``/metrics`` behind the tokens and over the admin API's TLS (issue #18), on a real cdc-server.

With tokens set, a scrape without one (or with an unknown one) is 401, with
the read-only or the admin token 200; with ``--tls-cert``/``--tls-key`` the
endpoint is HTTPS with that certificate, and with ``--tls-ca`` it wants a
client certificate too. Refusals are logged without the token.
"""

from __future__ import annotations

import secrets
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from security_helpers import Certs, RunningServer, cdc_server

from capture.access import NO_TOKEN, TOKEN_REJECTED
from cdc.api.channel import ClientSecurity
from cdc.playground.etcd import EtcdServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

ADMIN = f"admin-{secrets.token_hex(12)}"
READ = f"read-{secrets.token_hex(12)}"


def _token_args(tmp_path: Path) -> list[str]:
    (tmp_path / "admin").write_text(ADMIN + "\n")
    (tmp_path / "read").write_text(READ + "\n")
    return [f"--auth-token-file={tmp_path / 'admin'}", f"--read-token-file={tmp_path / 'read'}"]


def _scrape(url: str, token: str | None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        return refused.code, refused.read().decode()


def _client_context(certs: Certs, *, client_cert: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.pem("ca"))
    if client_cert:
        context.load_cert_chain(certs.pem("client"), certs.key("client"))
    return context


@pytest.fixture
def plain_server(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[tuple[RunningServer, str]]:
    port = free_port()
    args = [*_token_args(tmp_path), f"--metrics-addr=127.0.0.1:{port}"]
    with cdc_server(etcd_server.endpoint, tmp_path / "server.log", args) as server:
        yield server, f"http://127.0.0.1:{port}/metrics"


def test_metrics_are_refused_without_a_token_when_one_is_set(
    plain_server: tuple[RunningServer, str],
) -> None:
    server, url = plain_server
    assert _scrape(url, None) == (401, NO_TOKEN + "\n")
    assert _scrape(url, "not-a-token") == (401, TOKEN_REJECTED + "\n")
    for token in (READ, ADMIN):
        status, text = _scrape(url, token)
        assert status == 200 and "cdc_capture_is_owner" in text
    log = server.log.read_text()
    assert f"refused a call to /metrics: {NO_TOKEN} (from 127.0.0.1)" in log
    assert "metrics on http://127.0.0.1:" in log
    assert ADMIN not in log and READ not in log and "not-a-token" not in log


def test_metrics_use_the_admin_apis_tls_and_client_certificates(
    etcd_server: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    port = free_port()
    tls = [f"--tls-cert={certs.pem('server')}", f"--tls-key={certs.key('server')}"]
    args = [*tls, f"--tls-ca={certs.pem('ca')}", *_token_args(tmp_path)]
    args.append(f"--metrics-addr=127.0.0.1:{port}")
    security = ClientSecurity(certs.pem("ca"), certs.pem("client"), certs.key("client"))
    with cdc_server(etcd_server.endpoint, tmp_path / "s.log", args, security=security) as server:
        url = f"https://127.0.0.1:{port}/metrics"
        with_cert = _client_context(certs, client_cert=True)
        assert _scrape(url, None, with_cert)[0] == 401
        status, text = _scrape(url, READ, with_cert)
        assert status == 200 and "cdc_capture_is_owner" in text
        with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
            _scrape(url, READ, _client_context(certs, client_cert=False))
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            _scrape(f"http://127.0.0.1:{port}/metrics", READ)
        # and still serving after those
        assert _scrape(url, ADMIN, with_cert)[0] == 200
        assert f"metrics on https://127.0.0.1:{port}/metrics" in server.log.read_text()


def test_metrics_over_tls_without_client_certificates(
    etcd_server: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    port = free_port()
    args = [f"--tls-cert={certs.pem('server')}", f"--tls-key={certs.key('server')}"]
    args.append(f"--metrics-addr=127.0.0.1:{port}")
    security = ClientSecurity(certs.pem("ca"))
    with cdc_server(etcd_server.endpoint, tmp_path / "s.log", args, security=security):
        status, text = _scrape(
            f"https://127.0.0.1:{port}/metrics", None, _client_context(certs, client_cert=False)
        )
        assert status == 200 and "cdc_capture_is_owner" in text
