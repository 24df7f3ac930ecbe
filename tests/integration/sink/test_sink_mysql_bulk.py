"""Large groups of upserts in a lane transaction go down as one LOAD DATA LOCAL INFILE (issue
#14): proven by the downstream's ``Com_load`` counter, with the same rows as the statement
path, the statement path kept for small groups, deletes and ON DUPLICATE KEY UPDATE tables,
whole source transactions still all or nothing, a downstream refusing local files served
by statements (said once), and a connection that sends the rows it built and no file."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testkit import execute

from cdc.logs import get_logger
from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.base import SinkError
from cdc.sink.mysql import MySQLSink, MySQLSinkOptions
from cdc.sink.mysql.bulk import MAX_LOAD_ROWS
from cdc.sink.mysql.chunkload import ChunkLoader
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.loadfile import LOCAL_FILE_NAME
from cdc.sink.mysql.localfile import LocalFile
from cdc.sink.mysql.statements import Statement
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

DDL = (
    "CREATE TABLE {name} (id INT PRIMARY KEY, k INT NULL, s VARCHAR(40) NOT NULL, "
    "KEY k_1 (k)) DEFAULT CHARSET=utf8mb4"
)
TEXTS = ["plain", "tab\there", "new\nline", "back\\slash", "\\N", "", "é€😀", "quote ' \""]


def schema(table: TableName) -> TableSchema:
    return TableSchema(
        table,
        (
            Column("id", "int", "int(11)", nullable=False),
            Column("k", "int", "int(11)"),
            Column("s", "varchar", "varchar(40)", nullable=False, charset="utf8mb4"),
        ),
        ("id",),
    )


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def image(key: int, version: int = 0) -> dict[str, Any]:
    k = None if key % 7 == 0 else key * 10 + version
    return {"id": key, "k": k, "s": f"{TEXTS[key % len(TEXTS)]}{version or ''}"}


def com_load(server: MariaDBServer) -> int:
    """LOAD DATA statements the downstream has run since it started."""
    ((_, value),) = execute(server, "SHOW GLOBAL STATUS LIKE 'Com_load'")
    return int(value)


def table_rows(server: MariaDBServer, table: TableName) -> list[tuple[Any, ...]]:
    return execute(server, f"SELECT id, k, s FROM {table.quoted()} ORDER BY id")


def write(
    server: MariaDBServer, table: TableName, changes: list[RowChange], query: str
) -> tuple[int, Position | None]:
    """Writes ``changes`` in one call through a sink of ``query``; the loads it ran."""
    before = com_load(server)
    sink = MySQLSink(parse_sink_uri(server.uri + query), lambda _: schema(table), "bulk-test")
    try:
        sink.write_rows(changes)
        flushed = sink.flush()
    finally:
        sink.close()
    return com_load(server) - before, flushed


def mixed_changes(table: TableName) -> tuple[list[RowChange], dict[int, dict[str, Any]]]:
    """300 inserts, then updates, deletes and key changes of them: one lane transaction."""
    model: dict[int, dict[str, Any]] = {}
    changes: list[RowChange] = []
    offset = 100
    for key in range(1, 301):
        model[key] = image(key)
        changes.append(RowChange(table, Op.CREATE, None, model[key], (key,), pos(offset)))
        offset += 1
    for key in range(1, 301, 3):  # updates in place
        after = image(key, 1)
        changes.append(RowChange(table, Op.UPDATE, model[key], after, (key,), pos(offset)))
        model[key] = after
        offset += 1
    for key in range(2, 301, 5):  # deletes
        changes.append(RowChange(table, Op.DELETE, model.pop(key), None, (key,), pos(offset)))
        offset += 1
    for key in range(3, 301, 30):  # key changes
        after = {**model[key], "id": key + 1000}
        changes.append(
            RowChange(table, Op.UPDATE, model.pop(key), after, (key + 1000,), pos(offset))
        )
        model[key + 1000] = after
        offset += 1
    return changes, model


@pytest.fixture
def table(sink_db: MariaDBServer, sink_database: str) -> TableName:
    name = TableName(sink_database, "t")
    execute(sink_db, DDL.format(name=name.quoted()))
    return name


def test_a_large_group_of_upserts_is_one_load_with_the_rows_of_the_statement_path(
    sink_db: MariaDBServer, table: TableName
) -> None:
    changes, model = mixed_changes(table)
    expected = [(key, row["k"], row["s"]) for key, row in sorted(model.items())]
    query = "?worker-count=1&max-txn-row=1000"
    loads, flushed = write(sink_db, table, changes, query + "&load-data-rows=100")
    assert (loads, flushed) == (1, changes[-1].position)
    assert table_rows(sink_db, table) == expected
    # written again over itself (a replay of everything): the same rows, by a load again
    assert write(sink_db, table, changes, query + "&load-data-rows=100")[0] == 1
    assert table_rows(sink_db, table) == expected
    # a replay from the middle of the stream, on a downstream that is ahead
    assert write(sink_db, table, changes[250:], query + "&load-data-rows=100")[0] == 1
    assert table_rows(sink_db, table) == expected
    execute(sink_db, f"TRUNCATE TABLE {table.quoted()}")
    # the statement path (load-data-rows=0) writes the same rows without any load
    assert write(sink_db, table, changes, query + "&load-data-rows=0")[0] == 0
    assert table_rows(sink_db, table) == expected


def test_small_groups_and_deletes_keep_the_statement_path(
    sink_db: MariaDBServer, table: TableName
) -> None:
    inserts = [RowChange(table, Op.CREATE, None, image(k), (k,), pos(k)) for k in range(1, 100)]
    query = "?worker-count=1&max-txn-row=1000&load-data-rows=100"
    assert write(sink_db, table, inserts, query)[0] == 0  # 99 upserts: statements
    deletes = [
        RowChange(table, Op.DELETE, image(k), None, (k,), pos(200 + k)) for k in range(1, 100)
    ]
    assert write(sink_db, table, deletes + inserts[:1], query)[0] == 0
    assert table_rows(sink_db, table) == [(1, 10, image(1)["s"])]
    # the threshold counts the rows of one lane transaction: max-txn-row 50 never gets there
    many = [RowChange(table, Op.CREATE, None, image(k), (k,), pos(k)) for k in range(1, 400)]
    assert write(sink_db, table, many, "?worker-count=1&max-txn-row=50&load-data-rows=100")[0] == 0
    assert len(table_rows(sink_db, table)) == 399


def test_a_table_upserting_by_on_duplicate_key_update_keeps_its_statements(
    sink_db: MariaDBServer, table: TableName
) -> None:
    """safe-mode=false updates a key-only table's rows in place (downstream triggers); a
    load could only delete and insert them again."""
    changes = [RowChange(table, Op.CREATE, None, image(k), (k,), pos(k)) for k in range(1, 301)]
    query = "?worker-count=1&max-txn-row=1000&load-data-rows=100&safe-mode=false"
    assert write(sink_db, table, changes, query)[0] == 0
    assert len(table_rows(sink_db, table)) == 300


def test_a_large_atomic_source_transaction_loads_and_commits_all_or_nothing(
    sink_db: MariaDBServer, sink_database: str, table: TableName
) -> None:
    """transaction-atomicity: one downstream transaction per source transaction, however
    large (max-txn-row 50 is far below it); its loads are part of that transaction."""
    narrow = TableName(sink_database, "narrow")
    execute(sink_db, f"CREATE TABLE {narrow.quoted()} (id INT PRIMARY KEY, k INT, s VARCHAR(2))")
    rows = MAX_LOAD_ROWS + 500
    txn = [
        RowChange(table, Op.CREATE, None, image(k), (k,), pos(100), txn_id="0-1-5")
        for k in range(1, rows + 1)
    ]
    query = "?max-txn-row=50&transaction-atomicity=true&load-data-rows=100"
    schemas = {table: schema(table), narrow: schema(narrow)}
    # the last change of the transaction cannot be written: nothing of it may stay
    bad = RowChange(narrow, Op.CREATE, None, image(1, 5), (1,), pos(100), txn_id="0-1-5")
    sink = MySQLSink(parse_sink_uri(sink_db.uri + query), schemas.__getitem__, "bulk-test")
    try:
        sink.write_rows([*txn, bad])
        with pytest.raises(SinkError) as failure:
            sink.flush()
    finally:
        sink.close()
    assert "Data too long for column 's'" in failure.value.reason
    assert table_rows(sink_db, table) == []
    # without it: two loads (at most MAX_LOAD_ROWS rows each), one commit
    before = com_load(sink_db)
    sink = MySQLSink(parse_sink_uri(sink_db.uri + query), schemas.__getitem__, "bulk-test")
    try:
        sink.write_rows(txn)
        assert sink.flush() == pos(100)
    finally:
        sink.close()
    assert com_load(sink_db) - before == 2
    assert execute(sink_db, f"SELECT COUNT(*), SUM(id) FROM {table.quoted()}") == [
        (rows, rows * (rows + 1) // 2)
    ]


@pytest.fixture
def no_local_files(sink_db: MariaDBServer) -> Iterator[None]:
    execute(sink_db, "SET GLOBAL local_infile = 0")
    try:
        yield
    finally:
        execute(sink_db, "SET GLOBAL local_infile = 1")


def test_a_downstream_refusing_local_files_is_written_by_statements_said_once(
    sink_db: MariaDBServer,
    table: TableName,
    no_local_files: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    execute(sink_db, f"INSERT INTO {table.quoted()} (id, k, s) VALUES (5000, 1, 'old')")
    uri = parse_sink_uri(sink_db.uri + "?worker-count=2&max-txn-row=1000&load-data-rows=10")
    sink = MySQLSink(uri, lambda _: schema(table), "bulk-test")
    try:
        # the refused transaction (a delete before the load) is written again as statements
        old = {"id": 5000, "k": 1, "s": "old"}
        sink.write_rows(
            [RowChange(table, Op.DELETE, old, None, (5000,), pos(1))]
            + [RowChange(table, Op.CREATE, None, image(k), (k,), pos(10 + k)) for k in range(200)]
        )
        assert sink.flush() == pos(209)
        sink.write_rows(
            [RowChange(table, Op.CREATE, None, image(k), (k,), pos(k)) for k in range(300, 500)]
        )
        assert sink.flush() == pos(499)
    finally:
        sink.close()
    assert [r[0] for r in table_rows(sink_db, table)] == [*range(200), *range(300, 500)]
    refusals = [r for r in caplog.records if "refuses LOAD DATA LOCAL INFILE" in r.getMessage()]
    assert len(refusals) == 1
    assert "local_infile=ON" in refusals[0].getMessage()


def test_the_connection_sends_the_rows_it_was_given_and_never_a_file(
    sink_db: MariaDBServer, table: TableName, tmp_path: Path
) -> None:
    """In LOAD DATA LOCAL the server names the file to send; a server naming another one
    than the statement's own (here a statement that does, as a rogue server would) gets
    nothing, where PyMySQL alone reads it from disk."""
    secret = tmp_path / "secret.tsv"
    secret.write_text("7\t7\tsecret\n")
    other = (
        f"LOAD DATA LOCAL INFILE '{secret}' REPLACE INTO TABLE {table.quoted()} "
        "CHARACTER SET utf8mb4 (id, k, s)"
    )
    plain = sink_db.connect(local_infile=True)
    try:
        with plain.cursor() as cur:
            cur.execute(other)
    finally:
        plain.close()
    assert table_rows(sink_db, table) == [(7, 7, "secret")]  # the threat is real
    execute(sink_db, f"DELETE FROM {table.quoted()}")

    downstream = Downstream(
        parse_sink_uri(sink_db.uri).connection,
        MySQLSinkOptions(),
        get_logger(__name__),
        threading.Event(),
        read_timeout=30,
        local_infile=True,
    )
    offered = LocalFile(LOCAL_FILE_NAME, b"8\t8\toffered\n")
    try:
        with pytest.raises(SinkError) as failure:
            downstream.run(
                [Statement(other, "a load of another file", local_file=offered)], transaction=True
            )
        assert f"asked for the local file '{secret}'" in failure.value.reason
        assert f"offered only '{LOCAL_FILE_NAME}'" in failure.value.reason
        own = other.replace(str(secret), LOCAL_FILE_NAME)
        with pytest.raises(SinkError) as failure:  # no offer: nothing at all is sent
            downstream.run([Statement(own, "a load without data")], transaction=True)
        assert "the sink offered none" in failure.value.reason
        assert table_rows(sink_db, table) == []
        # and an offer serves its own statement: the connection works as it should
        downstream.run([Statement(own, "a load of its rows", local_file=offered)], transaction=True)
    finally:
        downstream.close()
    assert table_rows(sink_db, table) == [(8, 8, "offered")]


def test_a_one_column_table_with_an_empty_string_key_loads(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    """A line holding only an empty field is still a row (its one value '')."""
    one = TableName(sink_database, "one")
    execute(sink_db, f"CREATE TABLE {one.quoted()} (k VARCHAR(10) PRIMARY KEY)")
    one_schema = TableSchema(one, (Column("k", "varchar", "varchar(10)", nullable=False),), ("k",))
    keys = ["", "a", "b\tc", "\\N", "x\\"]
    changes = [RowChange(one, Op.CREATE, None, {"k": k}, (k,), pos(i)) for i, k in enumerate(keys)]
    before = com_load(sink_db)
    uri = parse_sink_uri(sink_db.uri + "?worker-count=1&load-data-rows=2")
    sink = MySQLSink(uri, lambda _: one_schema, "bulk-test")
    try:
        sink.write_rows(changes)
        sink.flush()
    finally:
        sink.close()
    assert com_load(sink_db) - before == 1
    assert sorted(r[0] for r in execute(sink_db, f"SELECT k FROM {one.quoted()}")) == sorted(keys)


def test_load_data_rows_0_leaves_snapshot_chunks_to_statements_too(
    sink_db: MariaDBServer, table: TableName
) -> None:
    rows = [image(k) for k in range(1, 11)]
    before = com_load(sink_db)
    never = ChunkLoader(parse_sink_uri(sink_db.uri + "?load-data-rows=0"), "bulk-test")
    try:
        assert not never.load(schema(table), rows)
    finally:
        never.close()
    assert com_load(sink_db) == before
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "bulk-test")
    try:
        assert loader.load(schema(table), rows)
    finally:
        loader.close()
    assert com_load(sink_db) == before + 1
    assert len(table_rows(sink_db, table)) == 10


def test_a_load_of_more_than_256_packets_keeps_the_packet_sequence(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    """8 MB of rows: 500 packets of 16 KiB, their one-byte sequence number wraps twice."""
    wide = TableName(sink_database, "wide")
    execute(sink_db, f"CREATE TABLE {wide.quoted()} (id INT PRIMARY KEY, t MEDIUMTEXT)")
    wide_schema = TableSchema(
        wide,
        (Column("id", "int", "int(11)", nullable=False), Column("t", "mediumtext", "mediumtext")),
        ("id",),
    )
    texts = {k: f"{k:05d}" * 820 + "\t\n\\" for k in range(2000)}
    changes = [
        RowChange(wide, Op.CREATE, None, {"id": k, "t": t}, (k,), pos(k)) for k, t in texts.items()
    ]
    before = com_load(sink_db)
    uri = parse_sink_uri(sink_db.uri + "?worker-count=1&max-txn-row=5000&load-data-rows=100")
    sink = MySQLSink(uri, lambda _: wide_schema, "bulk-test")
    try:
        sink.write_rows(changes)
        assert sink.flush() == pos(1999)
    finally:
        sink.close()
    assert com_load(sink_db) - before == 1
    got = execute(sink_db, f"SELECT id, t FROM {wide.quoted()} ORDER BY id")
    assert dict(got) == texts
