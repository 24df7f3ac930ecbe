"""The initial schema loader against a real MariaDB."""

from __future__ import annotations

import pytest

from cdc.model import Column, TableName
from cdc.schema import loader
from cdc.schema.loader import list_tables, load_schemas, load_table_schema

pytestmark = pytest.mark.integration


@pytest.fixture
def conn(source_db, source_database: str):
    connection = source_db.connect(database=source_database)
    yield connection
    connection.close()


def execute(conn, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def questions(conn) -> int:
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Questions'")
        return int(cur.fetchone()[1])


def test_column_facts(conn, source_database: str) -> None:
    execute(
        conn,
        "CREATE TABLE t (id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY, "
        "e ENUM('a','it''s','back\\\\slash') NOT NULL DEFAULT 'a', s SET('x','y'), "
        "d DECIMAL(10,2), ts DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3), "
        "name VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin, j JSON, "
        "v INT AS (d + 1) VIRTUAL, p BIGINT AS (d * 2) STORED, b BIT(3)) "
        "DEFAULT CHARSET=utf8mb4",
    )
    schema = load_table_schema(conn, TableName(source_database, "t"))
    assert schema.version == 0
    assert schema.primary_key == ("id",)
    by = {c.name: c for c in schema.columns}
    assert list(by) == ["id", "e", "s", "d", "ts", "name", "j", "v", "p", "b"]
    assert by["id"] == Column(
        "id", "int", "int(10) unsigned", nullable=False, unsigned=True, precision=10, scale=0
    )
    assert by["e"].elements == ("a", "it's", "back\\slash")
    assert by["e"].nullable is False and by["e"].default == "'a'"
    assert (by["e"].charset, by["e"].collation) == ("utf8mb4", "utf8mb4_general_ci")
    assert by["s"].elements == ("x", "y")
    assert (by["d"].precision, by["d"].scale) == (10, 2)
    assert (by["ts"].fsp, by["ts"].default) == (3, "current_timestamp(3)")
    assert (by["name"].charset, by["name"].collation) == ("latin1", "latin1_bin")
    assert (by["j"].data_type, by["j"].collation) == ("longtext", "utf8mb4_bin")
    assert by["v"].generated and by["p"].generated and not by["d"].generated
    assert (by["b"].data_type, by["b"].precision) == ("bit", 3)


def test_keys_without_primary_key(conn, source_database: str) -> None:
    execute(
        conn,
        "CREATE TABLE k (a INT, b INT NOT NULL, c INT NOT NULL, d VARCHAR(10), "
        "UNIQUE KEY za (a), UNIQUE KEY yb (c, b), UNIQUE (d(3)), KEY plain (a, b))",
    )
    schema = load_table_schema(conn, TableName(source_database, "k"))
    assert schema.primary_key == ()
    assert schema.unique_keys == (("c", "b"), ("a",), ("d",))
    assert schema.key_columns == ("c", "b")


def test_table_without_any_key(conn, source_database: str) -> None:
    execute(conn, "CREATE TABLE heap (a INT)")
    schema = load_table_schema(conn, TableName(source_database, "heap"))
    assert (schema.primary_key, schema.unique_keys, schema.key_columns) == ((), (), ())


def test_list_tables_filters_and_skips_views(conn, source_database: str) -> None:
    execute(
        conn,
        "CREATE TABLE keep_a (a INT)",
        "CREATE TABLE keep_b (a INT)",
        "CREATE TABLE skip_c (a INT)",
        "CREATE VIEW keep_view AS SELECT * FROM keep_a",
    )
    found = list_tables(
        conn, lambda schema, table: schema == source_database and table.startswith("keep")
    )
    assert found == [TableName(source_database, "keep_a"), TableName(source_database, "keep_b")]
    everything = list_tables(conn, lambda schema, table: True)
    assert TableName(source_database, "skip_c") in everything
    assert not [t for t in everything if t.schema in ("mysql", "information_schema", "sys")]


def test_many_tables_in_few_queries(conn, source_database: str, monkeypatch) -> None:
    other = f"{source_database}_b"
    execute(conn, f"CREATE DATABASE `{other}`")
    try:
        names = [TableName(source_database, f"t{i:02d}") for i in range(40)]
        names += [TableName(other, f"u{i}") for i in range(3)]
        execute(
            conn,
            *(
                f"CREATE TABLE {n.quoted()} (id INT PRIMARY KEY, v{i} VARCHAR(3))"
                for i, n in enumerate(names)
            ),
        )
        monkeypatch.setattr(loader, "BATCH_SIZE", 16)
        own = -(questions(conn) - questions(conn))  # what one status query itself adds
        before = questions(conn)
        schemas = load_schemas(conn, names)
        used = questions(conn) - before - own
        # 40 tables in batches of 16 -> 3 batches; 3 tables of another schema -> 1 batch;
        # each batch is one COLUMNS and one STATISTICS query
        assert used == 2 * (3 + 1)
        assert list(schemas) == names
        for i, name in enumerate(names):
            assert schemas[name].column_names == ("id", f"v{i}")
            assert schemas[name].primary_key == ("id",)
    finally:
        execute(conn, f"DROP DATABASE `{other}`")


def test_missing_tables_are_named(conn, source_database: str) -> None:
    execute(conn, "CREATE TABLE here (a INT)")
    with pytest.raises(LookupError, match=rf"{source_database}\.gone"):
        load_schemas(conn, [TableName(source_database, "here"), TableName(source_database, "gone")])
    with pytest.raises(TypeError, match="TableName"):
        load_schemas(conn, [f"{source_database}.here"])  # type: ignore[list-item]


def test_binary_defaults_that_are_not_utf8_load(conn, source_database: str) -> None:
    """Found by the soak (seed 1508): the server shows a binary default as its bytes in
    quotes, and ``ed a2 92`` is no UTF-8; the COLUMNS query failed to decode, so a
    changefeed over the table could not even be created ("Exception calling
    application"). Such a default loads as the hex literal the schema history renders
    for the same DDL; text and UTF-8 binary defaults load as before."""
    execute(
        conn,
        "CREATE TABLE bin_defaults (id INT PRIMARY KEY, "
        "a VARBINARY(8) DEFAULT 0x6aeda292, b BINARY(4) NOT NULL DEFAULT 0x332c6c, "
        "c VARBINARY(12) DEFAULT 0x6aeda2925c27000a, d VARBINARY(4) DEFAULT 0xed41, "
        "t VARCHAR(5) DEFAULT 'é''s')",
    )
    schema = load_table_schema(conn, TableName(source_database, "bin_defaults"))
    by = {c.name: c.default for c in schema.columns}
    assert by["a"] == "x'6aeda292'"
    assert by["c"] == "x'6aeda2925c27000a'"  # backslash, quote, NUL and newline unescaped
    assert by["d"] == "'?A'"  # bytes the server itself shows as "?": its text
    assert by["b"] == "'3,l\\0'"
    assert by["t"] == "'é''s'"


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (None, None),
        (b"NULL", "NULL"),
        (b"'\xc3\xa9'", "'é'"),
        (b"'j\xed\xa2\x92'", "x'6aeda292'"),
        (b"'\xed\\\\\\0''\\n\\Z'", "x'ed5c00270a1a'"),
        (b"\xed", "x'ed'"),  # not quoted: the bytes as they are
    ],
)
def test_default_text(raw: bytes | None, text: str | None) -> None:
    assert loader._default_text(raw) == text
