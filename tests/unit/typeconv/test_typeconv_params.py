"""typeconv's sink direction: canonical values as PyMySQL parameters."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal

import pymysql.converters
import pytest

from cdc import typeconv
from cdc.model.schema import Column
from cdc.typeconv import RawDate, RawDateTime, to_sql_param


def col(data_type: str, column_type: str | None = None, **kw) -> Column:
    return Column("c", data_type, column_type or data_type, **kw)


def test_time_literal_keeps_sign_and_fraction() -> None:
    t = col("time", "time(6)", fsp=6)
    assert to_sql_param(t, timedelta(microseconds=-500000)) == "-00:00:00.500000"
    assert to_sql_param(t, -timedelta(hours=838, minutes=59, seconds=59)) == "-838:59:59"
    assert to_sql_param(t, timedelta(hours=100, microseconds=1)) == "100:00:00.000001"
    with pytest.raises(ValueError, match="outside"):
        to_sql_param(t, timedelta(hours=839))
    with pytest.raises(ValueError, match="TIME needs a timedelta"):
        to_sql_param(t, "01:00:00")


def test_timestamp_is_written_as_utc_wall_clock() -> None:
    ts = col("timestamp", "timestamp(6)", fsp=6)
    ist = timezone(timedelta(hours=5, minutes=30))
    assert to_sql_param(ts, datetime(2024, 1, 1, 5, 30, 0, 1, tzinfo=ist)) == datetime(
        2024, 1, 1, 0, 0, 0, 1
    )
    assert to_sql_param(ts, RawDateTime(0, 0, 0)) == "0000-00-00 00:00:00"
    with pytest.raises(ValueError, match="naive"):
        to_sql_param(ts, datetime(2024, 1, 1))


def test_zero_dates_become_their_literals() -> None:
    assert to_sql_param(col("date"), RawDate(0, 0, 0)) == "0000-00-00"
    assert to_sql_param(col("date"), RawDate(2024, 0, 15)) == "2024-00-15"
    dt = col("datetime", "datetime(6)", fsp=6)
    assert to_sql_param(dt, RawDateTime(2024, 2, 31, 1, 2, 3, 40)) == "2024-02-31 01:02:03.000040"
    assert to_sql_param(col("date"), date(999, 1, 2)) == date(999, 1, 2)
    with pytest.raises(ValueError, match="naive"):
        to_sql_param(dt, datetime(2024, 1, 1, tzinfo=UTC))


def test_raw_literals() -> None:
    assert str(RawDate(1, 2, 3)) == "0001-02-03"
    assert str(RawDateTime(0, 0, 0)) == "0000-00-00 00:00:00"
    assert str(RawDateTime(2024, 0, 1, 2, 3, 4, 500000)) == "2024-00-01 02:03:04.500000"


def test_set_is_written_in_definition_order() -> None:
    s = col("set", "set('x','y','z')", elements=("x", "y", "z"))
    assert to_sql_param(s, frozenset({"z", "x"})) == "x,z"
    assert to_sql_param(s, frozenset()) == ""
    with pytest.raises(ValueError, match=r"\['w'\] are not SET members"):
        to_sql_param(s, frozenset({"w"}))


def test_bit_range() -> None:
    b = col("bit", "bit(12)")
    assert to_sql_param(b, 4095) == 4095
    with pytest.raises(ValueError, match=r"does not fit BIT\(12\)"):
        to_sql_param(b, 4096)
    with pytest.raises(ValueError, match="BIT needs an int"):
        to_sql_param(b, b"\x01")


@pytest.mark.parametrize(
    ("column", "value", "escaped"),
    [
        (col("bigint", "bigint unsigned"), 18446744073709551615, "18446744073709551615"),
        (col("decimal", "decimal(4,2)"), Decimal("-1.50"), "-1.50"),
        (col("float"), 0.10000000149011612, "0.10000000149011612e0"),
        (col("datetime"), datetime(2024, 1, 2, 3, 4, 5, 6), "'2024-01-02 03:04:05.000006'"),
        (col("binary", "binary(2)"), b"a\x00", "_binary X'6100'"),
    ],
)
def test_identity_params_escape_exactly(column: Column, value: object, escaped: str) -> None:
    param = to_sql_param(column, value)
    assert param is value
    assert pymysql.converters.escape_item(param, "utf8mb4") == escaped


def test_sink_session() -> None:
    kwargs = typeconv.sink_connect_kwargs()
    assert "time_zone = '+00:00'" in kwargs["init_command"]
    assert "NO_AUTO_VALUE_ON_ZERO" in kwargs["init_command"]
    assert "STRICT" not in kwargs["init_command"]
    assert typeconv.SINK_SESSION_SQL[0] == "SET SESSION time_zone = '+00:00'"
