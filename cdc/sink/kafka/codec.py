"""What a Kafka protocol encodes: rows (per table version), DDL and watermarks.

A protocol (``canal.py``, ``debezium.py``) turns a change into the value and
the key of one Kafka message; the sink adds the ``cdc-kind`` header (``row``,
``ddl``, ``watermark``) so a consumer can tell them apart before parsing, and
splits a value larger than ``max-message-bytes`` into fragments
(``fragments.py``). Every protocol keys a row by the same key texts, so the
partition of a row is the same whichever protocol writes it.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Mapping
from typing import Any

from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.sink.file.values import BytesForm, ValueEncoder, encoder_for

__all__ = ["KafkaCodec", "KeyTexts", "TableEncoder"]

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class KeyTexts:
    """A table version's key values as text (``cdc.sink.file.values``): what partitions
    a row, whatever the protocol."""

    def __init__(self, schema: TableSchema) -> None:
        by_name = {c.name: c for c in schema.columns}
        self.names = tuple(schema.key_columns)
        self._encoders: list[tuple[str, ValueEncoder]] = [
            (name, encoder_for(by_name[name], BytesForm.LATIN1)) for name in self.names
        ]

    def json(self, image: Mapping[str, Any]) -> bytes:
        """``{"<key column>": "<text>", ...}`` of a row: what partitions it, and its Kafka
        key in canal-json."""
        return _dumps({name: encode(image[name]) for name, encode in self._encoders}).encode(
            "utf-8"
        )


class TableEncoder(abc.ABC):
    """Encodes the rows of one table version."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.keys = KeyTexts(schema)

    @abc.abstractmethod
    def value(self, change: RowChange, now_ms: int) -> bytes:
        """The message value of ``change`` (a row of this table version)."""

    @abc.abstractmethod
    def key(self, key_json: bytes, image: Mapping[str, Any]) -> bytes:
        """The message key of the row ``image``, whose key as text is ``key_json``
        (:meth:`KeyTexts.json`)."""


class KafkaCodec(abc.ABC):
    """One protocol: its table encoders, DDL messages and watermark messages."""

    @abc.abstractmethod
    def table(self, schema: TableSchema) -> TableEncoder:
        """The encoder of ``schema``'s rows (resolved once per table version)."""

    @abc.abstractmethod
    def ddl(self, ddl: DdlEvent, now_ms: int) -> bytes:
        """The message value of a DDL event."""

    @abc.abstractmethod
    def watermark(self, position: Position, now_ms: int) -> bytes:
        """The message value saying every change up to ``position`` is in the topic."""
