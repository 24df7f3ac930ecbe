"""A downstream restarted while the sink writes: the lanes retry, reconnect, replay the
transaction they lost, and the rows converge. A downstream that stays away makes the
sink give up after its retry timeout with a SinkError, and flushed stays put."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testkit import execute

from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.ports import free_port
from cdc.sink.base import SinkError
from cdc.sink.mysql import MySQLSink, MySQLSinkOptions
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

DDL = "CREATE TABLE {name} (id INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(20) NOT NULL)"


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[MariaDBServer]:
    """A private downstream this test may stop and start."""
    spec = MariaDBSpec(
        name="restart", base_dir=tmp_path / "db", port=free_port(), server_id=7, binlog=False
    )
    server = MariaDBServer(spec, die_with_parent=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def schema(table: TableName) -> TableSchema:
    columns = (
        Column("id", "int", "int(11)", nullable=False),
        Column("v", "int", "int(11)", nullable=False),
        Column("s", "varchar", "varchar(20)", nullable=False),
    )
    return TableSchema(table, columns, ("id",))


def changes_and_rows(table: TableName, count: int) -> tuple[list[RowChange], dict[int, tuple]]:
    rng = random.Random(5)
    rows: dict[int, dict[str, Any]] = {}
    changes = []
    for n in range(count):
        position = Position("binlog.000001", 100 + n)
        key = rng.randint(1, 3000)
        row = rows.get(key)
        after = {"id": key, "v": rng.randint(0, 10**6), "s": f"s{n}"}
        if row is None:
            changes.append(RowChange(table, Op.CREATE, None, after, (key,), position))
            rows[key] = after
        elif rng.random() < 0.7:
            changes.append(RowChange(table, Op.UPDATE, row, after, (key,), position))
            rows[key] = after
        else:
            changes.append(RowChange(table, Op.DELETE, row, None, (key,), position))
            del rows[key]
    return changes, {k: (r["id"], r["v"], r["s"]) for k, r in rows.items()}


def fetch_rows(server: MariaDBServer, table: TableName) -> list[tuple]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, v, s FROM {table.quoted()} ORDER BY id")
            return list(cur.fetchall())
    finally:
        conn.close()


def prepare(server: MariaDBServer) -> TableName:
    table = TableName("restart_db", "t")
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE restart_db")
            cur.execute(DDL.format(name=table.quoted()))
    finally:
        conn.close()
    return table


@pytest.mark.parametrize("load_rows", [0, 10], ids=["statements", "load-data"])
def test_a_downstream_restart_mid_stream_is_retried_and_converges(
    own_server: MariaDBServer, caplog: pytest.LogCaptureFixture, load_rows: int
) -> None:
    table = prepare(own_server)
    changes, rows = changes_and_rows(table, 30_000)
    uri = parse_sink_uri(
        own_server.uri + f"?worker-count=4&max-txn-row=100&load-data-rows={load_rows}"
    )
    options = MySQLSinkOptions(retry_timeout=60, backoff_initial=0.05, backoff_max=0.5)
    sink = MySQLSink(uri, lambda name: schema(name), "restart-test", options)
    halfway = threading.Event()
    outcome: dict[str, Any] = {}

    def write() -> None:
        # the sink is driven from this one thread; the main thread restarts the server
        # (a server started by a short-lived thread would die with it: die_with_parent)
        try:
            for start in range(0, len(changes), 200):
                sink.write_rows(changes[start : start + 200])
                if start == 10_000:
                    halfway.set()
                time.sleep(0.01)  # spread the stream over the restart
            outcome["flushed"] = sink.flush()
        except BaseException as exc:  # re-raised in the test thread
            outcome["error"] = exc
        finally:
            halfway.set()

    caplog.set_level(logging.WARNING, logger="cdc.sink.mysql")
    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert halfway.wait(120)
        own_server.stop()
        time.sleep(1.0)
        own_server.start()
        writer.join(120)
        assert not writer.is_alive()
    finally:
        sink.close()
    if "error" in outcome:
        raise outcome["error"]
    assert outcome["flushed"] == changes[-1].position
    retries = [r for r in caplog.records if "transient downstream error" in r.getMessage()]
    assert retries, "the restart never reached the sink: the test proved nothing"
    assert fetch_rows(own_server, table) == [rows[k] for k in sorted(rows)]
    loaded = execute(own_server, "SHOW GLOBAL STATUS LIKE 'Com_load'")  # since the restart
    assert (int(loaded[0][1]) > 0) is (load_rows > 0)


def test_a_downstream_that_stays_away_fails_the_sink_after_the_retry_timeout(
    own_server: MariaDBServer,
) -> None:
    table = prepare(own_server)
    changes, _ = changes_and_rows(table, 400)
    uri = parse_sink_uri(own_server.uri + "?worker-count=2")
    options = MySQLSinkOptions(retry_timeout=2, backoff_initial=0.05, backoff_max=0.2)
    sink = MySQLSink(uri, lambda name: schema(name), "away-test", options)
    try:
        sink.write_rows(changes[:200])
        first = sink.flush()
        own_server.stop()
        sink.write_rows(changes[200:])
        began = time.monotonic()
        with pytest.raises(SinkError) as failure:
            sink.flush()
        assert 1.5 < time.monotonic() - began < 30
        assert "gave up after" in failure.value.reason
        assert "retry timeout 2s" in failure.value.reason
        assert own_server.password not in str(failure.value)
        assert sink.flushed == first
        with pytest.raises(SinkError) as again:
            sink.write_rows(changes[:1])
        assert again.value is failure.value
    finally:
        sink.close()
