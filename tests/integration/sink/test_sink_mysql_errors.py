"""Permanent failures of the MySQL sink: a clear SinkError with the statement (values
elided) and the server's reason; after it the sink refuses everything, writes nothing
more, and its flushed position never passes the failed change."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.ddl import parse_ddl
from cdc.sink.base import SinkError
from cdc.sink.factory import open_sink
from cdc.sink.mysql import MySQLSink
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-row-value"


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def table_schema(table: TableName, *names: str) -> TableSchema:
    columns = [Column("id", "int", "int(11)", nullable=False)]
    columns += [Column(n, "varchar", "varchar(40)") for n in names]
    return TableSchema(table, tuple(columns), ("id",))


def insert(table: TableName, key: int, offset: int, **values: str) -> RowChange:
    return RowChange(table, Op.CREATE, None, {"id": key, **values}, (key,), pos(offset))


@pytest.fixture
def tables(sink_db: MariaDBServer, sink_database: str) -> Iterator[dict[str, TableName]]:
    names = {n: TableName(sink_database, n) for n in ("a", "missing", "narrow")}
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE {names['a'].quoted()} (id INT PRIMARY KEY, s VARCHAR(40))")
            cur.execute(f"CREATE TABLE {names['narrow'].quoted()} (id INT PRIMARY KEY)")
        yield names
    finally:
        conn.close()


def rows(server: MariaDBServer, table: TableName) -> list[tuple]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table.quoted()} ORDER BY id")
            return list(cur.fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("workers", [1, 4])
def test_a_missing_table_fails_the_sink_and_nothing_after_it_counts(
    sink_db: MariaDBServer, tables: dict[str, TableName], workers: int
) -> None:
    a, missing = tables["a"], tables["missing"]
    schemas = {a: table_schema(a, "s"), missing: table_schema(missing, "s")}
    uri = parse_sink_uri(sink_db.uri + f"?worker-count={workers}")
    sink = MySQLSink(uri, schemas.__getitem__, "error-test")
    try:
        sink.write_rows([insert(a, i, 100 + i, s=f"v{i}") for i in range(1, 11)])
        assert sink.flush() == pos(110)
        sink.write_rows([insert(missing, 1, 111, s=SECRET)])
        sink.write_rows([insert(a, 100, 112, s="after the failure")])
        with pytest.raises(SinkError) as failure:
            sink.flush()
        error = failure.value
        assert "doesn't exist (MySQL error 1146)" in error.reason
        assert "binlog.000001:111" in error.reason
        assert error.statement.startswith(f"REPLACE INTO {missing.quoted()} (`id`, `s`) VALUES (")
        assert SECRET not in str(error) and sink_db.password not in str(error)
        assert sink.flushed == pos(110)
        for attempt in (
            lambda: sink.write_rows([insert(a, 200, 113, s="x")]),
            sink.flush,
            lambda: sink.apply_ddl(parse_ddl("CREATE TABLE z (id INT)", a.schema, pos(114))),
        ):
            with pytest.raises(SinkError) as again:
                attempt()
            assert again.value is error
        assert sink.flushed == pos(110)
        assert sink.failure is error
    finally:
        sink.close()
    written = {row[0] for row in rows(sink_db, a)}
    assert written >= set(range(1, 11)) and 200 not in written
    if workers == 1:  # one lane: the change queued after the failed one was never written
        assert 100 not in written


def test_an_unknown_column_downstream_is_permanent(
    sink_db: MariaDBServer, tables: dict[str, TableName]
) -> None:
    narrow = tables["narrow"]
    uri = parse_sink_uri(sink_db.uri + "?worker-count=2")
    sink = MySQLSink(uri, lambda _: table_schema(narrow, "extra"), "error-test")
    try:
        sink.write_rows([insert(narrow, 1, 100, extra=SECRET)])
        with pytest.raises(SinkError, match=r"Unknown column 'extra'.*MySQL error 1054") as info:
            sink.flush()
        assert SECRET not in str(info.value)
        assert sink.flushed is None
    finally:
        sink.close()
    assert rows(sink_db, narrow) == []


def test_a_change_the_sink_cannot_write_at_all_is_refused_before_anything_is_queued(
    sink_db: MariaDBServer, tables: dict[str, TableName]
) -> None:
    a = tables["a"]
    keyless = TableSchema(a, (Column("s", "varchar", "varchar(40)"),), ())
    uri = parse_sink_uri(sink_db.uri)
    sink = MySQLSink(uri, lambda _: keyless, "error-test")
    try:
        change = RowChange(a, Op.CREATE, None, {"s": "x"}, (), pos(100))
        with pytest.raises(SinkError, match="no primary key and no NOT NULL unique key"):
            sink.write_rows([change])
        with pytest.raises(SinkError, match="no primary key"):
            sink.flush()
    finally:
        sink.close()


def test_a_wrong_password_fails_at_open_without_showing_it(sink_db: MariaDBServer) -> None:
    uri = parse_sink_uri(
        f"mysql://{sink_db.user}:not-the-password-42@{sink_db.host}:{sink_db.port}/"
    )
    with pytest.raises(SinkError) as failure:
        MySQLSink(uri, lambda _: None, "error-test")  # type: ignore[arg-type,return-value]
    text = str(failure.value)
    assert "Access denied" in text and "(MySQL error 1045)" in text
    assert "check the user and password" in text
    assert "not-the-password-42" not in text


def test_open_sink_opens_a_working_mysql_sink(
    sink_db: MariaDBServer, tables: dict[str, TableName]
) -> None:
    a = tables["a"]
    sink = open_sink(
        parse_sink_uri(sink_db.uri + "?worker-count=3&safe-mode=false"),
        lambda _: table_schema(a, "s"),
        "factory-test",
    )
    try:
        assert isinstance(sink, MySQLSink)
        sink.write_rows([insert(a, 1, 100, s="x"), insert(a, 1, 101, s="y")])
        assert sink.flush() == pos(101)
    finally:
        sink.close()
    assert rows(sink_db, a) == [(1, "y")]


@pytest.mark.parametrize("load_rows", [0, 2], ids=["statements", "load-data"])
@pytest.mark.parametrize("workers", [1, 4])
def test_the_write_fence_stops_every_write_once_it_says_no(
    sink_db: MariaDBServer, tables: dict[str, TableName], workers: int, load_rows: int
) -> None:
    a = tables["a"]
    writable = [True]
    sink = open_sink(
        parse_sink_uri(sink_db.uri + f"?worker-count={workers}&load-data-rows={load_rows}"),
        {a: table_schema(a, "s")}.__getitem__,
        "fence-test",
        writable=lambda: writable[0],
    )
    try:
        sink.write_rows([insert(a, i, 100 + i, s="before") for i in range(1, 6)])
        assert sink.flush() == pos(105)
        writable[0] = False
        sink.write_rows([insert(a, i, 200 + i, s="stale") for i in range(6, 11)])
        with pytest.raises(SinkError, match="can no longer prove its lease is alive"):
            sink.flush()
        assert sink.flushed == pos(105)
    finally:
        sink.close()
    assert rows(sink_db, a) == [(i, "before") for i in range(1, 6)]
