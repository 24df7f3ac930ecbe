"""Source and sink URIs with ssl-ca / ssl-cert / ssl-key against a MariaDB that serves TLS.

PyMySQL encrypts on its own when the server offers TLS, but verifies nothing;
``ssl-ca`` makes it verify the server (a certificate of another CA is refused).
The account ``x509_only`` requires a client certificate (REQUIRE X509), so
every connection it opens, the binlog reader's included, carries the URI's
``ssl-cert`` and ``ssl-key``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from security_helpers import Certs

from capture.changefeed_checks import check_changefeed
from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.config import ChangefeedConfig
from cdc.filter.table_filter import TableFilter
from cdc.model.events import Op, RowChange
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.ports import free_port
from cdc.source.connect import connect
from cdc.source.flavor import SourceError, current_position, detect
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

USERS = {"tls_only": "REQUIRE SSL", "x509_only": "REQUIRE X509"}


@pytest.fixture(scope="module")
def tls_db(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MariaDBServer]:
    """A private binlog-enabled MariaDB serving TLS with the test CA's server certificate."""
    spec = MariaDBSpec(
        name="tls",
        base_dir=tmp_path_factory.mktemp("mariadb-tls"),
        port=free_port(),
        server_id=7,
        binlog=True,
        extra_options=(
            f"--ssl-ca={certs.pem('ca')}",
            f"--ssl-cert={certs.pem('server')}",
            f"--ssl-key={certs.key('server')}",
        ),
    )
    server = MariaDBServer(spec, die_with_parent=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def passwords(tls_db: MariaDBServer) -> dict[str, str]:
    passwords = {user: secrets.token_urlsafe(12) for user in USERS}
    conn = tls_db.connect()
    with conn.cursor() as cur:
        for user, requirement in USERS.items():
            cur.execute(
                f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s {requirement}", (passwords[user],)
            )
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'")
        cur.execute("CREATE DATABASE shop")
        cur.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20))")
    conn.close()
    return passwords


def _uri(db: MariaDBServer, user: str, password: str, **params: str) -> str:
    query = "&".join(f"{k.replace('_', '-')}={v}" for k, v in params.items())
    return f"mysql://{user}:{quote(password, safe='')}@127.0.0.1:{db.port}/?{query}"


def _cipher(uri: str) -> str:
    conn = connect(parse_source_uri(uri))
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
            return cur.fetchone()[1]
    finally:
        conn.close()


def test_ssl_ca_gives_a_verified_tls_connection(
    tls_db: MariaDBServer, passwords: dict[str, str], certs: Certs
) -> None:
    user, password = "tls_only", passwords["tls_only"]
    assert _cipher(_uri(tls_db, user, password, ssl_ca=certs.pem("ca")))
    with pytest.raises(SourceError, match="certificate verify failed"):
        _cipher(_uri(tls_db, user, password, ssl_ca=certs.pem("other-ca")))


def test_ssl_cert_and_key_give_a_client_certificate(
    tls_db: MariaDBServer, passwords: dict[str, str], certs: Certs
) -> None:
    user, password = "x509_only", passwords["x509_only"]
    client = {"ssl_cert": certs.pem("client"), "ssl_key": certs.key("client")}
    assert _cipher(_uri(tls_db, user, password, ssl_ca=certs.pem("ca"), **client))
    with pytest.raises(SourceError, match="Access denied"):
        _cipher(_uri(tls_db, user, password, ssl_ca=certs.pem("ca")))


def test_changefeed_checks_connect_to_source_and_sink_over_tls(
    tls_db: MariaDBServer, passwords: dict[str, str], certs: Certs
) -> None:
    ca = certs.pem("ca")
    source = _uri(tls_db, "tls_only", passwords["tls_only"], ssl_ca=ca)
    sink = _uri(
        tls_db,
        "x509_only",
        passwords["x509_only"],
        ssl_ca=ca,
        ssl_cert=certs.pem("client"),
        ssl_key=certs.key("client"),
    )
    config = ChangefeedConfig("tls", source, sink, rules=("shop.*",), store_credentials=True)
    check_changefeed(config)


def test_the_binlog_reader_presents_the_client_certificate(
    tls_db: MariaDBServer, passwords: dict[str, str], certs: Certs
) -> None:
    client = {"ssl_cert": certs.pem("client"), "ssl_key": certs.key("client")}
    uri = _uri(tls_db, "x509_only", passwords["x509_only"], ssl_ca=certs.pem("ca"), **client)
    source = parse_source_uri(uri)
    conn = connect(source)
    info = detect(conn)
    start = current_position(conn, info)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO shop.items VALUES (1, 'over tls')")
    end = current_position(conn, info)
    conn.close()
    puller = Puller(
        PullerConfig(
            source=source,
            server=info,
            start=start,
            tables=TableFilter.parse(["shop.items"]),
            heartbeat_interval=0.5,
            max_retries=0,
        )
    )
    changes: list[RowChange] = []
    deadline = time.monotonic() + 30
    try:
        for event in puller.events():
            if isinstance(event, RowChange):
                changes.append(event)
            if isinstance(event, Resolved) and event.position.key() >= end.key():
                break
            assert time.monotonic() < deadline, "the binlog reader saw nothing"
    finally:
        puller.close()
    assert [(c.op, dict(c.after or {})) for c in changes] == [
        (Op.CREATE, {"id": 1, "name": "over tls"})
    ]
