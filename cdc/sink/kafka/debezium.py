"""Debezium's envelope on Kafka: what most Kafka CDC consumers already read.

Debezium is the de-facto standard change-event shape on Kafka: Kafka Connect
sinks (JDBC, Elasticsearch, S3), Flink's ``debezium-json`` format, ksqlDB,
Materialize and RisingWave read it without code. TiCDC's open-protocol is
read only by TiCDC's own tools, and Avro needs a schema registry. So this is
the second protocol. Each message is the JSON converter's form with schemas
(``schemas.enable=true``), as Debezium's MySQL connector writes it::

    {"schema": {"type": "struct", "name": "<changefeed>.shop.orders.Envelope", "fields": [...]},
     "payload": {"before": null, "after": {"id": 7, "note": "new"},
                 "source": {"version": "mysql-cdc", "connector": "mysql", "name": "<changefeed>",
                            "ts_ms": 1717000000000, "snapshot": "false", "db": "shop",
                            "table": "orders", "server_id": 0, "gtid": "0-1-42",
                            "file": "binlog.000003", "pos": 1234, "row": 0},
                 "op": "c", "ts_ms": 1717000000000, "transaction": null}}

``op`` is ``c``, ``u``, ``d`` or ``r`` (snapshot read). The key is
``{"schema": ..., "payload": {"id": 7}}``. Values follow the connector's
defaults, except DECIMAL, written as a string (``decimal.handling.mode=string``:
exact, and readable without the schema): integers as numbers (BIGINT UNSIGNED
too, beyond int64 when it is), FLOAT/DOUBLE as numbers, DATE as days since the
epoch (``io.debezium.time.Date``), DATETIME as epoch milliseconds
(``Timestamp``, fsp <= 3) or microseconds (``MicroTimestamp``), TIMESTAMP as
ISO-8601 UTC text (``ZonedTimestamp``), TIME as microseconds (``MicroTime``),
YEAR as a number, ENUM and JSON as text, SET as comma-separated text
(``EnumSet``), BIT(1) as a boolean and BIT(n) as little-endian bytes
(``Bits``), binary types as base64 text. Zero dates (``0000-00-00``), which
Debezium cannot represent, are null, as Debezium writes them: a consumer that
must keep them uses canal-json. ``source.ts_ms`` is the time the sink encoded
the row: a row change carries no commit time.

DDL and watermark messages have ``"schema": null`` and a payload shaped like
Debezium's schema-change event (``databaseName``, ``ddl``, ``source`` with the
position) or ``{"watermark": <position>}``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import Column, TableSchema
from cdc.sink.kafka.codec import KafkaCodec, TableEncoder
from cdc.typeconv import BLOB_TYPES, DECIMAL_TYPES, INTEGER_TYPES, TEXT_TYPES, RawDate, RawDateTime

__all__ = ["VERSION", "Debezium"]

#: ``source.version``: which writer made the event.
VERSION = "mysql-cdc"

_EPOCH = date(1970, 1, 1)
_EPOCH_TIME = datetime(1970, 1, 1)
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

Convert = Callable[[Any], Any]
_SMALL = {"tinyint": "int16", "smallint": "int16", "mediumint": "int32", "int": "int32"}
_SMALL_UNSIGNED = {"tinyint": "int16", "smallint": "int32", "mediumint": "int32", "int": "int64"}


def _same(value: Any) -> Any:
    return value


def _days(value: Any) -> int | None:
    if isinstance(value, RawDate):
        return None
    return (value - _EPOCH).days


def _epoch_units(per_second: int) -> Convert:
    def convert(value: Any) -> int | None:
        if isinstance(value, RawDateTime):
            return None
        delta = value - _EPOCH_TIME
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros // (1_000_000 // per_second)

    return convert


def _zoned(value: Any) -> str | None:
    if isinstance(value, RawDateTime):
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _micro_time(value: timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _set_text(column: Column) -> Convert:
    order = {member: i for i, member in enumerate(column.elements)}
    return lambda value: ",".join(sorted(value, key=lambda m: (order.get(m, len(order)), m)))


def _bits(column: Column) -> tuple[dict[str, Any], Convert]:
    length = int(column.column_type.partition("(")[2].partition(")")[0] or "1")
    if length == 1:
        return {"type": "boolean"}, lambda value: bool(value)
    width = (length + 7) // 8
    schema = {
        "type": "bytes",
        "name": "io.debezium.data.Bits",
        "parameters": {"length": str(length)},
    }
    return schema, lambda value: _b64(value.to_bytes(width, "little"))


def _field(column: Column) -> tuple[dict[str, Any], Convert]:
    """The Connect schema of a column and the conversion of its canonical values."""
    family = column.data_type
    if family in INTEGER_TYPES:
        table = _SMALL_UNSIGNED if column.unsigned else _SMALL
        return {"type": table.get(family, "int64")}, _same
    if family in DECIMAL_TYPES:
        return {"type": "string"}, lambda value: format(value, "f")
    if family == "float":
        return {"type": "float"}, _same
    if family in ("double", "real", "double precision"):
        return {"type": "double"}, _same
    if family == "date":
        return {"type": "int32", "name": "io.debezium.time.Date"}, _days
    if family == "datetime":
        if (column.fsp or 0) <= 3:
            return {"type": "int64", "name": "io.debezium.time.Timestamp"}, _epoch_units(1000)
        return {"type": "int64", "name": "io.debezium.time.MicroTimestamp"}, _epoch_units(10**6)
    if family == "timestamp":
        return {"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, _zoned
    if family == "time":
        return {"type": "int64", "name": "io.debezium.time.MicroTime"}, _micro_time
    if family == "year":
        return {"type": "int32", "name": "io.debezium.time.Year"}, _same
    if family in TEXT_TYPES:
        return {"type": "string"}, _same
    if family == "enum":
        allowed = ",".join(column.elements)
        return {
            "type": "string",
            "name": "io.debezium.data.Enum",
            "parameters": {"allowed": allowed},
        }, _same
    if family == "set":
        allowed = ",".join(column.elements)
        return {
            "type": "string",
            "name": "io.debezium.data.EnumSet",
            "parameters": {"allowed": allowed},
        }, _set_text(column)
    if family == "json":
        return {"type": "string", "name": "io.debezium.data.Json"}, _same
    if family == "bit":
        return _bits(column)
    if family in BLOB_TYPES or family == "binary":
        return {"type": "bytes"}, _b64
    raise ValueError(
        f"column {column.name!r}: type {column.column_type!r} has no Debezium form in this sink"
    )


def _none_safe(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _struct(name: str, fields: list[dict[str, Any]], *, optional: bool) -> dict[str, Any]:
    return {"type": "struct", "name": name, "optional": optional, "fields": fields}


_SOURCE_FIELDS = [
    {"field": "version", "type": "string", "optional": False},
    {"field": "connector", "type": "string", "optional": False},
    {"field": "name", "type": "string", "optional": False},
    {"field": "ts_ms", "type": "int64", "optional": False},
    {"field": "snapshot", "type": "string", "optional": True},
    {"field": "db", "type": "string", "optional": False},
    {"field": "table", "type": "string", "optional": True},
    {"field": "server_id", "type": "int64", "optional": False},
    {"field": "gtid", "type": "string", "optional": True},
    {"field": "file", "type": "string", "optional": False},
    {"field": "pos", "type": "int64", "optional": False},
    {"field": "row", "type": "int32", "optional": False},
]


class _DebeziumTable(TableEncoder):
    def __init__(self, schema: TableSchema, name: str) -> None:
        super().__init__(schema)
        prefix = f"{name}.{schema.name.schema}.{schema.name.table}"
        fields: list[dict[str, Any]] = []
        self._converts: list[tuple[str, Convert]] = []
        by_name: dict[str, dict[str, Any]] = {}
        for column in schema.columns:
            connect, convert = _field(column)
            entry = {"field": column.name, "optional": column.nullable, **connect}
            fields.append(entry)
            by_name[column.name] = entry
            self._converts.append((column.name, _none_safe(convert)))
        self._key_converts = [(n, c) for n, c in self._converts if n in self.keys.names]
        value = _struct(f"{prefix}.Value", fields, optional=True)
        envelope = _struct(
            f"{prefix}.Envelope",
            [
                {**value, "field": "before"},
                {**value, "field": "after"},
                {
                    **_struct("io.debezium.connector.mysql.Source", _SOURCE_FIELDS, optional=False),
                    "field": "source",
                },
                {"field": "op", "type": "string", "optional": False},
                {"field": "ts_ms", "type": "int64", "optional": True},
            ],
            optional=False,
        )
        key_fields = [{**by_name[n], "optional": False} for n in self.keys.names]
        self._schema_text = _dumps(envelope)
        self._key_schema_text = _dumps(_struct(f"{prefix}.Key", key_fields, optional=False))
        self._source_head = {
            "version": VERSION,
            "connector": "mysql",
            "name": name,
            "db": schema.name.schema,
            "table": schema.name.table,
            "server_id": 0,
        }

    def _image(self, image: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if image is None:
            return None
        return {name: convert(image[name]) for name, convert in self._converts}

    def value(self, change: RowChange, now_ms: int) -> bytes:
        position = change.position
        source = {
            **self._source_head,
            "ts_ms": now_ms,
            "snapshot": "true" if change.op is Op.READ else "false",
            "gtid": change.txn_id,
            "file": position.file,
            "pos": position.offset,
            "row": 0,
        }
        payload = {
            "before": self._image(change.before),
            "after": self._image(change.after),
            "source": source,
            "op": change.op.value,
            "ts_ms": now_ms,
            "transaction": None,
        }
        text = '{"schema":' + self._schema_text + ',"payload":' + _dumps(payload) + "}"
        return text.encode("utf-8")

    def key(self, key_json: bytes, image: Mapping[str, Any]) -> bytes:
        payload = {name: convert(image[name]) for name, convert in self._key_converts}
        text = '{"schema":' + self._key_schema_text + ',"payload":' + _dumps(payload) + "}"
        return text.encode("utf-8")


class Debezium(KafkaCodec):
    """Debezium envelopes (see the module docstring); ``name`` is the logical server name
    (``source.name``, the prefix of schema names): the changefeed id."""

    def __init__(self, name: str) -> None:
        self.name = name

    def table(self, schema: TableSchema) -> TableEncoder:
        return _DebeziumTable(schema, self.name)

    def ddl(self, ddl: DdlEvent, now_ms: int) -> bytes:
        payload = {
            "source": {
                "version": VERSION,
                "connector": "mysql",
                "name": self.name,
                "ts_ms": now_ms,
                "db": ddl.schema,
                "file": ddl.position.file,
                "pos": ddl.position.offset,
                "position": ddl.position.to_dict(),
            },
            "databaseName": ddl.schema,
            "ddl": ddl.statement,
            "kind": ddl.kind.value,
            "tables": [{"schema": t.schema, "table": t.table} for t in ddl.tables],
            "ts_ms": now_ms,
        }
        return _dumps({"schema": None, "payload": payload}).encode("utf-8")

    def watermark(self, position: Position, now_ms: int) -> bytes:
        payload = {"watermark": position.to_dict(), "ts_ms": now_ms}
        return _dumps({"schema": None, "payload": payload}).encode("utf-8")
