"""Events to and from the ``cdc.v1`` subscription messages, without losing a bit.

The value mapping is the table in ``proto/cdc/v1/subscription.proto`` (message
``Value``); both directions live here so they cannot drift, and the unit tests
round-trip every canonical type of ``cdc.typeconv``. Text forms are the ones a
non-Python client can parse with any ISO-8601 reader, except TIME, which keeps
MySQL's ``[-]HHH:MM:SS`` because it is a duration, not a time of day.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.position import FORMAT_VERSION as POSITION_FORMAT
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.typeconv import RawDate, RawDateTime

__all__ = [
    "CodecError",
    "event_from_proto",
    "event_to_proto",
    "events_to_batch",
    "position_from_proto",
    "position_to_proto",
    "value_from_proto",
    "value_to_proto",
]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_U64_MAX = 2**64 - 1
_US = timedelta(microseconds=1)
_TIME = re.compile(r"(-)?(\d+):([0-5]\d):([0-5]\d)(?:\.(\d{6}))?")
_RAW_DATE = re.compile(r"(\d{4,})-(\d{2})-(\d{2})")
_RAW_DATETIME = re.compile(r"(\d{4,})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{6}))?")

_OPS = {
    Op.CREATE: pb.OP_CREATE,
    Op.UPDATE: pb.OP_UPDATE,
    Op.DELETE: pb.OP_DELETE,
    Op.READ: pb.OP_READ,
}
_OPS_BACK = {code: op for op, code in _OPS.items()}


class CodecError(ValueError):
    """A value or message that the mapping cannot carry or read; names what it was."""


# --- values ------------------------------------------------------------------


def _time_text(value: timedelta) -> str:
    micros = value // _US
    sign = "-" if micros < 0 else ""
    seconds, us = divmod(abs(micros), 1_000_000)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    text = f"{sign}{hours:02d}:{minute:02d}:{second:02d}"
    return f"{text}.{us:06d}" if us else text


def _int_into(value: int, out: pb.Value) -> None:
    if _I64_MIN <= value <= _I64_MAX:
        out.int = value
    elif _I64_MAX < value <= _U64_MAX:
        out.uint = value
    else:
        out.big_int = str(value)


def value_to_proto(value: Any, out: pb.Value | None = None) -> pb.Value:
    """Fill ``out`` (or a new ``Value``) with ``value``; ``CodecError`` for other types."""
    out = pb.Value() if out is None else out
    if value is None:
        out.null = 0
    elif isinstance(value, int):
        _int_into(int(value), out)
    elif isinstance(value, str):
        out.text = value
    elif isinstance(value, bytes | bytearray | memoryview):
        out.bytes = bytes(value)
    elif isinstance(value, Decimal):
        out.decimal = str(value)
    elif isinstance(value, float):
        out.double = value
    elif isinstance(value, datetime):
        if value.tzinfo is None:
            out.datetime = value.isoformat(sep=" ")
        else:
            out.timestamp = value.astimezone(UTC).isoformat(sep=" ")
    elif isinstance(value, date):
        out.date = value.isoformat()
    elif isinstance(value, timedelta):
        out.time = _time_text(value)
    elif isinstance(value, RawDateTime):
        out.raw_datetime = str(value)
    elif isinstance(value, RawDate):
        out.raw_date = str(value)
    elif isinstance(value, frozenset | set):
        if not all(isinstance(member, str) for member in value):
            raise CodecError(f"SET members must be strings, not {sorted(map(repr, value))}")
        out.set.SetInParent()
        out.set.members.extend(sorted(value))
    else:
        raise CodecError(
            f"cannot send a {type(value).__name__} value ({value!r:.60}): not a canonical "
            "column value (see cdc.typeconv)"
        )
    return out


def _match(pattern: re.Pattern[str], text: str, what: str) -> re.Match[str]:
    found = pattern.fullmatch(text)
    if found is None:
        raise CodecError(f"malformed {what} text {text!r}")
    return found


def _micros(text: str | None) -> int:
    return int(text) if text else 0


def value_from_proto(message: pb.Value) -> Any:
    """The canonical Python value of a ``Value``; an unset one is ``CodecError``."""
    kind = message.WhichOneof("kind")
    try:
        return _DECODERS[kind](message) if kind is not None else _unset()
    except (ValueError, TypeError, ArithmeticError) as exc:
        if isinstance(exc, CodecError):
            raise
        raise CodecError(f"malformed {kind} value {getattr(message, kind)!r}: {exc}") from None


def _unset() -> Any:
    raise CodecError("a Value with no field set (null must be set explicitly)")


def _time(message: pb.Value) -> timedelta:
    sign, hours, minutes, seconds, us = _match(_TIME, message.time, "time").groups()
    total = timedelta(
        hours=int(hours), minutes=int(minutes), seconds=int(seconds), microseconds=_micros(us)
    )
    return -total if sign else total


def _timestamp(message: pb.Value) -> datetime:
    value = datetime.fromisoformat(message.timestamp)
    if value.tzinfo is None:
        raise CodecError(f"timestamp {message.timestamp!r} has no UTC offset")
    return value.astimezone(UTC)


def _datetime(message: pb.Value) -> datetime:
    value = datetime.fromisoformat(message.datetime)
    if value.tzinfo is not None:
        raise CodecError(f"datetime {message.datetime!r} must not carry an offset")
    return value


def _raw_date(message: pb.Value) -> RawDate:
    year, month, day = _match(_RAW_DATE, message.raw_date, "raw_date").groups()
    return RawDate(int(year), int(month), int(day))


def _raw_datetime(message: pb.Value) -> RawDateTime:
    found = _match(_RAW_DATETIME, message.raw_datetime, "raw_datetime")
    year, month, day, hour, minute, second, us = found.groups()
    return RawDateTime(
        int(year), int(month), int(day), int(hour), int(minute), int(second), _micros(us)
    )


_DECODERS = {
    "null": lambda m: None,
    "int": lambda m: m.int,
    "uint": lambda m: m.uint,
    "big_int": lambda m: int(m.big_int),
    "decimal": lambda m: Decimal(m.decimal),
    "double": lambda m: m.double,
    "text": lambda m: m.text,
    "bytes": lambda m: bytes(m.bytes),
    "date": lambda m: date.fromisoformat(m.date),
    "datetime": _datetime,
    "timestamp": _timestamp,
    "time": _time,
    "raw_date": _raw_date,
    "raw_datetime": _raw_datetime,
    "set": lambda m: frozenset(m.set.members),
}


# --- positions and events ----------------------------------------------------


def position_to_proto(position: Position, out: pb.Position | None = None) -> pb.Position:
    out = pb.Position() if out is None else out
    out.file = position.file
    out.offset = position.offset
    if position.gtid is not None:
        out.gtid = str(position.gtid)
        if position.gtid.flavor is not None:
            out.gtid_flavor = position.gtid.flavor.value
    return out


def position_from_proto(message: pb.Position) -> Position:
    data = {
        "v": POSITION_FORMAT,
        "file": message.file,
        "offset": message.offset,
        "gtid": message.gtid if message.HasField("gtid") else None,
        "gtid_flavor": message.gtid_flavor or None,
    }
    try:
        return Position.from_dict(data)
    except ValueError as exc:
        raise CodecError(f"malformed position {data}: {exc}") from None


def _image_into(image: Mapping[str, Any], out: pb.RowImage, table: TableName) -> None:
    out.SetInParent()
    for name, value in image.items():
        column = out.columns.add()
        column.name = name
        try:
            value_to_proto(value, column.value)
        except CodecError as exc:
            raise CodecError(f"column {table}.{name}: {exc}") from None


def _image(message: pb.RowImage) -> dict[str, Any]:
    return {column.name: value_from_proto(column.value) for column in message.columns}


def _table(message: pb.TableName) -> TableName:
    return TableName(message.schema, message.name)


def _table_into(table: TableName, out: pb.TableName) -> None:
    out.schema = table.schema
    out.name = table.table


def event_to_proto(event: RowChange | DdlEvent, out: pb.Event | None = None) -> pb.Event:
    """The ``Event`` message of a row change or DDL event."""
    out = pb.Event() if out is None else out
    position_to_proto(event.position, out.position)
    if isinstance(event, RowChange):
        row = out.row
        _table_into(event.table, row.table)
        row.op = _OPS[event.op]
        if event.before is not None:
            _image_into(event.before, row.before, event.table)
        if event.after is not None:
            _image_into(event.after, row.after, event.table)
        for value in event.key:
            value_to_proto(value, row.key.add())
        if event.txn_id is not None:
            row.txn_id = event.txn_id
        row.schema_version = event.schema_version
    elif isinstance(event, DdlEvent):
        ddl = out.ddl
        ddl.schema = event.schema
        for table in event.tables:
            _table_into(table, ddl.tables.add())
        ddl.kind = event.kind.value
        ddl.statement = event.statement
    else:
        raise CodecError(f"cannot send {type(event).__name__}: not a RowChange or DdlEvent")
    return out


def event_from_proto(message: pb.Event) -> RowChange | DdlEvent:
    """The ``RowChange`` or ``DdlEvent`` an ``Event`` carries, with canonical values."""
    position = position_from_proto(message.position)
    kind = message.WhichOneof("kind")
    try:
        if kind == "row":
            row = message.row
            if row.op not in _OPS_BACK:
                raise CodecError(f"row event at {position} has no valid op ({row.op})")
            return RowChange(
                table=_table(row.table),
                op=_OPS_BACK[row.op],
                before=_image(row.before) if row.HasField("before") else None,
                after=_image(row.after) if row.HasField("after") else None,
                key=tuple(value_from_proto(v) for v in row.key),
                position=position,
                txn_id=row.txn_id if row.HasField("txn_id") else None,
                schema_version=row.schema_version,
            )
        if kind == "ddl":
            ddl = message.ddl
            return DdlEvent(
                position=position,
                schema=ddl.schema,
                tables=tuple(_table(t) for t in ddl.tables),
                kind=DdlKind.parse(ddl.kind),
                statement=ddl.statement,
            )
    except CodecError:
        raise
    except ValueError as exc:
        raise CodecError(f"malformed event at {position}: {exc}") from None
    raise CodecError(f"event at {position} is neither a row nor a DDL event")


def events_to_batch(batch_id: int, events: Iterable[RowChange | DdlEvent]) -> pb.Batch:
    """A ``Batch`` message of ``events``."""
    out = pb.Batch(batch_id=batch_id)
    for event in events:
        event_to_proto(event, out.events.add())
    return out
