"""A re-snapshot chunk into MariaDB (``cdc.sink.mysql.rangerepair``), against a real server.

The source side is given (a ``RepairRead``), so each case says exactly what the source
held and which keys its binlog changed between the watermarks; the downstream is real:
its row locks order the chunk against a concurrent writer playing the table's stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from testkit import execute

from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.mysql.rangerepair import RangeRepair
from cdc.sink.registry import parse_sink_uri
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.repair import RepairRead

pytestmark = pytest.mark.integration

LOW, HIGH = Position("binlog.000001", 100), Position("binlog.000001", 200)


def _setup(sink: MariaDBServer, db: str) -> tuple[TableName, SnapshotChunk]:
    execute(
        sink,
        f"CREATE DATABASE IF NOT EXISTS `{db}`",
        f"CREATE TABLE `{db}`.r (id INT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO `{db}`.r VALUES "
        + ", ".join(f"({i}, 'old')" for i in range(1, 21) if i != 5)
        + ", (21, 'extra'), (30, 'outside')",
        f"UPDATE `{db}`.r SET v = 'bad' WHERE id IN (3, 17)",
    )
    table = TableName(db, "r")
    return table, SnapshotChunk(table, 0, "id", None, 25)


def _reader(
    chunk: SnapshotChunk, ids: range, touched: set[int], before: Callable[[], None]
) -> Callable[[], RepairRead]:
    def read() -> RepairRead:
        before()
        rows = [{"id": i, "v": "src"} for i in ids]
        keys = {(i,) for i in range(1, 21)}
        return RepairRead(chunk, rows, keys, {(i,) for i in touched}, LOW, HIGH)

    return read


def _rows(sink: MariaDBServer, db: str) -> dict[int, str]:
    return dict(execute(sink, f"SELECT id, v FROM `{db}`.r"))


def test_the_range_is_repaired_and_the_stream_waits_for_it(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    table, chunk = _setup(sink_db, db)
    conn = sink_db.connect()
    schema = load_table_schema(conn, table)
    conn.close()
    stream_done: list[float] = []

    def stream() -> None:  # the table's stream writing a row of the range meanwhile
        execute(sink_db, f"UPDATE `{db}`.r SET v = 'stream' WHERE id = 7")
        stream_done.append(time.monotonic())

    writer = threading.Thread(target=stream)

    def meanwhile() -> None:
        writer.start()
        time.sleep(0.5)
        assert not stream_done, "the stream wrote into the locked range"

    repair = RangeRepair(parse_sink_uri(sink_db.uri), "cf")  # type: ignore[arg-type]
    try:
        outcome = repair.repair(schema, chunk, None, _reader(chunk, range(1, 21), {8}, meanwhile))
        committed = time.monotonic()
    finally:
        repair.close()
    writer.join(10)
    assert stream_done and stream_done[0] >= committed - 0.05
    rows = _rows(sink_db, db)
    # 5 back, 3/17 repaired, 21 gone (no source row), 30 outside the range kept, 8 left
    # to the stream (changed between the watermarks), 7 the stream's write after the chunk
    assert rows == {
        **{i: "src" for i in range(1, 21)},
        7: "stream",
        8: "old",
        30: "outside",
    }
    assert (outcome.deleted, outcome.left_to_stream) == (1, 1)


def test_a_predicate_removes_only_rows_the_source_has_not(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    table, chunk = _setup(sink_db, db)
    conn = sink_db.connect()
    schema = load_table_schema(conn, table)
    conn.close()
    execute(sink_db, f"UPDATE `{db}`.r SET v = 'x' WHERE id = 4")
    repair = RangeRepair(parse_sink_uri(sink_db.uri), "cf")  # type: ignore[arg-type]
    try:
        # the source rows `id > 15 OR v = 'x'` selects: 16..20 (4 is 'old' at the source)
        repair.repair(
            schema,
            chunk,
            "`id` > 15 OR `v` = 'x'",
            _reader(chunk, range(16, 21), set(), lambda: None),
        )
    finally:
        repair.close()
    rows = _rows(sink_db, db)
    assert all(rows[i] == "src" for i in range(16, 21))
    assert 21 not in rows  # selected downstream, no source row: removed
    assert rows[4] == "x"  # selected downstream only, the source has the row: kept
    assert rows[3] == "bad" and 5 not in rows  # outside the predicate: untouched
    assert rows[30] == "outside"
