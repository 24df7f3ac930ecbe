"""No silent change of values downstream: a value the downstream column cannot hold fails the
MySQL sink (statement path, a lane's LOAD DATA and a snapshot chunk's) with a SinkError
naming the table, the column and the position, and nothing of the failed transaction is
committed; an existing downstream table narrower than the source is refused before its
snapshot; zero dates and the invalid ENUM value '' still replicate."""

from __future__ import annotations

import threading
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from testkit import execute

from cdc.logs import get_logger
from cdc.model import Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.base import SinkError
from cdc.sink.kind import DownstreamTableMismatch, SinkURI
from cdc.sink.mysql import MySQLSink, MySQLSinkOptions
from cdc.sink.mysql.chunkload import ChunkLoader
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.loadfile import LOCAL_FILE_NAME, load_statement
from cdc.sink.mysql.statements import Statement
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.typeconv import RawDate, RawDateTime

pytestmark = pytest.mark.integration

# What the source has: every value of these types must arrive unchanged.
SOURCE_DDL = (
    "CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(40), de DECIMAL(6,2), ti INT,"
    " en ENUM('a','b'), dt DATE, dtm DATETIME(6)) DEFAULT CHARSET=utf8mb4"
)
# What a careless downstream has: narrower v, fewer decimal places, a smaller integer.
NARROW_DDL = (
    "CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(3), de DECIMAL(6,1), ti TINYINT,"
    " en ENUM('a','b'), dt DATE, dtm DATETIME(6)) DEFAULT CHARSET=utf8mb4"
)


def rows(server: MariaDBServer, table: TableName) -> list[tuple[Any, ...]]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT id, v, de, ti, en, CAST(dt AS CHAR), CAST(dtm AS CHAR) "
                f"FROM {table.quoted()} ORDER BY id"
            )
            return list(cur.fetchall())
    finally:
        conn.close()


def source_schema(sink_db: MariaDBServer, database: str) -> TableSchema:
    """The source's schema of table `t` (made on a scratch table of the same server)."""
    scratch = TableName(database, "source_shape")
    execute(sink_db, SOURCE_DDL.format(name=scratch.quoted()))
    conn = sink_db.connect()
    try:
        shape = load_table_schema(conn, scratch)
    finally:
        conn.close()
    return TableSchema(TableName(database, "t"), shape.columns, shape.primary_key)


def row(key: int, **values: Any) -> dict[str, Any]:
    base = {"id": key, "v": "ok", "de": Decimal("1.00"), "ti": 1, "en": "a", "dt": None}
    return {**base, "dtm": None, **values}


def change(table: TableName, image: dict[str, Any], offset: int) -> RowChange:
    return RowChange(
        table, Op.CREATE, None, image, (image["id"],), Position("binlog.000007", offset)
    )


@pytest.fixture
def narrow(sink_db: MariaDBServer, sink_database: str) -> tuple[TableSchema, TableName]:
    schema = source_schema(sink_db, sink_database)
    execute(sink_db, NARROW_DDL.format(name=schema.name.quoted()))
    return schema, schema.name


# how a lane writes its upserts: multi-row statements, or one LOAD DATA from one row on
PATHS = pytest.mark.parametrize(
    "path", ["&load-data-rows=0", "&load-data-rows=1"], ids=["statements", "load-data"]
)


def write(
    sink_db: MariaDBServer, schema: TableSchema, images: list[dict[str, Any]], path: str = ""
) -> SinkError:
    # one lane: the rows go down in one transaction
    uri = parse_sink_uri(sink_db.uri + "?worker-count=1" + path)
    sink = MySQLSink(uri, lambda _: schema, "strict-test")
    try:
        sink.write_rows([change(schema.name, image, 100 + i) for i, image in enumerate(images)])
        with pytest.raises(SinkError) as failure:
            sink.flush()
        assert sink.flushed is None
        return failure.value
    finally:
        sink.close()


# --- (a) the lanes: statements or LOAD DATA ---------------------------------------------------


@PATHS
@pytest.mark.parametrize(
    ("bad", "column", "words"),
    [
        ({"v": "abcdef"}, "v", "Data too long for column 'v'"),
        ({"ti": 300}, "ti", "Out of range value for column 'ti'"),
        # strict mode leaves DECIMAL rounding a Note: only the warning read catches it
        ({"de": Decimal("2.25")}, "de", "Data truncated for column 'de'"),
    ],
)
def test_a_value_too_wide_for_the_downstream_column_fails_and_commits_nothing(
    sink_db: MariaDBServer,
    narrow: tuple[TableSchema, TableName],
    bad: dict[str, Any],
    column: str,
    words: str,
    path: str,
) -> None:
    schema, table = narrow
    # the good rows and the bad one go down in one transaction (and one statement)
    error = write(sink_db, schema, [row(1), row(2), row(3, **bad)], path)
    text = str(error)
    assert words + " at row 3" in text
    assert table.quoted() in error.statement
    assert error.statement.startswith("REPLACE" if path.endswith("=0") else "LOAD DATA")
    assert "binlog.000007:100 .. binlog.000007:102" in error.reason
    assert column in text
    assert rows(sink_db, table) == []


def test_a_lone_statement_with_a_rounded_value_is_rolled_back_too(
    sink_db: MariaDBServer, narrow: tuple[TableSchema, TableName]
) -> None:
    """One statement used to run in autocommit, committed before its warnings were seen."""
    schema, table = narrow
    error = write(sink_db, schema, [row(1, de=Decimal("9.99"))])
    assert "column(s) de" in error.reason and "binlog.000007:100" in error.reason
    assert rows(sink_db, table) == []


# --- (b) the snapshot chunk path (LOAD DATA LOCAL INFILE ... REPLACE) ------------------------


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({"v": "abcdef"}, "Data too long for column 'v' at row 3"),
        ({"ti": -200}, "Out of range value for column 'ti' at row 3"),
        ({"de": Decimal("2.25")}, "Data truncated for column 'de' at row 3"),
    ],
)
def test_a_chunk_with_a_value_too_wide_fails_naming_the_chunk_and_commits_nothing(
    sink_db: MariaDBServer,
    narrow: tuple[TableSchema, TableName],
    bad: dict[str, Any],
    words: str,
) -> None:
    schema, table = narrow
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "strict-test")
    where = "snapshot chunk db.t:4 (high watermark binlog.000007:4242)"
    try:
        with pytest.raises(SinkError) as failure:
            loader.load(schema, [row(1), row(2), row(3, **bad)], where=where)
    finally:
        loader.close()
    error = failure.value
    assert error.reason.startswith(where + ": ")
    assert words in error.reason
    assert table.quoted() in error.statement
    assert rows(sink_db, table) == []


def _raw_load(schema: TableSchema, verb: str) -> Statement:
    statement = load_statement(schema, [row(1), row(2, v="abcdef")], "2 rows")
    assert " REPLACE INTO TABLE " in statement.sql
    return replace(
        statement,
        sql=statement.sql.replace(" REPLACE INTO ", f" {verb} INTO "),
        description="a raw load",
    )


def test_load_data_replace_in_a_strict_session_refuses_a_too_long_value(
    sink_db: MariaDBServer, narrow: tuple[TableSchema, TableName], tmp_path: Path
) -> None:
    """The server's own answer, without the sink: strict mode makes REPLACE's data error
    an error (it is IGNORE, or MySQL's LOCAL without REPLACE, that downgrades it)."""
    schema, table = narrow
    statement = _raw_load(schema, "REPLACE")
    assert statement.local_file is not None
    path = tmp_path / "rows.tsv"
    path.write_bytes(statement.local_file.data)
    statement = replace(statement, sql=statement.sql.replace(LOCAL_FILE_NAME, str(path)))
    conn = sink_db.connect(local_infile=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
            with pytest.raises(pymysql.err.DataError) as refused:
                cur.execute(statement.sql)
            assert refused.value.args[0] == 1406
            cur.execute("SET SESSION sql_mode = ''")
            cur.execute(statement.sql)  # the old non-strict session: a warning only
            assert cur.warning_count == 1
    finally:
        conn.close()
    assert [r[1] for r in rows(sink_db, table)] == ["ok", "abc"]


def test_a_load_that_downgrades_errors_to_warnings_is_caught_by_the_warning_read(
    sink_db: MariaDBServer, narrow: tuple[TableSchema, TableName]
) -> None:
    schema, table = narrow
    statement = _raw_load(schema, "IGNORE")
    downstream = Downstream(
        parse_sink_uri(sink_db.uri).connection,
        MySQLSinkOptions(),
        get_logger(__name__),
        threading.Event(),
        read_timeout=30,
        local_infile=True,
    )
    try:
        with pytest.raises(SinkError) as failure:
            downstream.run([statement], transaction=False)
    finally:
        downstream.close()
    assert "Data truncated for column 'v' at row 2 (Warning 1265)" in failure.value.reason
    assert failure.value.statement == "a raw load"
    assert rows(sink_db, table) == []


# --- (c) an existing downstream table narrower than the source -------------------------------


def test_an_existing_downstream_table_too_narrow_is_refused_before_its_snapshot(
    source_db: MariaDBServer, sink_db: MariaDBServer, source_database: str, sink_database: str
) -> None:
    table = TableName(source_database, "t")
    execute(source_db, SOURCE_DDL.format(name=table.quoted()))
    execute(sink_db, f"CREATE DATABASE IF NOT EXISTS `{source_database}`")
    try:
        execute(sink_db, NARROW_DDL.format(name=table.quoted()))
        source = source_db.connect()
        try:
            schema = load_table_schema(source, table)
            with pytest.raises(DownstreamTableMismatch) as mismatch:
                _prepare(source, parse_sink_uri(sink_db.uri), schema)
            text = str(mismatch.value)
            assert str(table) in text
            assert "column 'v' is varchar(3) CHARACTER SET utf8mb4 downstream" in text
            assert "varchar(40) CHARACTER SET utf8mb4 on the source" in text
            assert "column 'de' is decimal(6,1) downstream but decimal(6,2)" in text
            assert "column 'ti' is tinyint(4) downstream but int(11)" in text
            assert "'en'" not in text and "'dt'" not in text
            assert "ALTER the downstream column(s)" in text
            # widened downstream: usable as it is
            execute(
                sink_db,
                f"ALTER TABLE {table.quoted()} MODIFY v VARCHAR(100),"
                " MODIFY de DECIMAL(10,3), MODIFY ti BIGINT",
            )
            sink = parse_sink_uri(sink_db.uri)
            assert _prepare(source, sink, schema) == "existing"
        finally:
            source.close()
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")


def test_a_binary_default_that_is_not_utf8_is_copied_byte_for_byte(
    source_db: MariaDBServer, sink_db: MariaDBServer, source_database: str, sink_database: str
) -> None:
    """SHOW CREATE TABLE shows a binary default as raw bytes; read as text the statement
    could not be decoded and no downstream table was made (the fuzz test's seed 2003)."""
    table = TableName(source_database, "bin")
    execute(
        source_db,
        f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY,"
        " b VARBINARY(8) NOT NULL DEFAULT 0x8810500c3aad289d, s VARCHAR(10) DEFAULT 'ü€',"
        " `名字` INT COMMENT 'ça')",
    )
    source = source_db.connect()
    try:
        schema = load_table_schema(source, table)
        assert _prepare(source, parse_sink_uri(sink_db.uri), schema) == "created"
        assert execute(source_db, "SELECT @@SESSION.character_set_results") != [(None,)]
    finally:
        source.close()
    try:
        for server in (source_db, sink_db):
            execute(server, f"INSERT INTO {table.quoted()} (id) VALUES (1)")
        wanted = [("8810500C3AAD289D", "C3BCE282AC")]
        for server in (source_db, sink_db):
            assert execute(server, f"SELECT HEX(b), HEX(s) FROM {table.quoted()}") == wanted
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")


def test_a_source_table_renamed_before_its_create_is_copied_is_a_lookup_error(
    source_db: MariaDBServer, sink_db: MariaDBServer, source_database: str
) -> None:
    """The anchor reads the schema, then copies SHOW CREATE TABLE: a rename in between was
    the driver's error 1146 and failed the changefeed, where the snapshot's anchor treats a
    missing table as gone before its snapshot (fuzz seed 2026)."""
    table = TableName(source_database, "moved")
    execute(source_db, f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY)")
    source = source_db.connect()
    try:
        schema = load_table_schema(source, table)
        execute(source_db, f"RENAME TABLE {table.quoted()} TO `{source_database}`.elsewhere")
        with pytest.raises(LookupError, match="no such table on the source"):
            _prepare(source, parse_sink_uri(sink_db.uri), schema)
    finally:
        source.close()
    created = "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = '{}'"
    assert execute(sink_db, created.format(source_database)) == [(0,)]


# --- (d) what a source may hold still replicates ------------------------------------------------

ODD = [
    row(1, dt=RawDate(0, 0, 0), dtm=RawDateTime(0, 0, 0)),
    row(2, dt=RawDate(2024, 0, 15), dtm=RawDateTime(2024, 2, 31, 10, 0, 0, 5), en=""),
    row(3, en=""),
]
ODD_BACK = [
    (1, "ok", Decimal("1.00"), 1, "a", "0000-00-00", "0000-00-00 00:00:00.000000"),
    (2, "ok", Decimal("1.00"), 1, "", "2024-00-15", "2024-02-31 10:00:00.000005"),
    (3, "ok", Decimal("1.00"), 1, "", None, None),
]


@PATHS
def test_zero_dates_and_the_invalid_enum_value_still_replicate_through_the_lanes(
    sink_db: MariaDBServer, sink_database: str, path: str
) -> None:
    schema = source_schema(sink_db, sink_database)
    execute(sink_db, SOURCE_DDL.format(name=schema.name.quoted()))
    uri = parse_sink_uri(sink_db.uri + "?worker-count=1" + path)
    sink = MySQLSink(uri, lambda _: schema, "strict-test")
    try:
        sink.write_rows([change(schema.name, image, 10 + i) for i, image in enumerate(ODD)])
        assert sink.flush() == Position("binlog.000007", 12)
    finally:
        sink.close()
    assert rows(sink_db, schema.name) == ODD_BACK


def test_zero_dates_and_the_invalid_enum_value_still_replicate_through_a_chunk(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    schema = source_schema(sink_db, sink_database)
    execute(sink_db, SOURCE_DDL.format(name=schema.name.quoted()))
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "strict-test")
    try:
        assert loader.load(schema, ODD)
    finally:
        loader.close()
    assert rows(sink_db, schema.name) == ODD_BACK


@PATHS
def test_the_invalid_enum_value_forgives_nothing_else_in_its_row(
    sink_db: MariaDBServer, narrow: tuple[TableSchema, TableName], path: str
) -> None:
    """The statement writing '' runs in the relaxed mode; a too-long value beside it is
    still a failure (a warning then, not an error)."""
    schema, table = narrow
    error = write(sink_db, schema, [row(1, en=""), row(2, en="", v="abcdef")], path)
    assert "Data truncated for column 'v' at row 2 (Warning 1265)" in error.reason
    assert "column(s) v" in error.reason
    assert rows(sink_db, table) == []
    loader = ChunkLoader(parse_sink_uri(sink_db.uri), "strict-test")
    try:
        with pytest.raises(SinkError) as failure:
            loader.load(schema, [row(1, en=""), row(2, en="", v="abcdef")])
    finally:
        loader.close()
    assert "Data truncated for column 'v' at row 2 (Warning 1265)" in failure.value.reason
    assert rows(sink_db, table) == []


def _prepare(source: Any, sink: SinkURI, schema: TableSchema) -> str:
    return kind_of(sink).prepare_table(sink, source, schema, replace=False)
