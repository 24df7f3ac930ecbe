"""Servers that become unreachable while a changefeed runs (issue #9): nothing is lost.

The source and the downstream are taken away by a TCP forwarder between them
and the cdc-server (the servers themselves keep running, so the test can write
to the source meanwhile); etcd is a private one that is stopped and started.
docs/bad-input.md lists the cases (unreachable at create time:
test_badinput_create.py).
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from badinput_helpers import (
    SINK_PW_ENV,
    SOURCE_PW_ENV,
    Cli,
    cdc_server,
    wait_running,
    wait_synced,
)
from testkit import Outage, execute

from cdc.playground.etcd import EtcdServer, EtcdSpec
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never")


@pytest.fixture
def two_tables(source_db: MariaDBServer, sink_db: MariaDBServer, db: str) -> str:
    """Empty ``a`` and ``b`` on the source and the downstream; the filter rule."""
    for server in (source_db, sink_db):
        execute(
            server,
            f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)",
            f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v INT)",
        )
    return f"{db}.*"


def write(source: MariaDBServer, db: str, first: int, last: int) -> None:
    rows = ", ".join(f"({i}, {i})" for i in range(first, last + 1))
    execute(source, f"INSERT INTO `{db}`.a VALUES {rows}", f"INSERT INTO `{db}`.b VALUES {rows}")


def test_source_and_sink_unreachable_while_running(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    source, sink = Outage(source_db.port), Outage(sink_db.port)
    source_via = source_uri.replace(f":{source_db.port}/", f":{source.port}/")
    sink_via = sink_uri.replace(f":{sink_db.port}/", f":{sink.port}/")
    try:
        created = cli.create("away", source_via, sink_via, "--filter-rule", two_tables, *NEVER)
        assert created.code == 0, created.err
        wait_running(cli, "away", 2)
        write(source_db, db, 1, 10)
        wait_synced(source_db, sink_db, db, "a", "b")

        sink.cut()
        write(source_db, db, 11, 20)
        source.cut()
        write(source_db, db, 21, 30)
        time.sleep(3)
        # Short outages are retried inside the pipelines (binlog reconnects, the sink
        # replays its transaction): the changefeed stays normal, its checkpoint waits.
        data = cli.query("away")
        assert data["state"] == "normal", data["error"]
        assert execute(sink_db, f"SELECT MAX(id) FROM `{db}`.a")[0][0] < 30
        source.restore()
        sink.restore()
        wait_synced(source_db, sink_db, db, "a", "b")
        assert cli.query("away")["state"] == "normal"
    finally:
        cli("changefeed", "remove", "-c", "away")
        source.cut()
        sink.cut()


def test_etcd_unreachable_while_running(
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spec = EtcdSpec("private", tmp_path / "etcd", free_port(), free_port())
    etcd = EtcdServer(spec, die_with_parent=True)
    etcd.start()
    env = {SOURCE_PW_ENV: source_db.password, SINK_PW_ENV: sink_db.password}
    cluster = f"etcd-down-{uuid.uuid4().hex[:6]}"
    try:
        with cdc_server(etcd.endpoint, env, tmp_path / "server.log", cluster) as server:
            monkeypatch.setenv("CDC_SERVER", server.address)
            cli = Cli(capsys)
            created = cli.create("etcd", source_uri, sink_uri, "--filter-rule", two_tables, *NEVER)
            assert created.code == 0, created.err
            wait_running(cli, "etcd", 2)
            write(source_db, db, 1, 10)
            wait_synced(source_db, sink_db, db, "a", "b")

            etcd.stop()
            result = cli("changefeed", "query", "-c", "etcd")
            assert result.code == 3 and "Traceback" not in result.err
            assert result.err.startswith("cdcctl: error: UNAVAILABLE: etcd"), result.err
            write(source_db, db, 11, 20)
            time.sleep(3)
            etcd.start()

            wait_synced(source_db, sink_db, db, "a", "b")
            assert cli.query("etcd")["state"] == "normal"
            cli.remove_created()
    finally:
        etcd.stop()
