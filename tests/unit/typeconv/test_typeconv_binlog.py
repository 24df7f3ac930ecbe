"""typeconv's binlog direction: raw row-image fields to canonical values."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from cdc import typeconv
from cdc.model.schema import Column
from cdc.typeconv import RawDate, RawDateTime, from_binlog


def col(data_type: str, column_type: str | None = None, **kw) -> Column:
    return Column("c", data_type, column_type or data_type, **kw)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        (col("tinyint"), -128),
        (col("bigint", "bigint unsigned", unsigned=True), 18446744073709551615),
        (col("decimal", "decimal(10,2)"), Decimal("-12.50")),
        (col("double"), 0.1),
        (col("varchar", "varchar(10)", charset="utf8mb4"), "😀"),
        (col("varbinary", "varbinary(4)", charset="binary"), b"a\x00"),
        (col("year"), 0),
        (col("bit", "bit(12)"), 4095),
        (col("longtext", charset="utf8mb4"), '{"a":  [1]}'),
    ],
)
def test_final_types_pass_through_unchanged(column: Column, value: object) -> None:
    assert typeconv.converter_for(column, "binlog") is typeconv.identity
    assert from_binlog(column, value) == value


def test_null_stays_none_for_every_converter() -> None:
    for column in (
        col("date"),
        col("timestamp"),
        col("time"),
        col("binary", "binary(2)"),
        col("enum", "enum('a')", elements=("a",)),
        col("set", "set('a')", elements=("a",)),
    ):
        assert from_binlog(column, None) is None


def test_date_parts() -> None:
    assert from_binlog(col("date"), (2024, 5, 31)) == date(2024, 5, 31)
    assert from_binlog(col("date"), (0, 0, 0)) == RawDate(0, 0, 0)
    assert from_binlog(col("date"), (2024, 0, 15)) == RawDate(2024, 0, 15)
    assert from_binlog(col("date"), (2024, 2, 31)) == RawDate(2024, 2, 31)


def test_datetime_parts() -> None:
    dt = col("datetime", "datetime(6)", fsp=6)
    assert from_binlog(dt, (2024, 5, 31, 1, 2, 3, 500000)) == datetime(2024, 5, 31, 1, 2, 3, 500000)
    assert from_binlog(dt, (0, 0, 0, 0, 0, 0, 0)) == RawDateTime(0, 0, 0)
    assert from_binlog(dt, (2024, 0, 15, 10, 11, 12, 0)) == RawDateTime(2024, 0, 15, 10, 11, 12)


def test_timestamp_is_aware_utc_and_zero_is_raw() -> None:
    ts = col("timestamp", "timestamp(6)", fsp=6)
    value = from_binlog(ts, (2147483647, 999999))
    assert value == datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)
    assert value.utcoffset() == timedelta(0)
    assert from_binlog(ts, (1, 0)) == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert from_binlog(ts, (0, 0)) == RawDateTime(0, 0, 0)


def test_time_from_signed_microseconds() -> None:
    t = col("time", "time(6)", fsp=6)
    assert from_binlog(t, -500000) == timedelta(microseconds=-500000)
    top = (838 * 3600 + 59 * 60 + 59) * 1_000_000
    assert from_binlog(t, top) == timedelta(hours=838, minutes=59, seconds=59)
    assert from_binlog(t, -top) == -timedelta(hours=838, minutes=59, seconds=59)


def test_binary_gets_its_zero_padding_back() -> None:
    b = col("binary", "binary(4)", charset="binary")
    assert from_binlog(b, b"ab") == b"ab\x00\x00"
    assert from_binlog(b, b"") == b"\x00" * 4
    assert from_binlog(b, b"abcd") == b"abcd"


def test_binary_without_length_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="length n"):
        typeconv.converter_for(col("binary", "binary"), "binlog")


def test_enum_index_to_label() -> None:
    e = col("enum", "enum('a','é')", elements=("a", "é"))
    assert from_binlog(e, 2) == "é"
    assert from_binlog(e, 0) == ""
    with pytest.raises(ValueError, match="ENUM index 3 is beyond its 2 members"):
        from_binlog(e, 3)


def test_set_mask_to_frozenset() -> None:
    members = tuple(f"m{i}" for i in range(64))
    s = col("set", "set(...)", elements=members)
    assert from_binlog(s, 0) == frozenset()
    assert from_binlog(s, 0b101) == frozenset({"m0", "m2"})
    assert from_binlog(s, (1 << 63) | 1) == frozenset({"m0", "m63"})
    small = col("set", "set('a','b')", elements=("a", "b"))
    with pytest.raises(ValueError, match="beyond its 2 members"):
        from_binlog(small, 0b100)


def test_mysql_binary_json_becomes_mysql_text() -> None:
    j = col("json")
    # {"a": 1}: small object, 1 member, key at 11, inline int16 value.
    obj = bytes.fromhex("0001000c000b000100050100") + b"a"
    assert from_binlog(j, obj) == '{"a": 1}'
    # [1, "x"]: small array, inline int16 then a string at offset 10.
    arr = bytes.fromhex("0202000c000501000c0a0001") + b"x"
    assert from_binlog(j, arr) == '[1, "x"]'
    assert from_binlog(j, bytes.fromhex("0400")) == "null"
    assert from_binlog(j, "[1,2]") == "[1,2]"


def test_json_text_rendering() -> None:
    render = typeconv._json_text
    assert (
        render({b"k": [True, False, None, 2.5, 1e300]}) == '{"k": [true, false, null, 2.5, 1e300]}'
    )
    assert render(b'q"\\\n\x01\xc3\xa9') == '"q\\"\\\\\\n\\u0001é"'
    assert render(Decimal("1.50")) == "1.50"


def test_bad_raw_value_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"column 'c' \(date\): cannot convert binlog value"):
        from_binlog(col("date"), "2024-01-01")


def test_unsupported_type_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="'inet6' is not supported"):
        typeconv.converter_for(col("inet6"), "binlog")


def test_bad_source_and_bad_column() -> None:
    with pytest.raises(ValueError, match="source must be 'binlog' or 'select'"):
        typeconv.converter_for(col("date"), "sql")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Column"):
        typeconv.converter_for("date", "binlog")  # type: ignore[arg-type]
