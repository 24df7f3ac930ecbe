"""The LOAD DATA data of a snapshot chunk or a lane's upserts: escapes, NULL, and the
statement that reads it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from cdc.model import Column, TableName, TableSchema
from cdc.sink.mysql.loadfile import LOCAL_FILE_NAME, load_statement

T = TableName("db", "t`x")
SCHEMA = TableSchema(
    T,
    (
        Column("id", "bigint", "bigint(20)", nullable=False),
        Column("s", "varchar", "varchar(20)"),
        Column("b", "varbinary", "varbinary(20)"),
        Column("flags", "bit", "bit(4)"),
        Column("y", "year", "year(4)"),
        Column("ts", "timestamp", "timestamp(6)", fsp=6),
        Column("tm", "time", "time"),
        Column("d", "decimal", "decimal(10,2)", precision=10, scale=2),
        Column("g", "int", "int(11)", generated=True),
    ),
    ("id",),
)


def test_escapes_keep_tabs_newlines_backslashes_and_a_literal_backslash_n_apart_from_null() -> None:
    row = {
        "id": 1,
        "s": "a\tb\nc\\N",
        "b": b"\\\t\n\x00\xff",
        "flags": 5,
        "y": 0,
        "ts": datetime(2038, 1, 19, 4, 14, 7, 5, tzinfo=timezone(timedelta(hours=1))),
        "tm": -timedelta(hours=1, microseconds=1),
        "d": Decimal("1E+2"),
        "g": 99,
    }
    nulls = {**dict.fromkeys(row), "id": 2}
    statement = load_statement(SCHEMA, [row, nulls], "2 rows")
    assert statement.local_file is not None
    assert statement.local_file.name == LOCAL_FILE_NAME
    first, second, end = statement.local_file.data.split(b"\n")
    assert end == b""
    assert first.split(b"\t") == [
        b"1",
        b"a\\tb\\nc\\\\N",
        b"\\\\\\t\\n\x00\xff",
        b"5",
        b"0000",
        b"2038-01-19 03:14:07.000005",
        b"-01:00:00.000001",
        b"100",
    ]
    assert second.split(b"\t") == [b"2"] + [b"\\N"] * 7


def test_the_statement_replaces_names_the_columns_and_casts_bit_through_a_variable() -> None:
    statement = load_statement(SCHEMA, [], "no rows")
    assert statement.sql.startswith(
        f"LOAD DATA LOCAL INFILE '{LOCAL_FILE_NAME}' REPLACE INTO TABLE `db`.`t``x`"
    )
    assert "CHARACTER SET utf8mb4" in statement.sql
    assert (
        "(`id`, `s`, `b`, @bit3, `y`, `ts`, `tm`, `d`) SET `flags` = CAST(@bit3 AS UNSIGNED)"
        in (statement.sql)
    )
    assert "`g`" not in statement.sql
    assert statement.description == (
        "LOAD DATA LOCAL INFILE ... REPLACE INTO TABLE `db`.`t``x` [no rows]"
    )


def test_a_value_the_column_cannot_hold_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="does not fit BIT"):
        load_statement(
            SCHEMA,
            [{**dict.fromkeys(c.name for c in SCHEMA.columns), "id": 1, "flags": 16}],
            "1 row",
        )
