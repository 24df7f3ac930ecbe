"""typeconv's select direction and the snapshot session settings."""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from pymysql.constants import FIELD_TYPE

from cdc import typeconv
from cdc.model.schema import Column
from cdc.typeconv import RawDate, RawDateTime, from_select


def col(data_type: str, column_type: str | None = None, **kw) -> Column:
    return Column("c", data_type, column_type or data_type, **kw)


def test_float_is_rounded_to_float32() -> None:
    f = col("float")
    assert from_select(f, 0.10000000149011612) == 0.10000000149011612
    assert from_select(f, 0.1) == struct.unpack("<f", struct.pack("<f", 0.1))[0]
    assert typeconv.converter_for(col("double"), "select") is typeconv.identity


def test_dates_from_text() -> None:
    assert from_select(col("date"), "2024-05-31") == date(2024, 5, 31)
    assert from_select(col("date"), "0000-00-00") == RawDate(0, 0, 0)
    assert from_select(col("date"), "2024-05-00") == RawDate(2024, 5, 0)
    assert from_select(col("date"), date(2024, 1, 1)) == date(2024, 1, 1)


def test_datetimes_from_text() -> None:
    dt = col("datetime", "datetime(6)", fsp=6)
    assert from_select(dt, "2024-05-31 01:02:03.500000") == datetime(2024, 5, 31, 1, 2, 3, 500000)
    assert from_select(dt, "2024-05-31 01:02:03.5") == datetime(2024, 5, 31, 1, 2, 3, 500000)
    assert from_select(dt, "0000-00-00 00:00:00.000000") == RawDateTime(0, 0, 0)
    assert from_select(dt, "2024-02-31 23:59:59.999") == RawDateTime(
        2024, 2, 31, 23, 59, 59, 999000
    )


def test_timestamp_text_is_utc() -> None:
    ts = col("timestamp", "timestamp(3)", fsp=3)
    assert from_select(ts, "2038-01-19 03:14:07.999") == datetime(
        2038, 1, 19, 3, 14, 7, 999000, tzinfo=UTC
    )
    assert from_select(ts, "0000-00-00 00:00:00.000") == RawDateTime(0, 0, 0)


def test_time_text() -> None:
    t = col("time", "time(6)", fsp=6)
    assert from_select(t, "-838:59:59.999999") == -timedelta(
        hours=838, minutes=59, seconds=59, microseconds=999999
    )
    assert from_select(t, "-00:00:00.5") == timedelta(microseconds=-500000)
    assert from_select(t, "100:00:00.000001") == timedelta(hours=100, microseconds=1)
    assert from_select(t, "00:00:00") == timedelta(0)


def test_set_and_bit() -> None:
    s = col("set", "set('a','b')", elements=("a", "b"))
    assert from_select(s, "a,b") == frozenset({"a", "b"})
    assert from_select(s, "") == frozenset()
    b = col("bit", "bit(12)")
    assert from_select(b, b"\x0f\xff") == 4095
    assert from_select(b, b"\x00") == 0


def test_identity_types() -> None:
    for column in (
        col("int"),
        col("decimal", "decimal(5,2)"),
        col("varchar", "varchar(3)"),
        col("binary", "binary(2)"),
        col("enum", "enum('a')", elements=("a",)),
        col("json"),
        col("year"),
    ):
        assert typeconv.converter_for(column, "select") is typeconv.identity


def test_unparseable_text_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"column 'c' \(time\): cannot convert select value"):
        from_select(col("time"), "noon")


def test_row_converter_converts_only_what_needs_it() -> None:
    columns = (
        col("int"),
        Column("d", "date", "date"),
        Column("s", "set", "set('a')", elements=("a",)),
    )
    convert = typeconv.row_converter(columns, "select")
    assert convert((1, "0000-00-00", "a")) == (1, RawDate(0, 0, 0), frozenset({"a"}))
    assert convert((None, None, None)) == (None, None, None)
    assert typeconv.row_converter(columns[:1], "select")([7]) == (7,)
    with pytest.raises(ValueError, match=r"column 'd' \(date\): cannot convert select value 5"):
        convert((1, 5, ""))


def test_select_expression_reads_float_exactly() -> None:
    assert typeconv.select_expression(Column("f`x", "float", "float")) == (
        "CAST(`f``x` AS DOUBLE) AS `f``x`"
    )
    assert typeconv.select_list([Column("a", "int", "int"), Column("b", "double", "double")]) == (
        "`a`, `b`"
    )


def test_snapshot_connect_kwargs() -> None:
    kwargs = typeconv.snapshot_connect_kwargs()
    assert kwargs["charset"] == "utf8mb4"
    assert "time_zone = '+00:00'" in kwargs["init_command"]
    conv = kwargs["conv"]
    assert conv[FIELD_TYPE.LONGLONG] is int
    assert conv[FIELD_TYPE.NEWDECIMAL] is Decimal
    for temporal in (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIME):
        assert temporal not in conv
    assert typeconv.SNAPSHOT_SESSION_SQL[0] == "SET SESSION time_zone = '+00:00'"


def test_writable_columns_skip_generated() -> None:
    columns = (Column("a", "int", "int"), Column("g", "int", "int", generated=True))
    assert typeconv.writable_columns(columns) == columns[:1]
