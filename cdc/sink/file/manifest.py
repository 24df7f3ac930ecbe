"""The JSON files that describe the data: ``metadata`` and each version's ``schema.json``.

``metadata`` (rewritten on every flush, only after the data it covers)::

    {"v": 1, "changefeed": "orders-to-files", "protocol": "canal-json",
     "checkpoint": {"v": 1, "file": "binlog.000003", "offset": 1234, "gtid": "0-1-42",
                    "gtid_flavor": "mariadb"},
     "tables": {"shop.orders": {"v": 1, "file": "binlog.000003", "offset": 1234, ...}},
     "updated": "2024-05-31T10:00:00.123456+00:00"}

``tables`` holds each table's checkpoint (keys are ``str(TableName)``, which
quotes names holding dots): every change of the table at or before it is in
finished files under the root. Tables move through the binlog at their own
pace (a table that joins late is read by a catch-up reader behind the
others), so one position cannot say this for all of them. ``checkpoint`` is
the highest position any of them reached, null until the first flush. A root
written before ``tables`` existed has none: its ``checkpoint`` holds for
every table (:meth:`Metadata.checkpoint_of`). ``schema.json``::

    {"v": 1, "table": <TableSchema.to_dict()>,
     "ddl": {"position": {...}, "schema": "shop", "kind": "add column",
             "statement": "ALTER TABLE orders ADD COLUMN note text"}}

``ddl`` is the last DDL on the table this sink recorded before the version's
first row, null when the version predates the sink's run. Readers switch on
``"v"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdc.model.events import DdlEvent, DdlKind
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.file.codec import FileFormatError
from cdc.sink.file.layout import METADATA_FILE, write_atomic
from cdc.sink.file.uri import FileProtocol

__all__ = [
    "FORMAT_VERSION",
    "Metadata",
    "SchemaFile",
    "read_metadata",
    "read_schema_file",
    "schema_file_bytes",
    "write_metadata",
]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Metadata:
    """The root's ``metadata`` file: whose files these are and how far they are complete."""

    changefeed: str
    protocol: FileProtocol
    checkpoint: Position | None
    #: Each table's checkpoint; None in a root written before there were per-table ones.
    tables: Mapping[TableName, Position] | None = field(default_factory=dict)
    updated: str = ""

    def checkpoint_of(self, table: TableName) -> Position | None:
        """How far ``table``'s changes are complete in the files (None: none of them)."""
        if self.tables is None:
            return self.checkpoint
        return self.tables.get(table)

    def to_bytes(self) -> bytes:
        tables = {} if self.tables is None else self.tables
        data = {
            "v": FORMAT_VERSION,
            "changefeed": self.changefeed,
            "protocol": self.protocol.value,
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_dict(),
            "tables": {str(t): p.to_dict() for t, p in sorted(tables.items(), key=_by_name)},
            "updated": self.updated or datetime.now(UTC).isoformat(),
        }
        return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def _by_name(item: tuple[TableName, Position]) -> str:
    return str(item[0])


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FileFormatError(str(path), f"not valid JSON: {exc}") from None


def _version(data: Any, where: str, what: str) -> None:
    if not isinstance(data, dict):
        raise FileFormatError(where, f"{what} must be a JSON object")
    if data.get("v") != FORMAT_VERSION:
        raise FileFormatError(
            where,
            f"unsupported {what} format version {data.get('v')!r} "
            f"(this build reads version {FORMAT_VERSION})",
        )


def read_metadata(root: Path) -> Metadata | None:
    """The root's metadata; None when there is no ``metadata`` file."""
    path = root / METADATA_FILE
    if not path.is_file():
        return None
    where = str(path)
    data = _load(path)
    _version(data, where, "metadata")
    try:
        protocol = FileProtocol(data.get("protocol"))
    except ValueError:
        raise FileFormatError(where, f"unknown protocol {data.get('protocol')!r}") from None
    changefeed = data.get("changefeed")
    if not isinstance(changefeed, str) or not changefeed:
        raise FileFormatError(where, "changefeed must be a non-empty string")
    checkpoint = data.get("checkpoint")
    try:
        position = None if checkpoint is None else Position.from_dict(checkpoint)
    except ValueError as exc:
        raise FileFormatError(where, f"bad checkpoint: {exc}") from None
    raw = data.get("tables")
    tables: dict[TableName, Position] | None = None
    if raw is not None:
        if not isinstance(raw, dict):
            raise FileFormatError(where, "tables must be a JSON object")
        try:
            tables = {TableName.parse(k): Position.from_dict(v) for k, v in raw.items()}
        except ValueError as exc:
            raise FileFormatError(where, f"bad table checkpoint: {exc}") from None
    return Metadata(changefeed, protocol, position, tables, str(data.get("updated", "")))


def write_metadata(root: Path, metadata: Metadata) -> None:
    """Replaces the root's metadata atomically."""
    write_atomic(root / METADATA_FILE, metadata.to_bytes())


@dataclass(frozen=True)
class SchemaFile:
    """One version folder's ``schema.json``."""

    schema: TableSchema
    ddl: DdlEvent | None


def schema_file_bytes(schema: TableSchema, ddl: DdlEvent | None) -> bytes:
    """The content of ``schema.json`` for ``schema``, made by ``ddl`` (None: unknown)."""
    data = {
        "v": FORMAT_VERSION,
        "table": schema.to_dict(),
        "ddl": None
        if ddl is None
        else {
            "position": ddl.position.to_dict(),
            "schema": ddl.schema,
            "kind": ddl.kind.value,
            "tables": [{"schema": t.schema, "table": t.table} for t in ddl.tables],
            "statement": ddl.statement,
        },
    }
    return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def read_schema_file(path: Path) -> SchemaFile:
    """Reads a ``schema.json``; raises :class:`FileFormatError` naming the file."""
    where = str(path)
    data = _load(path)
    _version(data, where, "schema.json")
    try:
        schema = TableSchema.from_dict(data.get("table"))
        raw = data.get("ddl")
        ddl = None
        if raw is not None:
            ddl = DdlEvent(
                Position.from_dict(raw["position"]),
                raw["schema"],
                tuple(TableName(t["schema"], t["table"]) for t in raw.get("tables", [])),
                DdlKind.parse(raw["kind"]),
                raw["statement"],
            )
    except (ValueError, TypeError, KeyError) as exc:
        raise FileFormatError(where, f"bad schema.json: {exc}") from None
    return SchemaFile(schema, ddl)
