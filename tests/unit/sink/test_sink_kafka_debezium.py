"""Debezium envelopes: the shape Debezium's MySQL connector writes, value by value."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from cdc.model import Column, Position, RowChange, TableName, TableSchema
from cdc.model.events import DdlEvent, DdlKind, Op
from cdc.model.gtid import GtidSet
from cdc.sink.kafka.debezium import Debezium
from cdc.typeconv import RawDate

T = TableName("shop", "orders")
SCHEMA = TableSchema(
    T,
    (
        Column("id", "bigint", "bigint(20) unsigned", nullable=False, unsigned=True),
        Column("small", "tinyint", "tinyint(4)"),
        Column("price", "decimal", "decimal(10,2)", precision=10, scale=2),
        Column("day", "date", "date"),
        Column("at", "datetime", "datetime(6)", fsp=6),
        Column("ts", "timestamp", "timestamp", nullable=True),
        Column("dur", "time", "time"),
        Column("flag", "bit", "bit(1)"),
        Column("mask", "bit", "bit(12)"),
        Column("tags", "set", "set('a','b','c')", elements=("a", "b", "c")),
        Column("raw", "varbinary", "varbinary(8)"),
        Column("note", "varchar", "varchar(20)"),
    ),
    ("id",),
)
ROW = {
    "id": 18446744073709551615,
    "small": -3,
    "price": Decimal("12.50"),
    "day": date(1970, 1, 11),
    "at": datetime(1970, 1, 1, 0, 0, 1, 500),
    "ts": datetime(2024, 5, 31, 1, 2, 3, tzinfo=UTC),
    "dur": -timedelta(hours=1),
    "flag": 1,
    "mask": 0x0F0,
    "tags": frozenset({"c", "a"}),
    "raw": b"\x00\xff",
    "note": "é",
}
POSITION = Position("binlog.000003", 1234, GtidSet.parse("0-1-42"))


def envelope(change: RowChange) -> dict:
    encoder = Debezium("orders-feed").table(SCHEMA)
    return json.loads(encoder.value(change, 1_700_000_000_000))


def test_an_insert_in_debezium_form() -> None:
    change = RowChange(T, Op.CREATE, None, ROW, (ROW["id"],), POSITION, "0-1-42")
    message = envelope(change)
    assert message["schema"]["name"] == "orders-feed.shop.orders.Envelope"
    fields = {f["field"]: f for f in message["schema"]["fields"][1]["fields"]}
    assert fields["day"]["name"] == "io.debezium.time.Date"
    assert fields["at"]["name"] == "io.debezium.time.MicroTimestamp"
    assert fields["small"]["type"] == "int16" and fields["id"]["type"] == "int64"
    payload = message["payload"]
    assert payload["op"] == "c" and payload["before"] is None
    assert payload["source"]["file"] == "binlog.000003" and payload["source"]["pos"] == 1234
    assert payload["source"]["gtid"] == "0-1-42" and payload["source"]["snapshot"] == "false"
    after = payload["after"]
    assert after["id"] == 18446744073709551615
    assert after["price"] == "12.50"
    assert after["day"] == 10
    assert after["at"] == 1_000_500
    assert after["ts"] == "2024-05-31T01:02:03Z"
    assert after["dur"] == -3_600_000_000
    assert after["flag"] is True
    assert base64.b64decode(after["mask"]) == (0x0F0).to_bytes(2, "little")
    assert after["tags"] == "a,c"
    assert base64.b64decode(after["raw"]) == b"\x00\xff"
    assert after["note"] == "é"


def test_ops_keys_and_zero_dates() -> None:
    zero = {**ROW, "day": RawDate(0, 0, 0)}
    update = RowChange(T, Op.UPDATE, ROW, zero, (ROW["id"],), POSITION)
    message = envelope(update)
    assert message["payload"]["op"] == "u"
    assert message["payload"]["before"]["day"] == 10 and message["payload"]["after"]["day"] is None
    snapshot = RowChange(T, Op.READ, None, ROW, (ROW["id"],), POSITION)
    assert envelope(snapshot)["payload"]["source"]["snapshot"] == "true"
    key = json.loads(Debezium("f").table(SCHEMA).key(b"", ROW))
    assert key["payload"] == {"id": 18446744073709551615}
    assert key["schema"]["name"] == "f.shop.orders.Key"


def test_ddl_and_watermark_messages() -> None:
    codec = Debezium("f")
    ddl = DdlEvent(POSITION, "shop", (T,), DdlKind.ADD_COLUMN, "ALTER TABLE orders ADD x int")
    payload = json.loads(codec.ddl(ddl, 5))["payload"]
    assert payload["ddl"] == ddl.statement and payload["databaseName"] == "shop"
    assert Position.from_dict(payload["source"]["position"]) == POSITION
    mark = json.loads(codec.watermark(POSITION, 5))
    assert mark["schema"] is None and Position.from_dict(mark["payload"]["watermark"]) == POSITION


def test_a_type_without_a_debezium_form_is_refused_up_front() -> None:
    odd = TableSchema(T, (Column("id", "int", "int(11)"), Column("g", "inet6", "inet6")), ("id",))
    with pytest.raises(ValueError, match="has no Debezium form"):
        Debezium("f").table(odd)
