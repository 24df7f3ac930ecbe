"""A rogue MySQL server of the changefeed author's choosing gets nothing (issue #18).

* A snapshot chunk loaded into it (``LOAD DATA LOCAL INFILE``) is answered with
  a request for a file of the capture: the client sends nothing of it, and the
  chunk fails with an error naming the file asked for.
* MySQL 8's ``caching_sha2_password`` and ``sha256_password`` give the server
  the password in their full authentication (in clear over any TLS, or
  encrypted with a key the server hands over): without verified TLS the client
  answers the fast path's challenge only and refuses the rest before sending.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rogue_mysql import OK, RECV, RogueServer, auth_switch

from cdc.errors import ConfigError
from cdc.model.schema import Column, TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.chunkload import ChunkLoader
from cdc.sink.registry import parse_sink_uri
from cdc.source.connect import connect
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

PASSWORD = "s3cret-never-sent"
SECRET_LINE = "the-capture's-own-secret"


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "capture-secret"
    path.write_text(SECRET_LINE + "\n")
    return path


@pytest.fixture
def rogue_sink(secret: Path) -> Iterator[RogueServer]:
    server = RogueServer("mysql_native_password", ask_for=str(secret))
    yield server
    server.close()


def test_a_snapshot_chunk_sends_no_file_the_server_asks_for(
    rogue_sink: RogueServer, secret: Path
) -> None:
    schema = TableSchema(
        TableName("db", "t"),
        (
            Column("id", "int", "int(11)", nullable=False),
            Column("s", "varchar", "varchar(40)", charset="utf8mb4"),
        ),
        ("id",),
    )
    uri = parse_sink_uri(f"mysql://cdc:{PASSWORD}@127.0.0.1:{rogue_sink.port}/")
    loader = ChunkLoader(uri, "rogue")
    where = "snapshot chunk db.t:0 (high watermark binlog.000001:4)"
    try:
        with pytest.raises(SinkError) as failure:
            loader.load(schema, [{"id": 1, "s": "offered-row-value"}], where=where)
    finally:
        loader.close()
    rogue_sink.close()
    reason = failure.value.reason
    assert reason.startswith(where)
    assert f"the downstream asked for the local file '{secret}'" in reason
    assert "nothing was sent" in reason
    assert rogue_sink.file_requests == 1
    assert rogue_sink.file_data == b""  # only the empty packet that ends a file
    assert SECRET_LINE.encode() not in rogue_sink.after_handshake
    assert b"offered-row-value" not in rogue_sink.after_handshake  # nor the offered rows


@pytest.mark.parametrize(
    ("plugin", "script"),
    [
        ("caching_sha2_password", [b"\x01\x04"]),  # fast path missed: "send it in full"
        ("mysql_native_password", [auth_switch("caching_sha2_password"), RECV, b"\x01\x04"]),
        ("mysql_native_password", [auth_switch("sha256_password")]),
        ("sha256_password", [b"\x01-----BEGIN PUBLIC KEY-----\n"]),  # the server's own key
    ],
)
def test_full_authentication_without_verified_tls_gets_no_password(
    plugin: str, script: list[bytes]
) -> None:
    rogue = RogueServer(plugin, script)
    try:
        with pytest.raises(ConfigError) as refused:
            connect(parse_source_uri(f"mysql://repl:{PASSWORD}@127.0.0.1:{rogue.port}/"))
    finally:
        rogue.close()
    message = str(refused.value)
    assert message.startswith("ssl-ca: ")
    assert f"127.0.0.1:{rogue.port} asked for the password in full" in message
    assert "nothing was sent" in message and "ssl-ca=/path/to/ca.pem" in message
    assert PASSWORD.encode() not in rogue.after_handshake
    assert b"\x02" not in rogue.client_packets  # no request for the server's public key
    assert len(rogue.client_packets) == (1 if RECV in script else 0)  # a scramble at most


@pytest.mark.parametrize(
    ("plugin", "script"),
    [
        ("caching_sha2_password", [b"\x01\x03", OK]),  # the scramble matched
        ("mysql_native_password", [auth_switch("caching_sha2_password"), RECV, b"\x01\x03", OK]),
    ],
)
def test_the_challenge_of_caching_sha2_is_still_answered(plugin: str, script: list[bytes]) -> None:
    rogue = RogueServer(plugin, script)
    try:
        conn = connect(parse_source_uri(f"mysql://repl:{PASSWORD}@127.0.0.1:{rogue.port}/"))
        conn.close()
    finally:
        rogue.close()
    assert PASSWORD.encode() not in rogue.after_handshake
