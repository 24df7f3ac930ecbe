"""DDL through the MySQL sink: earlier rows first, the database created and selected, a
replayed DDL recognised and skipped, any other DDL error permanent."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator

import pytest

from cdc.model import Op, Position, RowChange, TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.ddl import parse_ddl
from cdc.schema.loader import load_table_schema
from cdc.sink.base import SinkError
from cdc.sink.mysql import MySQLSink
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


@pytest.fixture
def fresh_names(sink_db: MariaDBServer) -> Iterator[list[str]]:
    """Database names that do not exist yet downstream; dropped afterwards."""
    names = [f"ddl_{secrets.token_hex(4)}_{n}" for n in range(2)]
    yield names
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        conn.close()


def query(server: MariaDBServer, sql: str) -> list[tuple]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    finally:
        conn.close()


def test_ddl_runs_after_earlier_rows_in_its_database_and_replays_are_skipped(
    sink_db: MariaDBServer, fresh_names: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    db = fresh_names[0]
    table = TableName(db, "t")
    schemas: dict[TableName, object] = {}

    def lookup(name: TableName) -> object:
        return schemas[name]

    uri = parse_sink_uri(sink_db.uri + "?worker-count=4")
    sink = MySQLSink(uri, lookup, "ddl-test")  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="cdc.sink.mysql")
    try:
        create = parse_ddl("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", db, pos(100))
        sink.apply_ddl(create)  # the database does not exist yet: created, then USE
        assert sink.flushed == pos(100)
        conn = sink_db.connect()
        schemas[table] = load_table_schema(conn, table)
        conn.close()
        rows = [
            RowChange(table, Op.CREATE, None, {"id": i, "v": f"r{i}"}, (i,), pos(200 + i))
            for i in range(1, 301)
        ]
        sink.write_rows(rows)
        add = parse_ddl("ALTER TABLE t ADD COLUMN z INT NOT NULL DEFAULT 5", db, pos(600))
        sink.apply_ddl(add)  # first makes all 300 rows durable
        assert sink.flushed == pos(600)
        assert query(sink_db, f"SELECT COUNT(*), SUM(z) FROM `{db}`.t") == [(300, 1500)]

        caplog.clear()
        sink.apply_ddl(create)  # replays after a crash: effects already in place
        sink.apply_ddl(add)
        sink.apply_ddl(parse_ddl("DROP TABLE IF EXISTS gone", db, pos(700)))
        sink.apply_ddl(parse_ddl("DROP TABLE gone", db, pos(701)))
        skipped = [r.getMessage() for r in caplog.records if "already applied" in r.getMessage()]
        assert len(skipped) == 3
        assert "MySQL error 1050" in skipped[0] and "CREATE TABLE t" in skipped[0]
        assert "MySQL error 1060" in skipped[1] and "MySQL error 1051" in skipped[2]

        rename = parse_ddl(f"RENAME TABLE t TO `{fresh_names[1]}`.t2", db, pos(800))
        sink.apply_ddl(rename)  # the target database is created first
        sink.apply_ddl(rename)  # replay: the old name is gone
        assert query(sink_db, f"SELECT COUNT(*) FROM `{fresh_names[1]}`.t2") == [(300,)]
        assert sink.flush() == pos(800)
    finally:
        sink.close()


def test_schema_ddl_keeps_its_options_and_unqualified_names_land_in_the_event_schema(
    sink_db: MariaDBServer, fresh_names: list[str], sink_database: str
) -> None:
    uri = parse_sink_uri(sink_db.uri)
    sink = MySQLSink(uri, lambda _: None, "ddl-test")  # type: ignore[arg-type,return-value]
    db = fresh_names[0]
    try:
        statement = f"CREATE DATABASE `{db}` CHARACTER SET latin1"
        sink.apply_ddl(parse_ddl(statement, sink_database, pos(100)))
        sink.apply_ddl(parse_ddl(statement, sink_database, pos(101)))  # replay: skipped
        sink.apply_ddl(parse_ddl("CREATE TABLE plain (id INT PRIMARY KEY)", db, pos(102)))
    finally:
        sink.close()
    charset = query(
        sink_db,
        f"SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
        f"WHERE SCHEMA_NAME = '{db}'",
    )
    assert charset == [("latin1",)]
    assert query(sink_db, f"SHOW TABLES FROM `{db}`") == [("plain",)]


def test_a_ddl_error_no_replay_explains_fails_the_sink(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    uri = parse_sink_uri(sink_db.uri)
    sink = MySQLSink(uri, lambda _: None, "ddl-test")  # type: ignore[arg-type,return-value]
    try:
        alter = parse_ddl("ALTER TABLE nowhere ADD COLUMN c INT", sink_database, pos(100))
        with pytest.raises(SinkError) as failure:
            sink.apply_ddl(alter)
        assert "DDL at binlog.000001:100 failed" in failure.value.reason
        assert "doesn't exist (MySQL error 1146)" in failure.value.reason
        assert failure.value.statement == "ALTER TABLE nowhere ADD COLUMN c INT"
        assert sink.flushed is None
        with pytest.raises(SinkError) as again:
            sink.write_rows([])
        assert again.value is failure.value
    finally:
        sink.close()
