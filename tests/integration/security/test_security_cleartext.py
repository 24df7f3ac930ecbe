"""A server that asks for the password in clear text gets nothing (issue #18).

The server here is a rogue one written for the test: it greets like MariaDB,
takes the client's handshake, switches it to ``mysql_clear_password`` (or
PAM's ``dialog``) and records every byte the client sends afterwards. Over a
connection without verified TLS the client must fail with a clear error and
the password must never reach the server; the same client against the real
source (``mysql_native_password``) still connects.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from security_helpers import cdc_server

from cdc.cli.main import main as cdcctl
from cdc.errors import ConfigError
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.source.connect import connect
from cdc.uri.mysql import parse_source_uri

PASSWORD = "s3cret-never-sent"
_SALT = b"abcdefghijklmnopqrst"
# LONG_PASSWORD, LONG_FLAG, CONNECT_WITH_DB, PROTOCOL_41, TRANSACTIONS,
# SECURE_CONNECTION, MULTI_RESULTS, PLUGIN_AUTH: no SSL, so no TLS is possible.
_CAPABILITIES = 1 | 4 | 8 | 512 | 8192 | 32768 | (1 << 17) | (1 << 19)


def _packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([seq]) + payload


def _greeting() -> bytes:
    return (
        b"\x0a"
        + b"5.5.5-10.11.0-MariaDB-rogue\0"
        + (7).to_bytes(4, "little")
        + _SALT[:8]
        + b"\0"
        + (_CAPABILITIES & 0xFFFF).to_bytes(2, "little")
        + bytes([33])
        + (2).to_bytes(2, "little")
        + (_CAPABILITIES >> 16).to_bytes(2, "little")
        + bytes([21])
        + b"\0" * 10
        + _SALT[8:]
        + b"\0"
        + b"mysql_native_password\0"
    )


class RogueServer:
    """Accepts one client, switches it to ``plugin`` and keeps what it sends after that."""

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.switched = threading.Event()
        self.after_switch = b""
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(10)
        with conn:
            conn.sendall(_packet(0, _greeting()))
            conn.recv(65536)  # the handshake response: user and a scramble
            extra = _SALT + b"\0" if self.plugin == "mysql_clear_password" else b"\x04Password: "
            conn.sendall(_packet(2, b"\xfe" + self.plugin.encode() + b"\0" + extra))
            self.switched.set()
            try:
                while chunk := conn.recv(65536):
                    self.after_switch += chunk
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=10)


@pytest.fixture(params=["mysql_clear_password", "dialog"])
def rogue(request: pytest.FixtureRequest) -> Iterator[RogueServer]:
    server = RogueServer(request.param)
    yield server
    server.close()


def test_a_clear_text_switch_over_plain_tcp_gets_no_password(rogue: RogueServer) -> None:
    uri = parse_source_uri(f"mysql://repl:{PASSWORD}@127.0.0.1:{rogue.port}/")
    with pytest.raises(ConfigError) as refused:
        connect(uri)
    rogue.close()
    assert rogue.switched.is_set()
    assert PASSWORD.encode() not in rogue.after_switch
    message = str(refused.value)
    assert message.startswith("ssl-ca: ")
    asked = f"127.0.0.1:{rogue.port} asked for the password in clear text ({rogue.plugin})"
    assert asked in message
    assert "nothing was sent" in message and "ssl-ca=/path/to/ca.pem" in message
    assert PASSWORD not in message


def test_create_against_a_rogue_source_is_refused_without_the_secret(
    etcd_server: EtcdServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The threat itself: the author names a password file of the capture and a server of
    their own. The create is refused (exit 2) and the file's line never leaves the host."""
    rogue = RogueServer("mysql_clear_password")
    secret = tmp_path / "source.password"
    secret.write_text(PASSWORD + "\n")
    source = f"mysql://repl@127.0.0.1:{rogue.port}/?password-file={secret}"
    try:
        args = [f"--secrets-dir={tmp_path}"]  # lends the file; the server is what refuses
        with cdc_server(etcd_server.endpoint, tmp_path / "server.log", args) as server:
            code = cdcctl(
                [
                    "changefeed", "create", "--server", server.address,
                    "--changefeed-id", "rogue", "--source-uri", source,
                    "--sink-uri", "blackhole://", "--filter-rule", "db.*",
                    "--snapshot-mode", "never",
                ]
            )  # fmt: skip
            _out, err = capsys.readouterr()
            listed = cdcctl(["changefeed", "list", "--server", server.address])
            out, _ = capsys.readouterr()
    finally:
        rogue.close()
    assert code == 2, err
    assert "asked for the password in clear text (mysql_clear_password)" in err
    assert PASSWORD.encode() not in rogue.after_switch and PASSWORD not in err
    assert listed == 0 and "rogue" not in out


def test_the_guard_leaves_ordinary_logins_alone(source_db: MariaDBServer) -> None:
    conn = connect(parse_source_uri(source_db.uri))
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    finally:
        conn.close()
