"""Event filters apply to snapshot rows as to inserts, in the Spark tasks, for every sink.

Two tables: ``items`` under ``ignore-event = ["insert"]`` and ``orders`` under
``ignore-insert-value-expr = "price > 100"``. A snapshot read is the insert
that created its row, so the first table copies nothing and the second only
its cheap rows: into MariaDB (LOAD DATA, and the statements used when the
downstream refuses local files), into a file sink's chunk files, and into the
blackhole sink, whose row counts show the filter runs before counting.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.config.changefeed import EventFilterRule
from cdc.filter.event_filter import EventFilter
from cdc.model.schema import TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file import FileSink, FileSinkReader
from cdc.sink.registry import parse_sink_uri
from cdc.snapshot import SnapshotChunk, split_table
from sparkjobs.snapshot import SinkWriter, run_chunks

pytestmark = pytest.mark.integration

TABLES_SQL = (
    "CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(20))",
    "CREATE TABLE {db}.orders (id INT PRIMARY KEY, price INT)",
)
CHEAP = list(range(1, 21))  # orders.price = id * 5: ids 1..20 cost at most 100


def events(db: str) -> EventFilter:
    return EventFilter(
        (
            EventFilterRule(matcher=(f"{db}.items",), ignore_event=("insert",)),
            EventFilterRule(matcher=(f"{db}.orders",), ignore_insert_value_expr="price > 100"),
        )
    )


@pytest.fixture
def tables(src: Any) -> tuple[dict[TableName, TableSchema], list[SnapshotChunk]]:
    db = f"`{src.db}`"
    src.execute(
        *(sql.format(db=db) for sql in TABLES_SQL),
        f"INSERT INTO {db}.items SELECT seq, CONCAT('n', seq) FROM seq_1_to_40",
        f"INSERT INTO {db}.orders SELECT seq, seq * 5 FROM seq_1_to_40",
    )
    schemas = {schema.name: schema for schema in (src.schema("items"), src.schema("orders"))}
    chunks = [c for s in schemas.values() for c in split_table(src.snap, s, chunk_size=15)]
    return schemas, chunks


def counts(outcomes: list[Any], chunks: list[SnapshotChunk]) -> dict[str, int]:
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    rows: dict[str, int] = {}
    for outcome, chunk in zip(outcomes, chunks, strict=True):
        rows[chunk.table.table] = rows.get(chunk.table.table, 0) + outcome.row_count
    return rows


@pytest.fixture
def downstream(sink_db: MariaDBServer, src: Any) -> Iterator[Any]:
    conn = sink_db.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{src.db}`")
        for sql in TABLES_SQL:
            cur.execute(sql.format(db=f"`{src.db}`"))
    yield conn
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{src.db}`")
    conn.close()


def ids(conn: Any, table: str) -> list[int]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {table} ORDER BY id")
        return [row[0] for row in cur.fetchall()]


@pytest.mark.parametrize("local_infile", ["ON", "OFF"], ids=["load-data", "statements"])
def test_mariadb_sink_gets_only_the_rows_the_filter_keeps(
    spark: Any,
    src: Any,
    tables: Any,
    sink_db: MariaDBServer,
    downstream: Any,
    local_infile: str,
) -> None:
    schemas, chunks = tables
    with downstream.cursor() as cur:
        cur.execute(f"SET GLOBAL local_infile = {local_infile}")
    try:
        writer = SinkWriter(sink_db.uri, f"cf-filter-{local_infile.lower()}")
        outcomes = run_chunks(spark, src.server.uri, schemas, chunks, writer, events=events(src.db))
    finally:
        with downstream.cursor() as cur:
            cur.execute("SET GLOBAL local_infile = ON")
    assert counts(outcomes, chunks) == {"items": 0, "orders": 20}
    assert ids(downstream, f"`{src.db}`.items") == []
    assert ids(downstream, f"`{src.db}`.orders") == CHEAP


def test_file_sink_chunk_files_hold_only_the_rows_the_filter_keeps(
    spark: Any, src: Any, tables: Any, tmp_path: Path
) -> None:
    schemas, chunks = tables
    text = f"file://{tmp_path}/out?protocol=csv"
    FileSink(parse_sink_uri(text), schemas.__getitem__, "cf-filter-files").close()  # type: ignore[arg-type]
    outcomes = run_chunks(
        spark,
        src.server.uri,
        schemas,
        chunks,
        SinkWriter(text, "cf-filter-files"),
        events=events(src.db),
    )
    assert counts(outcomes, chunks) == {"items": 0, "orders": 20}
    rows = list(FileSinkReader(tmp_path / "out").snapshot_rows())
    assert {change.table.table for change in rows} == {"orders"}
    assert sorted(change.after["id"] for change in rows) == CHEAP


def test_blackhole_counts_only_the_rows_the_filter_keeps(spark: Any, src: Any, tables: Any) -> None:
    schemas, chunks = tables
    writer = SinkWriter("blackhole://", "cf-filter-blackhole")
    outcomes = run_chunks(spark, src.server.uri, schemas, chunks, writer, events=events(src.db))
    assert counts(outcomes, chunks) == {"items": 0, "orders": 20}
    # without an event filter every row is read and counted
    outcomes = run_chunks(spark, src.server.uri, schemas, chunks, writer)
    assert counts(outcomes, chunks) == {"items": 40, "orders": 40}


@pytest.mark.parametrize("clear_ranges", [True, False])
def test_a_chunk_empties_its_key_range_unless_deletes_may_be_dropped(
    spark: Any, src: Any, tables: Any, sink_db: MariaDBServer, downstream: Any, clear_ranges: bool
) -> None:
    """A chunk's rows replace its range downstream, so a chunk read twice leaves exactly
    its second read; a table whose deletes the filter may drop keeps rows the source no
    longer has, as its binlog deletes would have."""
    schemas, chunks = tables
    items = f"`{src.db}`.items"
    with downstream.cursor() as cur:
        cur.execute(f"INSERT INTO {items} VALUES (1000, 'gone at the source'), (7, 'stale')")
    writer = SinkWriter(sink_db.uri, f"cf-clear-{clear_ranges}", clear_ranges=clear_ranges)
    outcomes = run_chunks(spark, src.server.uri, schemas, chunks, writer)
    assert counts(outcomes, chunks) == {"items": 40, "orders": 40}
    expected = list(range(1, 41)) + ([] if clear_ranges else [1000])
    assert ids(downstream, items) == expected
    with downstream.cursor() as cur:
        cur.execute(f"SELECT name FROM {items} WHERE id = 7")
        assert cur.fetchone() == ("n7",)
