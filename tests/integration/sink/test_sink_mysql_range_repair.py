"""A re-snapshot chunk into MariaDB (``cdc.sink.mysql.rangerepair``), against a real server.

The source side is given (a ``RepairRead``), so each case says exactly what the source
held and which keys its binlog changed between the watermarks; the downstream is real:
its row locks order the chunk against a concurrent writer playing the table's stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest
from testkit import execute

from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.schema.tablefacts import TableFacts, read_table_facts
from cdc.sink.base import SinkError
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


def _facts(server: MariaDBServer, table: TableName) -> TableFacts:
    """What the source's read says of its table: here, one defined on the downstream."""
    conn = server.connect()
    try:
        facts = read_table_facts(conn, table)
    finally:
        conn.close()
    assert facts is not None
    return facts


def _reader(
    chunk: SnapshotChunk,
    ids: range,
    touched: set[int],
    before: Callable[[], None],
    facts: TableFacts,
) -> Callable[[], RepairRead]:
    def read() -> RepairRead:
        before()
        rows = [{"id": i, "v": "src"} for i in ids]
        keys = {(i,) for i in range(1, 21)}
        return RepairRead(chunk, rows, keys, {(i,) for i in touched}, LOW, HIGH, facts)

    return read


def _holds(keys: set[tuple[object, ...]]) -> Callable[[Sequence[tuple[object, ...]]], list[bool]]:
    """The source's answer to which keys it holds a row of now: those of ``keys``."""
    return lambda asked: [key in keys for key in asked]


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
        read = _reader(chunk, range(1, 21), {8}, meanwhile, _facts(sink_db, table))
        outcome = repair.repair(schema, chunk, None, read, _holds({(i,) for i in range(1, 21)}))
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


def test_a_row_the_source_deletes_while_the_chunk_brings_it_back_stays_deleted(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    """Row 5 is missing downstream (what the re-snapshot repairs). Right after the
    chunk's high watermark the source deletes it, and the stream applies that DELETE at
    once: a row that is not there has no lock to wait for, so it goes through the
    range's locks as a no-op. The chunk then writes row 5 from its read; asked once it
    holds row 5's lock, the source no longer has it, so the chunk deletes it again.
    Without that question row 5 stayed downstream for good."""
    db = sink_database
    table, chunk = _setup(sink_db, db)
    conn = sink_db.connect()
    schema = load_table_schema(conn, table)
    conn.close()
    source = {(i,) for i in range(1, 21)}
    stream_took: list[float] = []

    def deleted_after_high() -> None:
        source.discard((5,))
        started = time.monotonic()
        execute(sink_db, f"DELETE FROM `{db}`.r WHERE id IN (5)")  # the stream's write
        stream_took.append(time.monotonic() - started)

    repair = RangeRepair(parse_sink_uri(sink_db.uri), "cf")  # type: ignore[arg-type]
    try:
        read = _reader(chunk, range(1, 21), set(), deleted_after_high, _facts(sink_db, table))
        outcome = repair.repair(schema, chunk, None, read, _holds(source))
    finally:
        repair.close()
    assert stream_took and stream_took[0] < 1, "the stream's DELETE waited for the range"
    rows = _rows(sink_db, db)
    assert 5 not in rows
    assert rows == {**{i: "src" for i in range(1, 21) if i != 5}, 30: "outside"}
    assert (outcome.upserted, outcome.deleted) == (19, 2)  # 21 had no source row; 5 again


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
            _reader(chunk, range(16, 21), set(), lambda: None, _facts(sink_db, table)),
            _holds({(i,) for i in range(1, 21)}),
        )
    finally:
        repair.close()
    rows = _rows(sink_db, db)
    assert all(rows[i] == "src" for i in range(16, 21))
    assert 21 not in rows  # selected downstream, no source row: removed
    assert rows[4] == "x"  # selected downstream only, the source has the row: kept
    assert rows[3] == "bad" and 5 not in rows  # outside the predicate: untouched
    assert rows[30] == "outside"


# --- what a chunk refuses, on tables defined so that writing would delete wrongly ---


def _repair(
    sink: MariaDBServer,
    table: TableName,
    chunk: SnapshotChunk,
    rows: list[dict[str, object]],
    keys: set[tuple[object, ...]],
    source: TableName,
    predicate: str | None = None,
) -> None:
    """The chunk of ``table``, the source holding ``rows`` (selected) and ``keys`` (all),
    its table defined as ``source`` is (a table on the same server)."""
    conn = sink.connect()
    schema = load_table_schema(conn, table)
    conn.close()
    facts = _facts(sink, source)
    repair = RangeRepair(parse_sink_uri(sink.uri), "cf")  # type: ignore[arg-type]
    try:
        repair.repair(
            schema,
            chunk,
            predicate,
            lambda: RepairRead(chunk, rows, keys, set(), LOW, HIGH, facts),
            _holds(keys),
        )
    finally:
        repair.close()


def test_a_key_collated_otherwise_downstream_is_refused_and_nothing_deleted(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    execute(
        sink_db,
        f"CREATE TABLE `{db}`.c (k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.c_src (k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.c VALUES ('B', 1), ('c', 2)",
    )
    table = TableName(db, "c")
    # the source (utf8mb4_bin) splits at 'a': 'B' < 'a' is chunk 0; chunk 1 holds 'c'
    # only, while `k >= 'a'` downstream (general_ci) holds 'B' as well
    chunk = SnapshotChunk(table, 1, "k", "a", None)
    with pytest.raises(SinkError) as raised:
        _repair(sink_db, table, chunk, [{"k": "c", "v": 2}], {("c",)}, TableName(db, "c_src"))
    message = str(raised.value)
    assert "utf8mb4_bin on the source" in message, message
    assert "utf8mb4_general_ci downstream" in message and "nothing written" in message
    assert dict(execute(sink_db, f"SELECT k, v FROM `{db}`.c")) == {"B": 1, "c": 2}


@pytest.mark.parametrize("engine", ["MyISAM", "Aria", "MEMORY"])
def test_a_downstream_engine_without_row_locks_is_refused(
    sink_db: MariaDBServer, sink_database: str, engine: str
) -> None:
    db = sink_database
    execute(
        sink_db,
        f"CREATE TABLE `{db}`.m (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE={engine}",
        f"CREATE TABLE `{db}`.m_src (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB",
        f"INSERT INTO `{db}`.m VALUES (1, 'old'), (21, 'extra')",
    )
    table = TableName(db, "m")
    chunk = SnapshotChunk(table, 0, "id", None, 25)
    with pytest.raises(SinkError) as raised:
        _repair(sink_db, table, chunk, [{"id": 1, "v": "src"}], {(1,)}, TableName(db, "m_src"))
    assert f"uses the {engine} engine" in str(raised.value), raised.value
    assert "needs InnoDB" in str(raised.value)
    assert dict(execute(sink_db, f"SELECT id, v FROM `{db}`.m")) == {1: "old", 21: "extra"}


def test_a_unique_key_besides_the_primary_key_is_refused(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    execute(
        sink_db,
        f"CREATE TABLE `{db}`.u (id INT PRIMARY KEY, email VARCHAR(20) UNIQUE)",
        f"INSERT INTO `{db}`.u VALUES (900, 'x')",  # damaged: the source has 900 'z'
    )
    table = TableName(db, "u")
    # --where "id < 100": REPLACE (5, 'x') would remove row 900, outside the predicate
    chunk = SnapshotChunk(table, 0, "id", None, 1000)
    with pytest.raises(SinkError) as raised:
        _repair(
            sink_db,
            table,
            chunk,
            [{"id": 5, "email": "x"}],
            {(5,), (900,)},
            table,
            "`id` < 100",
        )
    message = str(raised.value)
    assert "unique key besides its row key (id)" in message and "email" in message, message
    assert dict(execute(sink_db, f"SELECT id, email FROM `{db}`.u")) == {900: "x"}


def test_a_unique_key_on_the_source_only_is_refused(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    execute(
        sink_db,
        f"CREATE TABLE `{db}`.u2 (id INT PRIMARY KEY, email VARCHAR(20))",
        f"CREATE TABLE `{db}`.u2_src (id INT PRIMARY KEY, email VARCHAR(20) UNIQUE)",
        f"INSERT INTO `{db}`.u2 VALUES (1, 'a'), (7, 'extra')",
    )
    table = TableName(db, "u2")
    chunk = SnapshotChunk(table, 0, "id", None, 100)
    with pytest.raises(SinkError) as raised:
        _repair(sink_db, table, chunk, [{"id": 1, "email": "a"}], {(1,)}, TableName(db, "u2_src"))
    assert "on the source" in str(raised.value) and "email" in str(raised.value)
    assert dict(execute(sink_db, f"SELECT id, email FROM `{db}`.u2")) == {1: "a", 7: "extra"}


def test_a_case_sensitive_key_removes_the_other_spelling(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    execute(
        sink_db,
        f"CREATE TABLE `{db}`.s (k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.s VALUES ('A', 1), ('a', 2), ('b', 3)",
    )
    table = TableName(db, "s")
    chunk = SnapshotChunk(table, 0, "k", None, None)
    source = [{"k": "a", "v": 20}, {"k": "b", "v": 30}]
    _repair(sink_db, table, chunk, source, {("a",), ("b",)}, table)
    # 'A' is another row than 'a' under utf8mb4_bin, and the source has none: removed
    assert dict(execute(sink_db, f"SELECT k, v FROM `{db}`.s")) == {"a": 20, "b": 30}


def test_a_linguistic_key_keeps_a_row_its_collation_calls_the_source_s(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    db = sink_database
    execute(
        sink_db,
        f"CREATE TABLE `{db}`.g (k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.g VALUES ('ß', 1), ('q', 1)",
    )
    table = TableName(db, "g")
    chunk = SnapshotChunk(table, 0, "k", None, None)
    # 'ß' = 's' in utf8mb4_general_ci (folding alone does not know it): the source has
    # that row ('s', v 0: the predicate leaves it out), so only 'q' is removed
    _repair(sink_db, table, chunk, [], {("s",)}, table, "`v` = 1")
    assert dict(execute(sink_db, f"SELECT k, v FROM `{db}`.g")) == {"ß": 1}
