"""canal-json Kafka messages back into what the consumer applies: rows, DDL, watermarks.

A row keeps its values as the text canal-json carries (``RowMessage.data``);
``apply.py`` turns them into SQL parameters by the column types of
``mysqlType``. The ``cdc-kind`` header says what a message is; a message
without it (another writer's) is read by its ``type`` and ``isDdl`` fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.sink.file.canal_json import decode_ddl
from cdc.sink.file.codec import FileFormatError
from cdc.sink.kafka.canal import WATERMARK_TYPE

__all__ = ["ConsumedEvent", "MessageError", "RowMessage", "Watermark", "decode_message"]

_ROW_TYPES = frozenset({"INSERT", "UPDATE", "DELETE"})


class MessageError(ValueError):
    """A message the consumer cannot read; it names the topic, partition and offset."""


@dataclass(frozen=True)
class RowMessage:
    """One row change as canal-json carries it (values as text, or None for NULL).

    ``kind`` is ``INSERT``, ``UPDATE`` or ``DELETE``; ``data`` the row after
    (for DELETE the removed row), ``old`` the full row before an UPDATE.
    """

    table: TableName
    kind: str
    data: Mapping[str, str | None]
    old: Mapping[str, str | None] | None
    types: Mapping[str, str]
    keys: tuple[str, ...]
    position: Position


@dataclass(frozen=True)
class Watermark:
    """Every change up to ``position`` is in the partition, before this message."""

    position: Position


ConsumedEvent = RowMessage | DdlEvent | Watermark


def _image(message: Mapping[str, Any], name: str, where: str) -> dict[str, str | None]:
    images = message.get(name)
    if not isinstance(images, list) or len(images) != 1 or not isinstance(images[0], dict):
        raise MessageError(f"{where}: {name!r} must hold exactly one row object")
    return images[0]


def _row(message: Mapping[str, Any], where: str) -> RowMessage:
    kind = message.get("type")
    types = message.get("mysqlType")
    keys = message.get("pkNames")
    if not isinstance(types, dict) or not isinstance(keys, list) or not keys:
        raise MessageError(f"{where}: a {kind} row needs mysqlType and pkNames")
    try:
        position = Position.from_dict(message["_position"])
        table = TableName(message["database"], message["table"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageError(f"{where}: bad row message: {exc}") from None
    old = _image(message, "old", where) if kind == "UPDATE" else None
    return RowMessage(
        table, str(kind), _image(message, "data", where), old, types, tuple(keys), position
    )


def decode_message(value: bytes, where: str) -> ConsumedEvent:
    """The event in one (whole) canal-json message; ``MessageError`` for anything else."""
    try:
        message = json.loads(value)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MessageError(f"{where}: not a JSON object: {exc}") from None
    if not isinstance(message, dict):
        raise MessageError(f"{where}: not a JSON object")
    if message.get("isDdl") is True:
        try:
            return decode_ddl(value, where)
        except FileFormatError as exc:
            raise MessageError(str(exc)) from None
    kind = message.get("type")
    if kind == WATERMARK_TYPE:
        try:
            return Watermark(Position.from_dict(message["_position"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageError(f"{where}: bad watermark: {exc}") from None
    if kind in _ROW_TYPES:
        return _row(message, where)
    raise MessageError(f"{where}: unknown message type {kind!r} (is this topic canal-json?)")
