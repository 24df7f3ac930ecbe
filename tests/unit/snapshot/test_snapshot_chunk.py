"""SnapshotChunk: ids, where clauses, membership and the persisted form."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from cdc.model.schema import TableName
from cdc.snapshot.chunk import (
    SnapshotChunk,
    decode_bound,
    encode_bound,
    parse_chunk_id,
    reading_order,
)
from cdc.typeconv import RawDate, RawDateTime

T = TableName("shop", "orders")


def chunk(lower: Any = None, upper: Any = None, n: int = 1, column: str = "id") -> SnapshotChunk:
    return SnapshotChunk(T, n, column, lower, upper)


def casefold_compare(a: Any, b: Any) -> int:
    """A stand-in for a case-insensitive collation (the reader asks the server instead)."""
    left, right = a.casefold(), b.casefold()
    return (left > right) - (left < right)


def test_chunk_id_is_made_and_parsed_by_the_store_functions() -> None:
    c = chunk(10, 20, n=3)
    assert c.chunk_id == "shop.orders:3"
    assert parse_chunk_id(c.chunk_id) == ("shop", "orders", 3)


@pytest.mark.parametrize(
    ("lower", "upper", "sql", "params"),
    [
        (None, None, "1=1", ()),
        (None, 10, "(`id` < %s OR `id` IS NULL)", (10,)),
        (10, None, "`id` >= %s", (10,)),
        (10, 20, "`id` >= %s AND `id` < %s", (10, 20)),
        ("apple", "melon", "`id` >= %s AND `id` < %s", ("apple", "melon")),
        (b"\x00a", b"\xffz", "`id` >= %s AND `id` < %s", (b"\x00a", b"\xffz")),
    ],
)
def test_where_clause(lower: Any, upper: Any, sql: str, params: tuple[Any, ...]) -> None:
    assert chunk(lower, upper).where_clause() == (sql, params)


def test_where_clause_quotes_the_column_and_doubles_percent_for_pymysql() -> None:
    sql, params = chunk(1, 2, column="we`ird%col").where_clause()
    assert sql == "`we``ird%%col` >= %s AND `we``ird%%col` < %s"
    assert params == (1, 2)


def test_where_clause_params_are_written_back_exactly() -> None:
    assert chunk(timedelta(hours=-1, microseconds=5), None).where_clause()[1] == (
        "-00:59:59.999995",
    )
    aware = datetime(2024, 5, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert chunk(aware, None).where_clause()[1] == (datetime(2024, 5, 1, 10, 0),)
    assert chunk(RawDate(0, 0, 0), date(2024, 1, 1)).where_clause()[1] == (
        "0000-00-00",
        date(2024, 1, 1),
    )
    assert chunk(RawDateTime(2024, 0, 15, 10), None).where_clause()[1] == ("2024-00-15 10:00:00",)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(9, False), (10, True), (15, True), (19, True), (20, False), (None, False)],
)
def test_contains_int_lower_inclusive_upper_exclusive(value: Any, expected: bool) -> None:
    assert chunk(10, 20).contains(value) is expected


def test_null_belongs_to_the_first_chunk_only() -> None:
    assert chunk(None, 5, n=0).contains(None)
    assert not chunk(5, None, n=2).contains(None)
    assert chunk(None, None, n=0).contains(None)


def test_unbounded_chunk_contains_everything() -> None:
    everything = chunk(None, None, n=0)
    assert everything.unbounded
    assert all(everything.contains(v) for v in (-(2**63), 0, 2**64 - 1))


def test_contains_decimal_and_temporal_values() -> None:
    assert chunk(Decimal("1.50"), Decimal("2")).contains(Decimal("1.5"))
    assert not chunk(Decimal("1.50"), Decimal("2")).contains(Decimal("2.00"))
    dates = chunk(RawDate(0, 0, 0), date(2024, 1, 1))
    assert dates.contains(RawDate(2023, 0, 0))
    assert dates.contains(date(2023, 12, 31))
    assert not dates.contains(date(2024, 1, 1))
    stamps = chunk(datetime(2024, 1, 1, tzinfo=UTC), None)
    assert stamps.contains(datetime(2024, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))))
    assert not stamps.contains(datetime(2023, 12, 31, 23, 59, tzinfo=UTC))
    times = chunk(timedelta(hours=-838), timedelta(0))
    assert times.contains(timedelta(seconds=-1))
    assert not times.contains(timedelta(0))


def test_text_is_never_ordered_in_python() -> None:
    with pytest.raises(TypeError, match="collation"):
        chunk("a", "m").contains("b")


def test_text_membership_uses_the_given_collation_order() -> None:
    c = chunk("b", "m")
    # A case-insensitive order puts 'B' inside and 'M' outside; code points would not.
    assert c.contains("B", casefold_compare)
    assert not c.contains("M", casefold_compare)
    assert not c.contains("A", casefold_compare)


def test_composite_key_chunks_by_the_first_column_value() -> None:
    c = chunk("b", "d", column="name")
    assert c.where_clause() == ("`name` >= %s AND `name` < %s", ("b", "d"))
    assert c.contains("c", casefold_compare)


ROUND_TRIP = [
    0,
    -(2**63),
    2**64 - 1,
    Decimal("-12.50"),
    Decimal("0.000000000000000000000000000001"),
    1.0000000000000002,
    -0.0,
    "",
    "naïve 😀 'quoted' \\ back",
    b"",
    b"\x00\xff ab",
    date(2024, 2, 29),
    datetime(2024, 5, 31, 1, 2, 3, 500000),
    datetime(2038, 1, 19, 3, 14, 7, 1, tzinfo=UTC),
    timedelta(hours=-838, minutes=-59, seconds=-59),
    timedelta(microseconds=1),
    RawDate(0, 0, 0),
    RawDateTime(2024, 0, 15, 10, 1, 2, 3),
]


@pytest.mark.parametrize("value", ROUND_TRIP, ids=lambda v: f"{type(v).__name__}:{v!r}"[:40])
def test_bounds_round_trip_exactly_through_json(value: Any) -> None:
    back = decode_bound(json.loads(json.dumps(encode_bound(value))))
    assert type(back) is type(value)
    assert back == value
    assert repr(back) == repr(value)  # keeps Decimal scale, -0.0, tzinfo


def test_to_dict_round_trip_through_json() -> None:
    original = SnapshotChunk(TableName("db.x", "t`1"), 7, "created", date(2024, 1, 1), None)
    data = json.loads(json.dumps(original.to_dict()))
    assert data["v"] == 1
    assert SnapshotChunk.from_dict(data) == original


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"v": 2}, "version 2"),
        ({"v": None}, "version None"),
        ({"lower": {"type": "uuid", "value": "x"}}, "unknown type 'uuid'"),
        ({"lower": {"type": "int", "value": "5"}}, "malformed"),
        ({"lower": {"type": "bytes", "value": "***"}}, "malformed"),
        ({"lower": 5}, "must be {'type'"),
        ({"table": "shop.orders"}, "table must be"),
    ],
)
def test_from_dict_rejects_bad_data(change: dict[str, Any], message: str) -> None:
    data = {**chunk(1, 2).to_dict(), **change}
    with pytest.raises(ValueError, match=message):
        SnapshotChunk.from_dict(data)


def test_from_dict_names_missing_fields() -> None:
    data = chunk(1, 2).to_dict()
    del data["upper"]
    with pytest.raises(ValueError, match="lacks upper"):
        SnapshotChunk.from_dict(data)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lower": 5, "upper": 5}, "must be below"),
        ({"lower": 6, "upper": 5}, "must be below"),
        ({"lower": True}, "bool"),
        ({"lower": [1]}, "canonical column values"),
        ({"n": -1}, "int >= 0"),
        ({"key_column": ""}, "key column"),
    ],
)
def test_invalid_chunks_are_refused(kwargs: dict[str, Any], message: str) -> None:
    fields = {"table": T, "n": 0, "key_column": "id", "lower": None, "upper": None, **kwargs}
    with pytest.raises(ValueError, match=message):
        SnapshotChunk(**fields)


def test_reading_order_puts_the_tail_first_and_keeps_the_rest_in_order() -> None:
    plan = [chunk(None, 31, 0), chunk(31, 61, 1), chunk(61, 100, 2), chunk(100, None, 3)]
    assert [c.n for c in reading_order(plan)] == [3, 0, 1, 2]
    assert [c.n for c in reading_order(plan[1:3])] == [1, 2]  # the tail already read
    assert [c.n for c in reading_order([chunk(None, None, 0)])] == [0]
