"""The lean copy path (cdc.snapshot.streamed): a chunk read as the source's own text lines
straight into the downstream's LOAD DATA, against real servers.

Every type the path takes round-trips exactly (the same canonical values the values path
reads back), in blocks smaller than the chunk; binlog changes between the watermarks are
applied after the lines and leave the chunk as it was at its high watermark; the types
and keys it does not take are named.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from conftest import Source
from testkit import execute

from cdc.model import Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.mysql import MySQLSink
from cdc.sink.mysql.chunkload import ChunkLoader, LineLoad
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.snapshot import textlines
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.reader import ChunkHooks
from cdc.snapshot.streamed import read_chunk_lines
from cdc.snapshot.textlines import (
    bare_reason,
    line_select,
    not_lean,
    read_chunk_text,
    read_lines,
)
from cdc.typeconv import RawDate, RawDateTime

pytestmark = pytest.mark.integration

DDL = """CREATE TABLE {name} (
  id INT PRIMARY KEY,
  bi BIGINT UNSIGNED, de DECIMAL(12,3),
  dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), yr YEAR,
  c CHAR(10), vc VARCHAR(40), tx TEXT, l1 VARCHAR(20) CHARACTER SET latin1,
  bn BINARY(4), vb VARBINARY(10), bl BLOB,
  st SET('x','y','z'), bt BIT(12), js JSON,
  doubled BIGINT AS (id * 2) VIRTUAL, stored VARCHAR(50) AS (CONCAT(vc, '!')) STORED
) DEFAULT CHARSET=utf8mb4"""

ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "bi": 2**64 - 1,
        "de": Decimal("-123456789.125"),
        "dt": date(2024, 2, 29),
        "dtm": datetime(2024, 5, 31, 23, 59, 59, 999999),
        "ts": datetime(2038, 1, 19, 3, 14, 7, 123456, tzinfo=UTC),
        "tm": -timedelta(hours=838, minutes=59, seconds=59),
        "yr": 2155,
        "c": "ab",
        "vc": "quote ' \" back \\ nul \x00 😀 \\N",
        "tx": "line\nbreak\r\ttab \x1a \\t",
        "l1": "é€\x81",
        "bn": b"a\x00\x00\x00",
        "vb": b"\x00\xff'\\\t\n",
        "bl": bytes(range(256)),
        "st": frozenset({"x", "z"}),
        "bt": 4095,
        "js": '{"a":  [1, 2.5], "b": "\\u00e9\\n"}',
    },
    {
        "id": 2,
        "bi": 0,
        "de": Decimal("0.000"),
        "dt": RawDate(0, 0, 0),
        "dtm": RawDateTime(2024, 0, 15, 10, 0, 0, 5),
        "ts": RawDateTime(0, 0, 0),
        "tm": timedelta(microseconds=1),
        "yr": 0,
        "c": "",
        "vc": "\\",
        "tx": "",
        "l1": "",
        "bn": b"\x00\x00\x00\x00",
        "vb": b"",
        "bl": b"\\",
        "st": frozenset(),
        "bt": 0,
        "js": "null",
    },
]
ROWS.append({"id": 3, **dict.fromkeys(name for name in ROWS[0] if name != "id")})  # all NULL
ROWS.extend({**ROWS[0], "id": n, "vc": f"row {n}\t\n"} for n in range(4, 200))
# text holding one character to escape each: tab, newline, backslash
ONE_EACH = {**ROWS[2], "id": 200, "c": "a\tb", "tx": "a\nb", "vc": "a\\b"}
ROWS.append(ONE_EACH)


def write(server: MariaDBServer, schema: TableSchema, rows: list[dict[str, Any]]) -> None:
    """``rows`` into ``server`` through the MySQL sink (exact canonical values)."""
    changes = [
        RowChange(schema.name, Op.READ, None, row, (row["id"],), Position("b.000001", n))
        for n, row in enumerate(rows)
    ]
    sink = MySQLSink(parse_sink_uri(server.uri), lambda _: schema, "lines-test")
    try:
        sink.write_rows(changes)
        sink.flush()
    finally:
        sink.close()


@pytest.fixture
def downstream(src: Source, sink_db: MariaDBServer) -> Iterator[MariaDBServer]:
    """The sink server with a database of the source database's name, dropped afterwards."""
    execute(sink_db, f"CREATE DATABASE `{src.db}`")
    try:
        yield sink_db
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{src.db}`")


def prepared(src: Source, sink_db: MariaDBServer) -> TableSchema:
    """The types table on the source with ROWS, and empty downstream."""
    src.execute(DDL.format(name=src.table("types").quoted()))
    schema = src.schema("types")
    write(src.server, schema, ROWS)
    uri = parse_sink_uri(sink_db.uri)
    kind_of(uri).prepare_table(uri, src.snap, schema)
    return schema


def downstream_rows(sink_db: MariaDBServer, schema: TableSchema, src: Source) -> list[Any]:
    conn = sink_db.connect()
    try:
        local = load_table_schema(conn, schema.name)
    finally:
        conn.close()
    reader = Source(sink_db, schema.name.schema, src.uri, src.info, src.admin, sink_db.connect())
    try:
        return reader.rows(local, "1=1 ORDER BY id")
    finally:
        reader.snap.close()


def test_every_lean_type_round_trips_as_lines_in_blocks(
    src: Source, downstream: MariaDBServer
) -> None:
    sink_db = downstream
    target_schema = prepared(src, sink_db)
    source_schema = src.schema("types")
    chunk = SnapshotChunk(source_schema.name, 0, "id")
    assert not_lean(source_schema, chunk) is None
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "lines-test")
    blocks: list[int] = []
    try:
        target = LineLoad(loader, target_schema, chunk, clear_range=True)

        def block(data: bytes, rows: int, bare: bool) -> None:
            blocks.append(rows)
            target.block(data, rows, bare)

        sql, params = line_select(source_schema, chunk)
        with src.snap.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        assert read_lines(src.snap, sql, params, block, block_bytes=4096) == len(ROWS)
        src.snap.commit()
    finally:
        loader.close()
    assert len(blocks) > 3 and sum(blocks) == len(ROWS)
    want = src.rows(source_schema, "1=1 ORDER BY id")
    assert downstream_rows(sink_db, target_schema, src) == want
    assert want[1]["vc"] == "\\" and want[2]["vc"] is None  # escapes and NULLs did occur


def read_both_ways(
    src: Source, schema: TableSchema, chunk: SnapshotChunk, grouped_bytes: int
) -> tuple[list[bytes], list[bytes]]:
    """The chunk's blocks from ``read_chunk_text`` and from ``read_lines``, in one snapshot."""
    grouped: list[bytes] = []
    streamed: list[bytes] = []
    with src.snap.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    try:
        rows = read_chunk_text(
            src.snap,
            schema,
            chunk,
            lambda data, _rows, _bare: grouped.append(data),
            grouped_bytes=grouped_bytes,
            block_bytes=4096,
        )
        sql, params = line_select(schema, chunk)
        assert read_lines(src.snap, sql, params, lambda d, _r, _b: streamed.append(d), 4096) == rows
    finally:
        src.snap.commit()
        textlines._UNGROUPED.discard(str(schema.name))
    return grouped, streamed


def lines(blocks: list[bytes]) -> list[bytes]:
    """The lines of ``blocks`` (each ends with a newline), sorted."""
    data = b"".join(blocks)
    assert data.endswith(b"\n")
    return sorted(data[:-1].split(b"\n"))


def test_a_chunk_comes_as_one_value_with_the_lines_read_row_by_row(
    src: Source, downstream: MariaDBServer
) -> None:
    """Every lean type: GROUP_CONCAT's one value holds exactly the lines the rows give."""
    prepared(src, downstream)
    schema = src.schema("types")
    grouped, streamed = read_both_ways(src, schema, SnapshotChunk(schema.name, 0, "id"), 1 << 20)
    assert len(grouped) == 1 and len(streamed) > 3
    assert lines(grouped) == lines(streamed) and len(lines(grouped)) == len(ROWS)


def test_lines_escape_text_whatever_the_servers_regex_flags(
    src: Source, downstream: MariaDBServer
) -> None:
    """A text value is escaped when it holds a tab, newline or backslash, as a REGEXP
    tests it: under ``default_regex_flags = EXTENDED_MORE``, which ignores a tab written
    as itself in a character class, the lines are still the same."""
    prepared(src, downstream)
    schema = src.schema("types")
    chunk = SnapshotChunk(schema.name, 0, "id")
    plain, _ = read_both_ways(src, schema, chunk, 1 << 20)
    with src.snap.cursor() as cur:
        cur.execute("SET SESSION default_regex_flags = 'EXTENDED_MORE'")
    try:
        extended, _ = read_both_ways(src, schema, chunk, 1 << 20)
    finally:
        with src.snap.cursor() as cur:
            cur.execute("SET SESSION default_regex_flags = DEFAULT")
    assert lines(extended) == lines(plain)
    one_each = next(line for line in lines(plain) if line.startswith(b"200\t"))
    assert b"\ta\\tb\ta\\\\b\ta\\nb\t" in one_each  # c, vc and tx, escaped


@pytest.mark.parametrize("short", [1, 2, 200])
def test_a_chunk_longer_than_one_value_is_read_row_by_row(
    src: Source, downstream: MariaDBServer, short: int
) -> None:
    """GROUP_CONCAT cuts its value at the limit without an error; a cut inside the last
    line leaves as many lines as rows, so the length decides: the lines are read again."""
    prepared(src, downstream)
    schema = src.schema("types")
    chunk = SnapshotChunk(schema.name, 0, "id")
    whole = len(b"".join(read_both_ways(src, schema, chunk, 1 << 20)[0]))  # with its newline
    grouped, streamed = read_both_ways(src, schema, chunk, whole - short)
    assert len(grouped) > 3 and lines(grouped) == lines(streamed)
    assert len(lines(grouped)) == len(ROWS)


def test_binlog_changes_between_the_watermarks_are_applied_after_the_lines(
    src: Source, downstream: MariaDBServer
) -> None:
    sink_db = downstream
    target_schema = prepared(src, sink_db)
    source_schema = src.schema("types")
    table = src.table("types").quoted()
    chunk = SnapshotChunk(source_schema.name, 1, "id", 2, 100)
    writes = [
        f"DELETE FROM {table} WHERE id = 50",
        f"UPDATE {table} SET vc = 'moved in' , id = 50 WHERE id = 150",  # enters the chunk
        f"UPDATE {table} SET id = 1200 WHERE id = 10",  # leaves it
        f"DELETE FROM {table} WHERE id IN (11, 99)",
        f"UPDATE {table} SET tx = 'changed\\t' WHERE id = 12",
        f"INSERT INTO {table} (id, vc) VALUES (99, 'new')",
        f"INSERT INTO {table} (id, vc) VALUES (5000, 'outside')",
    ]

    def write_between(_chunk: SnapshotChunk, _low: Position) -> None:
        src.execute(*writes)

    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "lines-test")
    try:
        target = LineLoad(loader, target_schema, chunk, clear_range=True)
        done = read_chunk_lines(
            src.uri,
            src.info,
            source_schema,
            chunk,
            target,
            conn=src.snap,
            hooks=ChunkHooks(after_low_watermark=write_between),
        )
    finally:
        loader.close()
    assert done.high_watermark.key() > done.low_watermark.key()
    assert done.folded == 7
    want = src.rows(source_schema, "id >= 2 AND id < 100 ORDER BY id")
    assert done.row_count == len(want)
    assert downstream_rows(sink_db, target_schema, src) == want


@pytest.mark.parametrize("grouped_bytes", [1 << 20, 0], ids=["one-value", "row-by-row"])
def test_binary_values_stay_bytes_beside_text_of_collations_that_do_not_combine(
    src: Source, downstream: MariaDBServer, grouped_bytes: int
) -> None:
    """Found by the randomized test (a variety soak, seed 416): with a utf8mb4_unicode_ci
    column and one in utf8mb4_general_ci, CONCAT_WS gave text instead of bytes, and
    every byte sequence of a binary column that is not UTF-8 reached the downstream
    as '?' (0xC7C9B990FF as 0x3FC9B93F3F), the changefeed saying nothing."""
    name = src.table("mixed").quoted()
    src.execute(
        f"CREATE TABLE {name} (id INT PRIMARY KEY, u VARCHAR(20) COLLATE utf8mb4_unicode_ci, "
        "g CHAR(10) COLLATE utf8mb4_general_ci, l VARCHAR(10) CHARACTER SET latin1, j JSON, "
        "bl BLOB, bn BINARY(4), vb VARBINARY(300))"
    )
    src.execute(
        f"INSERT INTO {name} VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        params=(
            1,
            "é\tü",
            "ß",
            "é",
            '{"a": "ü"}',
            bytes(range(256)),
            b"\xc7\xc9\xb9\x90",
            bytes(range(255, -1, -1)),
        ),
    )
    src.execute(f"INSERT INTO {name} (id, bl) VALUES (2, 0xc7c9b990ff)")
    schema = src.schema("mixed")
    uri = parse_sink_uri(downstream.uri)
    kind_of(uri).prepare_table(uri, src.snap, schema)
    chunk = SnapshotChunk(schema.name, 0, "id")
    loader = ChunkLoader(uri, "lines-test")
    try:
        target = LineLoad(loader, schema, chunk, clear_range=True)
        with src.snap.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        assert (
            read_chunk_text(src.snap, schema, chunk, target.block, grouped_bytes=grouped_bytes) == 2
        )
        src.snap.commit()
    finally:
        loader.close()
        textlines._UNGROUPED.discard(str(schema.name))
    want = src.rows(schema, "1=1 ORDER BY id")
    assert want[0]["bl"] == bytes(range(256)) and want[1]["bl"] == b"\xc7\xc9\xb9\x90\xff"
    assert downstream_rows(downstream, schema, src) == want


@pytest.mark.parametrize(
    ("ddl", "key", "reason"),
    [
        ("id INT PRIMARY KEY, f FLOAT", "id", "column 'f' is float"),
        ("id INT PRIMARY KEY, e ENUM('a')", "id", "column 'e' is enum('a')"),
        ("id INT PRIMARY KEY, g GEOMETRY", "id", "column 'g' is geometry"),
        ("id INT PRIMARY KEY, k INT", "k", "chunk key 'k' is not the first column"),
        ("id INT, k INT", "k", "chunk key 'k' is not the first column"),
    ],
)
def test_tables_the_lean_path_does_not_take_are_named(
    src: Source, ddl: str, key: str, reason: str
) -> None:
    src.execute(f"CREATE TABLE {src.table('t').quoted()} ({ddl})")
    schema = src.schema("t")
    said = not_lean(schema, SnapshotChunk(TableName(src.db, "t"), 0, key))
    assert said is not None and said.startswith(reason)


BARE_DDL = """CREATE TABLE {name} (
  id INT PRIMARY KEY, k INT NOT NULL, de DECIMAL(12,3) NOT NULL, dt DATE NOT NULL,
  dtm DATETIME(6) NOT NULL, tm TIME(6) NOT NULL, yr YEAR NOT NULL,
  c CHAR(10) NOT NULL, vc VARCHAR(60) NOT NULL, tx TEXT NOT NULL,
  l1 VARCHAR(20) CHARACTER SET latin1 NOT NULL, st SET('x','y','z') NOT NULL,
  bt BIT(12) NOT NULL, js JSON NOT NULL, doubled BIGINT AS (id * 2) VIRTUAL
) DEFAULT CHARSET=utf8mb4"""

BARE_ROWS: list[dict[str, Any]] = [
    {
        "id": n,
        "k": -n,
        "de": Decimal("-123456789.125"),
        "dt": date(2024, 2, 29),
        "dtm": datetime(2024, 5, 31, 23, 59, 59, 999999),
        "tm": -timedelta(hours=838, minutes=59, seconds=59),
        "yr": 2155,
        "c": "ab",
        "vc": text,
        "tx": "line\nbreak\r\ttab \x1a \\t",
        "l1": "é€",
        "st": frozenset({"x", "z"}),
        "bt": 4095,
        "js": '{"a": "\\u00e9\\n"}',
    }
    for n, text in enumerate(
        ["NULL", "\\N", "", "\\", "a\tb\nc", "quote ' \" 😀", "trailing  ", "x" * 60], 1
    )
]


def load_bare(
    src: Source,
    downstream: MariaDBServer,
    rows: list[dict[str, Any]],
    grouped_bytes: int,
    ddl: str = BARE_DDL,
) -> tuple[TableSchema, list[bool]]:
    """The bare-lines table (``ddl``) with ``rows`` on the source, its one chunk read with
    ``read_chunk_text`` into the downstream; the bareness of each block loaded."""
    src.execute(ddl.format(name=src.table("bare").quoted()))
    schema = src.schema("bare")
    write(src.server, schema, rows)
    uri = parse_sink_uri(downstream.uri)
    kind_of(uri).prepare_table(uri, src.snap, schema)
    chunk = SnapshotChunk(schema.name, 0, "id")
    loader = ChunkLoader(uri, "lines-test")
    bare: list[bool] = []
    try:
        target = LineLoad(loader, schema, chunk, clear_range=True)

        def block(data: bytes, count: int, is_bare: bool) -> None:
            bare.append(is_bare)
            target.block(data, count, is_bare)

        with src.snap.cursor() as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        read = read_chunk_text(
            src.snap, schema, chunk, block, grouped_bytes=grouped_bytes, block_bytes=256
        )
        assert read == len(rows)
        src.snap.commit()
    finally:
        loader.close()
    return schema, bare


@pytest.fixture
def forget_tables(src: Source) -> Iterator[None]:
    """The read path the bare table took in this process, forgotten afterwards."""
    yield
    for seen in (textlines._NOT_BARE, textlines._UNGROUPED):
        seen.discard(str(src.table("bare")))


def test_a_table_without_nullable_or_binary_columns_comes_as_bare_lines(
    src: Source, downstream: MariaDBServer, forget_tables: None
) -> None:
    """No escapes: text holding tabs, newlines, backslashes, \\N and the word NULL goes
    as it is, loaded without an escape character, and arrives exactly."""
    schema, bare = load_bare(src, downstream, BARE_ROWS, 1 << 20)
    assert bare_reason(schema) is None
    assert bare == [True]
    want = src.rows(schema, "1=1 ORDER BY id")
    assert [row["vc"] for row in want[:5]] == ["NULL", "\\N", "", "\\", "a\tb\nc"]
    assert downstream_rows(downstream, schema, src) == want


def test_a_table_of_numbers_and_times_alone_comes_as_bare_lines(
    src: Source, downstream: MariaDBServer, forget_tables: None
) -> None:
    """No text column: the grouped value is still bytes."""
    ddl = "CREATE TABLE {name} (id INT PRIMARY KEY, k BIGINT NOT NULL, d DATETIME(3) NOT NULL)"
    rows = [{"id": n, "k": -(2**40) * n, "d": datetime(2024, 1, n, 1, 2, 3)} for n in (1, 2, 3)]
    schema, bare = load_bare(src, downstream, rows, 1 << 20, ddl)
    assert bare == [True]
    assert downstream_rows(downstream, schema, src) == src.rows(schema, "1=1 ORDER BY id")


@pytest.mark.parametrize("mark", ["\x1f", "\x1e", "a\x1fb\x1ec"], ids=["unit", "record", "both"])
def test_a_value_holding_a_bare_lines_mark_sends_the_table_to_escaped_lines(
    src: Source, downstream: MariaDBServer, forget_tables: None, mark: str
) -> None:
    """A bare line's marks in a value would cut it elsewhere: the marks are counted, the
    chunk is read again as escaped lines, and so are the table's later chunks."""
    rows = [*BARE_ROWS, {**BARE_ROWS[0], "id": 100, "vc": mark}]
    schema, bare = load_bare(src, downstream, rows, 1 << 20)
    assert bare == [False]
    assert str(schema.name) in textlines._NOT_BARE
    want = src.rows(schema, "1=1 ORDER BY id")
    assert want[-1]["vc"] == mark
    assert downstream_rows(downstream, schema, src) == want


def test_bare_lines_longer_than_one_value_are_read_row_by_row_escaped(
    src: Source, downstream: MariaDBServer, forget_tables: None
) -> None:
    schema, bare = load_bare(src, downstream, BARE_ROWS, 300)
    assert len(bare) > 1 and not any(bare)
    assert downstream_rows(downstream, schema, src) == src.rows(schema, "1=1 ORDER BY id")


@pytest.mark.parametrize(
    ("ddl", "reason"),
    [
        ("id INT PRIMARY KEY, n INT", "column 'n' is nullable"),
        ("id INT PRIMARY KEY, t TEXT", "column 't' is nullable"),
        ("id INT PRIMARY KEY, b VARBINARY(4) NOT NULL", "column 'b' is varbinary(4)"),
        ("id INT PRIMARY KEY, b BLOB NOT NULL", "column 'b' is blob"),
    ],
)
def test_tables_that_cannot_come_as_bare_lines_are_named(
    src: Source, ddl: str, reason: str
) -> None:
    src.execute(f"CREATE TABLE {src.table('t').quoted()} ({ddl})")
    assert bare_reason(src.schema("t")) == reason
