"""No password given inline in a URI shows up where it should not, through a real cdc-server.

Distinctive accounts are made on the source and the downstream, and their
passwords (raw and percent-encoded) are searched for in every cdcctl output
and error, in the server's log (at DEBUG) and in every etcd value of the
cluster. Unless ``store-credentials = true`` (the documented opt-in), an
inline password is refused before anything is written; with it, the
password is stored in the changefeed's info key and nowhere else.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import grpc
import pytest
from security_helpers import RunningServer, cdc_server
from testkit import execute

from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli.main import main as cdcctl
from cdc.masking import MASK
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Account:
    user: str
    password: str
    port: int

    def uri(self, password: str | None = None) -> str:
        secret = quote(self.password if password is None else password, safe="")
        return f"mysql://{self.user}:{secret}@127.0.0.1:{self.port}/"


def _account(db: MariaDBServer, role: str) -> Iterator[Account]:
    user = f"pw_{role}_{secrets.token_hex(3)}"
    password = f"{role.title()}-{secrets.token_hex(6)}@p:w/d%?"
    quoted = password.replace("'", "''")
    execute(
        db,
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{quoted}'",
        f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'",
    )
    yield Account(user, password, db.port)
    execute(db, f"DROP USER IF EXISTS '{user}'@'%'")


@pytest.fixture
def source_account(source_db: MariaDBServer) -> Iterator[Account]:
    yield from _account(source_db, "source")


@pytest.fixture
def sink_account(sink_db: MariaDBServer) -> Iterator[Account]:
    yield from _account(sink_db, "sink")


@pytest.fixture
def server(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[RunningServer]:
    log = tmp_path / "server.log"
    with cdc_server(etcd_server.endpoint, log, ["--log-level=DEBUG"]) as running:
        yield running


@pytest.fixture
def tables(source_db: MariaDBServer, sink_db: MariaDBServer, source_database: str) -> Iterator[str]:
    """``<db>.items`` on the source, and the same database and table downstream."""
    ddl = f"CREATE TABLE `{source_database}`.items (id INT PRIMARY KEY, name VARCHAR(20))"
    execute(source_db, ddl)
    execute(sink_db, f"CREATE DATABASE `{source_database}`", ddl)
    yield source_database
    execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")


class Cli:
    """cdcctl in-process against ``server``; every output and error is kept."""

    def __init__(self, server: RunningServer, capsys: pytest.CaptureFixture[str]) -> None:
        self.server = server
        self.capsys = capsys
        self.seen: list[str] = []

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = cdcctl(list(argv))
        out, err = self.capsys.readouterr()
        self.seen += [out, err]
        return code, out, err

    def on_server(self, *argv: str) -> tuple[int, str, str]:
        return self(*argv, "--server", self.server.address)


def _flags(cid: str, source: str, sink: str, database: str) -> list[str]:
    return [
        "--changefeed-id", cid, "--source-uri", source, "--sink-uri", sink,
        "--filter-rule", f"{database}.*", "--snapshot-mode", "never",
    ]  # fmt: skip


def _wait_running(cli: Cli) -> None:
    """Until the table pipeline reads the binlog (the changefeed's start is fixed by then)."""
    deadline = time.monotonic() + 30
    while True:
        code, out, err = cli.on_server("changefeed", "query", "-c", "pw")
        assert code == 0, err
        tables = json.loads(out)["tables"]
        if tables and all(t["state"] == "running" for t in tables):
            return
        assert time.monotonic() < deadline, f"the table pipeline did not start: {tables}"
        time.sleep(0.2)


def _etcd_values(server: RunningServer) -> dict[str, str]:
    store = server.store
    return {item.key: item.value.decode() for item in store.get_prefix(store.keys.prefix_of())}


def _forms(*accounts: Account) -> list[str]:
    return [form for a in accounts for form in (a.password, quote(a.password, safe=""))]


def test_inline_passwords_are_refused_unless_stored_and_never_shown(
    tables: str,
    source_account: Account,
    sink_account: Account,
    server: RunningServer,
    sink_db: MariaDBServer,
    source_db: MariaDBServer,
    capsys,
    tmp_path: Path,
) -> None:
    cli = Cli(server, capsys)
    secrets_ = _forms(source_account, sink_account)
    inline = _flags("pw", source_account.uri(), sink_account.uri(), tables)

    # Not asked to store: refused before anything is written, by cdcctl and by the server.
    code, out, err = cli("config", "check", *inline)
    assert code == 0 and "******" in out
    code, _, err = cli.on_server("changefeed", "create", *inline)
    assert code == 2 and "inline password" in err and "store-credentials" in err
    tree = {"v": 1, "changefeed-id": "pw", "source-uri": source_account.uri()}
    tree |= {"sink-uri": sink_account.uri(), "filter": {"rules": [f"{tables}.*"]}}
    with grpc.insecure_channel(server.address) as channel:
        api = admin_pb2_grpc.ChangefeedServiceStub(channel)
        request = admin_pb2.CreateChangefeedRequest(
            config=admin_pb2.ChangefeedConfigJson(json=json.dumps(tree))
        )
        with pytest.raises(grpc.RpcError) as info:
            api.CreateChangefeed(request, timeout=30)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    cli.seen.append(info.value.details())
    assert cli.on_server("changefeed", "list")[1].strip() == "[]"
    code, _, err = cli.on_server("changefeed", "query", "-c", "pw")
    assert code == 2 and "NOT_FOUND" in err
    assert not any(s in v for v in _etcd_values(server).values() for s in secrets_)

    # Asked to store: the servers connect with the stored passwords.
    stored = tmp_path / "stored.toml"
    stored.write_text("store-credentials = true\n")
    wrong = _flags(
        "pw-wrong", source_account.uri(), sink_account.uri("Wrong-" + secrets.token_hex(4)), tables
    )
    code, _, err = cli.on_server("changefeed", "create", "--config", str(stored), *wrong)
    assert code == 2 and "FAILED_PRECONDITION" in err and "Access denied" in err
    code, out, err = cli.on_server("changefeed", "create", "--config", str(stored), *inline)
    assert code == 0, err
    _wait_running(cli)
    execute(source_db, f"INSERT INTO `{tables}`.items VALUES (1, 'secretless')")
    deadline = time.monotonic() + 30
    while True:
        conn = sink_db.connect()
        with conn.cursor() as cur:
            cur.execute(f"SELECT name FROM `{tables}`.items")
            rows = cur.fetchall()
        conn.close()
        if rows:
            break
        assert time.monotonic() < deadline, "the stored passwords did not carry the row over"
        time.sleep(0.2)
    assert rows == (("secretless",),)
    for argv in (
        ("changefeed", "query", "-c", "pw"),
        ("changefeed", "query", "-c", "pw", "--simple"),
        ("-o", "table", "changefeed", "query", "-c", "pw"),
        ("changefeed", "query", "-c", "pw", "--watch", "--count", "1", "--interval", "0.1"),
        ("changefeed", "list"),
        ("-o", "table", "changefeed", "list"),
        ("capture", "list"),
        ("changefeed", "pause", "-c", "pw"),
        ("changefeed", "update", "--config", str(stored), *inline),
        ("changefeed", "resume", "-c", "pw"),
    ):
        code, _, err = cli.on_server(*argv)
        assert code == 0, (argv, err)
    assert any(MASK in text for text in cli.seen)

    values = _etcd_values(server)
    holding = {key for key, text in values.items() if any(s in text for s in secrets_)}
    info_key = str(server.store.keys.changefeed_info("pw"))
    assert holding == {info_key}, sorted(holding)
    for text in cli.seen:
        for secret in secrets_:
            assert secret not in text
    log = server.log.read_text()
    assert "changefeed pw created" in log
    for secret in secrets_:
        assert secret not in log
