"""The snapshot's chunk fence against a real MariaDB (cdc/sink/mysql/chunkfence.py).

Two chunk sinks stand for two captures writing one chunk: the capture that proved it
holds the chunk later (the larger etcd revision) wins, in whatever order their writes
come; a write already in flight when the later holder starts lands first, and the
later holder's range DELETE removes it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from testkit import execute

from cdc.model import Column, Position, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.base import SinkError
from cdc.sink.mysql.chunkfence import FENCE_TABLE, ChunkFenced, fence_statements
from cdc.sink.mysql.chunkload import ChunkLoader, LoadOrStatements
from cdc.sink.registry import parse_sink_uri
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.reader import ChunkResult

pytestmark = pytest.mark.integration

CHANGEFEED = "fence-test"


@pytest.fixture
def table(sink_db: MariaDBServer, sink_database: str) -> TableName:
    name = TableName(sink_database, "t")
    execute(sink_db, f"CREATE TABLE {name.quoted()} (id INT PRIMARY KEY, v VARCHAR(20) NOT NULL)")
    return name


def schema_of(table: TableName) -> TableSchema:
    columns = (
        Column("id", "int", "int(11)", nullable=False),
        Column("v", "varchar", "varchar(20)", nullable=False, charset="utf8mb4"),
    )
    return TableSchema(table, columns, ("id",))


def chunk_result(table: TableName, n: int, keys: range, value: str) -> ChunkResult:
    """Chunk ``n`` of ``table`` (keys ``100 n`` to ``100 n + 99``) read as ``keys``."""
    chunk = SnapshotChunk(table, n, "id", lower=100 * n, upper=100 * (n + 1))
    at = Position("binlog.000001", 1000 + n)
    rows = [{"id": k, "v": value} for k in keys]
    return ChunkResult(chunk, rows, at, at, len(rows), schema=schema_of(table))


def chunk_sink(db: MariaDBServer, query: str = "") -> LoadOrStatements:
    return LoadOrStatements(ChunkLoader(parse_sink_uri(db.uri + query), CHANGEFEED))


def rows(db: MariaDBServer, table: TableName) -> list[tuple[Any, ...]]:
    return execute(db, f"SELECT id, v FROM {table.quoted()} ORDER BY id")


@pytest.mark.parametrize("query", ["", "?load-data-rows=0"], ids=["load", "statements"])
def test_a_capture_that_lost_a_chunk_writes_none_of_it_afterwards(
    sink_db: MariaDBServer, table: TableName, query: str
) -> None:
    lost, taker = chunk_sink(sink_db, query), chunk_sink(sink_db, query)
    schema = schema_of(table)
    try:
        lost.write(schema, chunk_result(table, 0, range(1, 50), "old"), clear_range=True, token=10)
        taker.write(schema, chunk_result(table, 0, range(1, 40), "new"), clear_range=True, token=20)
        late = chunk_result(table, 0, range(1, 60), "late")
        with pytest.raises(ChunkFenced, match=r"taken over: .* token 20, larger than .* 10 "):
            lost.write(schema, late, clear_range=True, token=10)
        assert rows(sink_db, table) == [(k, "new") for k in range(1, 40)]

        # the holder's own retry passes; the lost capture's other chunks are its own still
        taker.write(schema, chunk_result(table, 0, range(1, 41), "new"), clear_range=True, token=20)
        lost.write(
            schema, chunk_result(table, 1, range(100, 103), "old"), clear_range=True, token=10
        )
    finally:
        lost.close()
        taker.close()
    assert rows(sink_db, table) == [
        *((k, "new") for k in range(1, 41)),
        *((k, "old") for k in range(100, 103)),
    ]
    fence = f"SELECT chunk, token FROM {FENCE_TABLE.quoted()} WHERE chunk LIKE '{table}:%'"
    assert dict(execute(sink_db, fence)) == {f"{table}:0": 20, f"{table}:1": 10}


def test_a_chunk_that_writes_no_row_still_raises_its_fence(
    sink_db: MariaDBServer, table: TableName
) -> None:
    """A table whose ranges are not cleared (its deletes filtered out) and a chunk read
    empty by its new holder: the old holder's late rows are refused all the same."""
    lost, taker = chunk_sink(sink_db), chunk_sink(sink_db)
    schema = schema_of(table)
    try:
        taker.write(schema, chunk_result(table, 0, range(0), "new"), clear_range=False, token=20)
        late = chunk_result(table, 0, range(1, 9), "late")
        with pytest.raises(ChunkFenced):
            lost.write(schema, late, clear_range=False, token=10)
    finally:
        lost.close()
        taker.close()
    assert rows(sink_db, table) == []


def test_lines_of_a_lost_chunk_are_refused_before_the_range_is_cleared(
    sink_db: MariaDBServer, table: TableName
) -> None:
    lost, taker = chunk_sink(sink_db), chunk_sink(sink_db)
    schema = schema_of(table)
    try:
        taker.write(schema, chunk_result(table, 0, range(1, 5), "new"), clear_range=True, token=20)
        chunk = chunk_result(table, 0, range(0), "").chunk
        target = lost.lines(schema, chunk, clear_range=True, token=10)
        assert target is not None
        with pytest.raises(ChunkFenced):
            target.begin()
    finally:
        lost.close()
        taker.close()
    assert rows(sink_db, table) == [(k, "new") for k in range(1, 5)]


def test_a_write_in_flight_when_the_chunk_is_taken_over_lands_first_and_is_cleared(
    sink_db: MariaDBServer, table: TableName
) -> None:
    """The older writer's transaction holds the fence row: the taker waits for its commit,
    then its range DELETE removes what it wrote."""
    chunk_id = chunk_result(table, 0, range(0), "").chunk.chunk_id
    taker = chunk_sink(sink_db)
    taker.loader.fence(chunk_result(table, 0, range(0), "").chunk, 1)  # the table made first
    conn = sink_db.connect()
    done = threading.Event()
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for statement in fence_statements(CHANGEFEED, chunk_id, 10):
                cur.execute(statement.sql)
            cur.execute(f"INSERT INTO {table.quoted()} VALUES (45, 'in flight')")

        def take() -> None:
            result = chunk_result(table, 0, range(1, 40), "new")
            taker.write(schema_of(table), result, clear_range=True, token=20)
            done.set()

        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        assert not done.wait(1.0), "the taker wrote while an older write held the chunk"
        conn.commit()
        thread.join(timeout=30)
        assert done.is_set()
    finally:
        conn.close()
        taker.close()
    assert rows(sink_db, table) == [(k, "new") for k in range(1, 40)]


def test_a_sink_user_that_may_not_make_the_fence_is_told_the_grant(
    sink_db: MariaDBServer, table: TableName
) -> None:
    user, password = f"fence_{table.schema[-6:]}", "Fence-pw-1"
    execute(
        sink_db,
        f"CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'",
        f"GRANT ALL PRIVILEGES ON `{table.schema}`.* TO '{user}'@'%'",
    )
    try:
        uri = f"mysql://{user}:{password}@127.0.0.1:{sink_db.port}/"
        sink = LoadOrStatements(ChunkLoader(parse_sink_uri(uri), CHANGEFEED))
        result = chunk_result(table, 0, range(1, 5), "new")
        try:
            with pytest.raises(
                SinkError, match=r"GRANT CREATE, INSERT, UPDATE, SELECT ON `_cdc_snapshot`"
            ):
                sink.write(schema_of(table), result, clear_range=True, token=20)
        finally:
            sink.close()
        assert rows(sink_db, table) == []
    finally:
        execute(sink_db, f"DROP USER '{user}'@'%'")
