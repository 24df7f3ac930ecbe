"""Canonical values (cdc.typeconv) written by the MySQL sink's own literal rendering, by a
lane's LOAD DATA of its upserts, and by a snapshot chunk's LOAD DATA file, come back
identical through a snapshot SELECT, and generated columns are left to the server."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pymysql
import pytest
from testkit import execute

from cdc import typeconv
from cdc.model import Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.mysql import MySQLSink
from cdc.sink.mysql.chunkload import ChunkLoader
from cdc.sink.registry import parse_sink_uri
from cdc.typeconv import RawDate, RawDateTime

pytestmark = pytest.mark.integration

DDL = """CREATE TABLE {name} (
  id INT PRIMARY KEY,
  bi BIGINT UNSIGNED, de DECIMAL(12,3), f FLOAT, d DOUBLE,
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), yr YEAR,
  c CHAR(10), vc VARCHAR(40), tx TEXT, l1 VARCHAR(20) CHARACTER SET latin1,
  bn BINARY(4), vb VARBINARY(10), bl BLOB,
  en ENUM('a','é','b c'), st SET('x','y','z'), bt BIT(12), js JSON,
  doubled BIGINT AS (id * 2) VIRTUAL, stored VARCHAR(50) AS (CONCAT(vc, '!')) STORED
) DEFAULT CHARSET=utf8mb4"""

ROWS = [
    {
        "id": 1,
        "bi": 2**64 - 1,
        "de": Decimal("-123456789.125"),
        "f": 0.10000000149011612,
        "d": 0.1,
        "dt": date(2024, 2, 29),
        "dtm": datetime(2024, 5, 31, 23, 59, 59, 999999),
        "ts": datetime(2038, 1, 19, 3, 14, 7, 123456, tzinfo=UTC),
        "tm": -timedelta(hours=838, minutes=59, seconds=59),
        "yr": 2155,
        "c": "ab",
        "vc": "quote ' \" back \\ nul \x00 😀",
        "tx": "line\nbreak\r\ttab \x1a",
        "l1": "é€\x81",
        "bn": b"a\x00\x00\x00",
        "vb": b"\x00\xff'\\",
        "bl": bytes(range(256)),
        "en": "é",
        "st": frozenset({"x", "z"}),
        "bt": 4095,
        "js": '{"a":  [1, 2.5], "b": "\\u00e9"}',
    },
    {
        "id": 2,
        "bi": 0,
        "de": Decimal("0.000"),
        "f": -3.4028234663852886e38,
        "d": -1e308,
        "dt": RawDate(0, 0, 0),
        "dtm": RawDateTime(2024, 0, 15, 10, 0, 0, 5),
        "ts": RawDateTime(0, 0, 0),
        "tm": timedelta(microseconds=1),
        "yr": 0,
        "c": "",
        "vc": "",
        "tx": "",
        "l1": "",
        "bn": b"\x00\x00\x00\x00",
        "vb": b"",
        "bl": b"",
        "en": "",
        "st": frozenset(),
        "bt": 0,
        "js": "null",
    },
]
ROWS.append({"id": 3, **dict.fromkeys(name for name in ROWS[0] if name != "id")})  # all NULL


def create_types_table(sink_db: MariaDBServer, table: TableName) -> TableSchema:
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(DDL.format(name=table.quoted()))
        return load_table_schema(conn, table)
    finally:
        conn.close()


def read_back(sink_db: MariaDBServer, schema: TableSchema) -> list[dict[str, Any]]:
    reader = pymysql.connect(
        host=sink_db.host,
        port=sink_db.port,
        user=sink_db.user,
        password=sink_db.password,
        **typeconv.snapshot_connect_kwargs(),
    )
    try:
        with reader.cursor() as cur:
            cur.execute(
                f"SELECT {typeconv.select_list(schema.columns)} FROM {schema.name.quoted()} "
                "ORDER BY id"
            )
            fetched = cur.fetchall()
    finally:
        reader.close()
    convert = typeconv.row_converter(schema.columns, "select")
    names = schema.column_names
    return [dict(zip(names, convert(row), strict=True)) for row in fetched]


def assert_rows_written(got: list[dict[str, Any]]) -> None:
    assert [g["id"] for g in got] == [1, 2, 3]
    for want, have in zip(ROWS, got, strict=True):
        assert {k: have[k] for k in want} == want
        assert have["doubled"] == want["id"] * 2
        assert have["stored"] == (None if want["vc"] is None else want["vc"] + "!")


def com_load(server: MariaDBServer) -> int:
    """LOAD DATA statements the downstream has run since it started."""
    ((_, value),) = execute(server, "SHOW GLOBAL STATUS LIKE 'Com_load'")
    return int(value)


@pytest.mark.parametrize(
    ("query", "loads"),
    [("&load-data-rows=0", False), ("&load-data-rows=1", True)],
    ids=["statements", "load-data"],
)
def test_every_type_round_trips_through_the_sink(
    sink_db: MariaDBServer, sink_database: str, query: str, loads: bool
) -> None:
    table = TableName(sink_database, "types")
    schema = create_types_table(sink_db, table)
    assert [c.name for c in schema.columns if c.generated] == ["doubled", "stored"]
    changes = []
    for n, row in enumerate(ROWS):
        # images carry the generated columns' values, as the binlog does; wrong ones here
        image = {**row, "doubled": -1, "stored": "not written"}
        changes.append(
            RowChange(table, Op.READ, None, image, (row["id"],), Position("b.000001", n))
        )
    # and an update of row 1 to itself through a key change and back
    moved = {**changes[0].after, "id": 10}
    changes.append(
        RowChange(table, Op.UPDATE, changes[0].after, moved, (10,), Position("b.000001", 5))
    )
    changes.append(
        RowChange(table, Op.UPDATE, moved, changes[0].after, (1,), Position("b.000001", 6))
    )
    uri = parse_sink_uri(sink_db.uri + "?worker-count=3" + query)
    before = com_load(sink_db)
    sink = MySQLSink(uri, lambda _: schema, "types-test")
    try:
        sink.write_rows(changes)
        assert sink.flush() == Position("b.000001", 6)
    finally:
        sink.close()
    assert (com_load(sink_db) > before) is loads
    assert_rows_written(read_back(sink_db, schema))


def test_every_type_round_trips_through_a_chunk_load(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    table = TableName(sink_database, "types")
    schema = create_types_table(sink_db, table)
    stale = [{**row, "vc": "stale", "bl": b"old", "doubled": 0, "stored": "x"} for row in ROWS]
    rows = [{**row, "doubled": -1, "stored": "not written"} for row in ROWS]
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "types-test")
    try:
        assert loader.load(schema, stale)
        # a chunk written again (a retried task) replaces each key's row
        assert loader.load(schema, rows)
        assert loader.load(schema, [])
    finally:
        loader.close()
    assert_rows_written(read_back(sink_db, schema))


def test_a_downstream_refusing_local_files_is_said_once_and_left_to_statements(
    sink_db: MariaDBServer, sink_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    table = TableName(sink_database, "types")
    schema = create_types_table(sink_db, table)
    admin = sink_db.connect()
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "types-test")
    try:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL local_infile = 0")
        assert not loader.load(schema, ROWS[:1])
        assert not loader.load(schema, ROWS[1:])
    finally:
        with admin.cursor() as cur:
            cur.execute("SET GLOBAL local_infile = 1")
        admin.close()
        loader.close()
    assert read_back(sink_db, schema) == []
    refusals = [r for r in caplog.records if "LOAD DATA LOCAL INFILE" in r.getMessage()]
    assert len(refusals) == 1
    assert "local_infile=ON" in refusals[0].getMessage()
