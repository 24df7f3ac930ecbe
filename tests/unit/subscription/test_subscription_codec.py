"""Every canonical column value, position and event survives the trip through the proto bytes."""

from __future__ import annotations

import math
import struct
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.model import DdlEvent, DdlKind, GtidSet, Op, Position, RowChange, TableName
from cdc.model.gtid import Flavor
from cdc.subscription.codec import (
    CodecError,
    event_from_proto,
    event_to_proto,
    events_to_batch,
    position_from_proto,
    position_to_proto,
    value_from_proto,
    value_to_proto,
)
from cdc.typeconv import RawDate, RawDateTime

FLOAT32 = struct.unpack("<f", struct.pack("<f", 0.1))[0]

# (value, the Value field it must travel in)
CANONICAL: list[tuple[Any, str]] = [
    (None, "null"),
    (0, "int"),
    (-1, "int"),
    (127, "int"),
    (-(2**63), "int"),
    (2**63 - 1, "int"),
    (2**63, "uint"),
    (18446744073709551615, "uint"),
    (2**64, "big_int"),
    (-(2**63) - 1, "big_int"),
    (4095, "int"),
    (2155, "int"),
    (Decimal("-12.50"), "decimal"),
    (Decimal("0.000"), "decimal"),
    (Decimal("99999999999999999999999999999999999.999999999999999999999999999999"), "decimal"),
    (Decimal("1E+3"), "decimal"),
    (Decimal("-0"), "decimal"),
    (FLOAT32, "double"),
    (0.1, "double"),
    (-0.0, "double"),
    (1.7976931348623157e308, "double"),
    (5e-324, "double"),
    (math.inf, "double"),
    (-math.inf, "double"),
    ("", "text"),
    ("plain", "text"),
    ("😀 é€\x81\x00", "text"),
    ('{"a":  [1,2.5]}', "text"),
    (b"", "bytes"),
    (b"ab\x00\x00", "bytes"),
    (bytes(range(256)), "bytes"),
    (date(2024, 5, 31), "date"),
    (date(1, 1, 1), "date"),
    (date(9999, 12, 31), "date"),
    (datetime(2024, 5, 31, 1, 2, 3), "datetime"),
    (datetime(2024, 5, 31, 1, 2, 3, 500000), "datetime"),
    (datetime(2024, 5, 31, 1, 2, 3, 1), "datetime"),
    (datetime(1000, 1, 1), "datetime"),
    (datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC), "timestamp"),
    (datetime(1970, 1, 1, 0, 0, 1, 999999, tzinfo=UTC), "timestamp"),
    (timedelta(0), "time"),
    (timedelta(hours=838, minutes=59, seconds=59), "time"),
    (-timedelta(hours=838, minutes=59, seconds=59), "time"),
    (-timedelta(microseconds=1), "time"),
    (timedelta(hours=1, minutes=2, seconds=3, microseconds=500000), "time"),
    (-timedelta(hours=12, microseconds=250), "time"),
    (timedelta(days=40), "time"),
    (RawDate(0, 0, 0), "raw_date"),
    (RawDate(2024, 0, 15), "raw_date"),
    (RawDate(2024, 2, 31), "raw_date"),
    (RawDateTime(0, 0, 0), "raw_datetime"),
    (RawDateTime(2024, 0, 15, 10), "raw_datetime"),
    (RawDateTime(2024, 2, 31, 23, 59, 59, 123456), "raw_datetime"),
    (frozenset(), "set"),
    (frozenset({"x", "z"}), "set"),
    (frozenset({"é", "😀", ""}), "set"),
]


def through_bytes(value: Any) -> tuple[str, Any]:
    message = pb.Value.FromString(value_to_proto(value).SerializeToString())
    return message.WhichOneof("kind"), value_from_proto(message)


def _stable_id(value: Any) -> str:
    """A set's repr follows string hashing, which differs between processes (xdist workers)."""
    if isinstance(value, frozenset):
        return f"frozenset({sorted(value)!r})"[:40]
    return repr(value)[:40]


@pytest.mark.parametrize(("value", "field"), CANONICAL, ids=[_stable_id(v) for v, _ in CANONICAL])
def test_every_canonical_value_round_trips(value: Any, field: str) -> None:
    kind, back = through_bytes(value)
    assert kind == field
    assert type(back) is type(value)
    assert back == value
    if isinstance(value, float):
        assert struct.pack("<d", back) == struct.pack("<d", value)
    if isinstance(value, Decimal):
        assert str(back) == str(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        assert back.utcoffset() == timedelta(0)


def test_nan_round_trips_bit_exact() -> None:
    kind, back = through_bytes(math.nan)
    assert kind == "double" and math.isnan(back)


def test_aware_datetime_in_another_zone_travels_as_the_same_instant_in_utc() -> None:
    paris = datetime(2024, 6, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    kind, back = through_bytes(paris)
    assert kind == "timestamp"
    assert back == paris and back.tzinfo == UTC and back.hour == 10


def test_text_forms_are_documented_ones() -> None:
    assert value_to_proto(datetime(2024, 5, 31, 1, 2, 3, 500000)).datetime == (
        "2024-05-31 01:02:03.500000"
    )
    assert value_to_proto(datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)).timestamp == (
        "2038-01-19 03:14:07+00:00"
    )
    assert value_to_proto(-timedelta(hours=838, minutes=59, seconds=59)).time == "-838:59:59"
    assert value_to_proto(timedelta(seconds=1, microseconds=5)).time == "00:00:01.000005"
    assert value_to_proto(frozenset({"z", "a"})).set.members == ["a", "z"]
    assert value_to_proto(RawDate(0, 0, 0)).raw_date == "0000-00-00"


def test_bool_travels_as_an_int() -> None:
    assert through_bytes(True) == ("int", 1)


@pytest.mark.parametrize("value", [object(), [1, 2], {"a": 1}, frozenset({1, 2})])
def test_non_canonical_values_are_refused(value: Any) -> None:
    with pytest.raises(CodecError):
        value_to_proto(value)


@pytest.mark.parametrize(
    "message",
    [
        pb.Value(),
        pb.Value(time="1:2:3"),
        pb.Value(time="10:61:00"),
        pb.Value(date="yesterday"),
        pb.Value(decimal="1,5"),
        pb.Value(big_int="12x"),
        pb.Value(raw_date="0-0-0"),
        pb.Value(raw_datetime="0000-00-00T00:00:00"),
        pb.Value(timestamp="2024-01-01 00:00:00"),
        pb.Value(datetime="2024-01-01 00:00:00+00:00"),
    ],
)
def test_malformed_values_are_refused_with_their_text(message: pb.Value) -> None:
    with pytest.raises(CodecError, match="no field set|malformed|offset"):
        value_from_proto(message)


MARIADB = GtidSet.parse("0-1-100,1-2-5")
MYSQL = GtidSet.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9")


@pytest.mark.parametrize(
    "position",
    [
        Position("mysql-bin.000003", 4),
        Position("mariadb-bin.999999", 2**40),
        Position("binlog.000001", 0, MARIADB),
        Position("binlog.000001", 0, MYSQL),
        Position("binlog.000001", 7, GtidSet.empty(Flavor.MARIADB)),
        Position("binlog.000001", 7, GtidSet.parse("")),
    ],
)
def test_positions_round_trip(position: Position) -> None:
    message = pb.Position.FromString(position_to_proto(position).SerializeToString())
    back = position_from_proto(message)
    assert back == position
    assert back.to_dict() == position.to_dict()


def test_malformed_position_is_refused() -> None:
    with pytest.raises(CodecError, match="malformed position"):
        position_from_proto(pb.Position(file="nonsense", offset=1))


def row(op: Op, **kwargs: Any) -> RowChange:
    images = {
        "before": {"id": 1, "price": Decimal("1.50"), "tags": frozenset({"a"})},
        "after": {
            "id": 1,
            "price": Decimal("2.50"),
            "tags": frozenset(),
            "at": datetime(2024, 1, 1, tzinfo=UTC),
            "blob": None,
        },
    }
    before = images["before"] if op in (Op.UPDATE, Op.DELETE) else None
    after = images["after"] if op is not Op.DELETE else None
    base: dict[str, Any] = {
        "table": TableName("shop", "orders"),
        "op": op,
        "before": before,
        "after": after,
        "key": (1, "k"),
        "position": Position("binlog.000002", 120, MARIADB),
    }
    return RowChange(**{**base, **kwargs})


@pytest.mark.parametrize(
    "event",
    [
        row(Op.CREATE),
        row(Op.READ, txn_id=None, schema_version=0),
        row(Op.UPDATE, txn_id="0-1-101", schema_version=3),
        row(Op.DELETE, key=()),
        row(Op.CREATE, after={}),
        DdlEvent(
            Position("binlog.000002", 300),
            "shop",
            (TableName("shop", "a"), TableName("shop", "b")),
            DdlKind.RENAME_TABLE,
            "RENAME TABLE a TO b",
        ),
        DdlEvent(Position("binlog.000002", 400), "", (), DdlKind.CREATE_SCHEMA, "CREATE SCHEMA x"),
    ],
    ids=lambda e: type(e).__name__ + ":" + getattr(getattr(e, "op", None), "name", "ddl"),
)
def test_events_round_trip(event: RowChange | DdlEvent) -> None:
    batch = pb.Batch.FromString(events_to_batch(5, [event]).SerializeToString())
    assert batch.batch_id == 5
    back = event_from_proto(batch.events[0])
    assert back == event
    if isinstance(event, RowChange):
        for image in ("before", "after"):
            mine, theirs = getattr(event, image), getattr(back, image)
            assert (mine is None) == (theirs is None)
            if mine is not None:
                assert list(theirs) == list(mine), "column order is kept"


def test_a_bad_column_value_names_the_column() -> None:
    change = row(Op.CREATE, after={"id": 1, "odd": object()})
    with pytest.raises(CodecError, match=r"column shop\.orders\.odd"):
        event_to_proto(change)


def test_event_without_kind_or_op_is_refused() -> None:
    message = pb.Event()
    position_to_proto(Position("binlog.000001", 4), message.position)
    with pytest.raises(CodecError, match="neither a row nor a DDL"):
        event_from_proto(message)
    message.row.table.schema, message.row.table.name = "s", "t"
    with pytest.raises(CodecError, match="no valid op"):
        event_from_proto(message)
    message.row.op = pb.OP_CREATE
    with pytest.raises(CodecError, match="needs an after image"):
        event_from_proto(message)
