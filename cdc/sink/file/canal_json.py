"""canal-json: one Canal-style JSON object per line and row change (as TiCDC writes it).

A row message, keys in this order::

    {"id":0, "database":"shop", "table":"orders", "pkNames":["id"], "isDdl":false,
     "type":"UPDATE", "es":1717000000000, "ts":1717000000000, "sql":"",
     "sqlType":{"id":4, "note":12}, "mysqlType":{"id":"int(11)", "note":"varchar(20)"},
     "data":[{"id":"7", "note":"new"}], "old":[{"id":"7", "note":"old"}],
     "_position":{"v":1, "file":"binlog.000003", "offset":1234, ...},
     "_txn":"0-1-42", "_snapshot":false}

* ``type``: ``INSERT`` (binlog insert and snapshot read), ``UPDATE``, ``DELETE``.
  ``data`` holds the after image (for DELETE the removed row, as in Canal);
  ``old`` the full before image of an UPDATE (Canal lists only the changed
  columns; the full image lets a reader move a row whose key changed), null
  otherwise.
* Values are strings or null, encoded as :mod:`cdc.sink.file.values` says;
  binary values as ISO-8859-1 code points, as Canal does.
* ``sqlType`` are ``java.sql.Types`` codes and ``mysqlType`` the column types,
  for Canal consumers; the reader uses the table version's ``schema.json``.
* ``pkNames`` are the key columns the sink identifies rows by (primary key,
  else the first NOT NULL unique key; null when there is none).
* ``es`` and ``ts`` are the time the sink encoded the row, in milliseconds:
  a row change carries no source commit time.
* Our fields start with ``_``: ``_position`` is the commit position
  (:meth:`Position.to_dict`) to resume and order by, ``_txn`` the source
  transaction (GTID) or null, ``_snapshot`` true for a snapshot read.

DDL events use the same shape with ``isDdl`` true, ``sql`` the statement,
Canal's ``type`` (``CREATE``, ``ALTER``, ``ERASE``, ``RENAME``, ``TRUNCATE``,
``CINDEX``, ``DINDEX``, ``QUERY``), ``database`` the statement's default schema,
plus ``_kind`` (the exact :class:`DdlKind`) and ``_tables``; the sink writes
them to ``ddl/`` files whatever the row protocol.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.sink.file.codec import (
    FileFormatError,
    Record,
    RowCodec,
    RowEncoder,
    decode_image,
    encode_image,
    row_key,
)
from cdc.sink.file.uri import FileProtocol
from cdc.sink.file.values import BytesForm, decoder_for, encoder_for

__all__ = ["CanalJsonCodec", "decode_ddl", "encode_ddl", "jdbc_type"]

_TYPES = {Op.CREATE: "INSERT", Op.READ: "INSERT", Op.UPDATE: "UPDATE", Op.DELETE: "DELETE"}

# java.sql.Types codes, as Canal reports them.
_JDBC = {
    "tinyint": -6,
    "smallint": 5,
    "mediumint": 4,
    "int": 4,
    "integer": 4,
    "bigint": -5,
    "bool": -6,
    "boolean": -6,
    "decimal": 3,
    "numeric": 3,
    "float": 7,
    "double": 8,
    "real": 8,
    "bit": -7,
    "year": 12,
    "date": 91,
    "datetime": 93,
    "timestamp": 93,
    "time": 92,
    "char": 1,
    "varchar": 12,
    "tinytext": 2005,
    "text": 2005,
    "mediumtext": 2005,
    "longtext": 2005,
    "binary": -2,
    "varbinary": -3,
    "tinyblob": 2004,
    "blob": 2004,
    "mediumblob": 2004,
    "longblob": 2004,
    "enum": 4,
    "set": -7,
    "json": 12,
}
_OTHER_JDBC = 2004  # geometry and anything else binary-like

_DDL_TYPES = {
    DdlKind.CREATE_TABLE: "CREATE",
    DdlKind.DROP_TABLE: "ERASE",
    DdlKind.RENAME_TABLE: "RENAME",
    DdlKind.TRUNCATE_TABLE: "TRUNCATE",
    DdlKind.ADD_INDEX: "CINDEX",
    DdlKind.DROP_INDEX: "DINDEX",
}
_ALTER_KINDS = frozenset(
    {
        DdlKind.ALTER_TABLE,
        DdlKind.ADD_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.ADD_PRIMARY_KEY,
        DdlKind.DROP_PRIMARY_KEY,
        DdlKind.ADD_TABLE_PARTITION,
        DdlKind.DROP_TABLE_PARTITION,
        DdlKind.TRUNCATE_TABLE_PARTITION,
        DdlKind.MODIFY_TABLE_COMMENT,
        DdlKind.MODIFY_TABLE_CHARSET_AND_COLLATE,
    }
)


def jdbc_type(column: Column) -> int:
    """The ``java.sql.Types`` code Canal reports for a column (``sqlType``)."""
    return _JDBC.get(column.data_type, _OTHER_JDBC)


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class _TxnCache:
    """Rows of one transaction share a position and a txn id: encode them once."""

    def __init__(self) -> None:
        self._position: Position | None = None
        self._txn: str | None = None
        self._text = ""

    def text(self, position: Position, txn: str | None) -> str:
        if position is not self._position or txn != self._txn:
            self._position, self._txn = position, txn
            self._text = f',"_position":{_dumps(position.to_dict())},"_txn":{_dumps(txn)}'
        return self._text


class _Encoder:
    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.encoders = [(c.name, encoder_for(c, BytesForm.LATIN1)) for c in schema.columns]
        self.names = [c.name for c in schema.columns]
        keys = list(schema.key_columns)
        self.head = (
            '{"id":0,"database":'
            + _dumps(schema.name.schema)
            + ',"table":'
            + _dumps(schema.name.table)
            + ',"pkNames":'
            + _dumps(keys or None)
            + ',"isDdl":false,"type":"'
        )
        self.types = (
            ',"sql":"","sqlType":'
            + _dumps({c.name: jdbc_type(c) for c in schema.columns})
            + ',"mysqlType":'
            + _dumps({c.name: c.column_type for c in schema.columns})
        )
        self.txns = _TxnCache()

    def image(self, image: Any, change: RowChange) -> str:
        texts = encode_image(image, self.encoders, change, self.schema)
        return "[" + _dumps(dict(zip(self.names, texts, strict=True))) + "]"

    def __call__(self, change: RowChange, now_ms: int) -> bytes:
        op = change.op
        data = change.before if op is Op.DELETE else change.after
        old = self.image(change.before, change) if op is Op.UPDATE else "null"
        line = (
            f'{self.head}{_TYPES[op]}","es":{now_ms},"ts":{now_ms}{self.types}'
            f',"data":{self.image(data, change)},"old":{old}'
            f"{self.txns.text(change.position, change.txn_id)}"
            f',"_snapshot":{"true" if op is Op.READ else "false"}'
            "}\n"
        )
        return line.encode("utf-8")


def _field(message: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in message:
        raise FileFormatError(where, f"message has no {name!r} field")
    value = message[name]
    if not isinstance(value, kind):
        raise FileFormatError(where, f"field {name!r} has the wrong type: {value!r:.80}")
    return value


def _position(data: Any, where: str) -> Position:
    try:
        return Position.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise FileFormatError(where, f"bad _position: {exc}") from None


def _image(message: dict[str, Any], name: str, where: str) -> dict[str, Any]:
    images = _field(message, name, list, where)
    if len(images) != 1 or not isinstance(images[0], dict):
        raise FileFormatError(where, f"{name!r} must hold exactly one row object")
    return images[0]


class CanalJsonCodec(RowCodec):
    """Row changes as canal-json lines (``CDC00000001.json``)."""

    protocol = FileProtocol.CANAL_JSON
    extension = "json"

    def encoder(self, schema: TableSchema) -> RowEncoder:
        return _Encoder(schema)

    def records(self, lines: Iterable[bytes], path: str) -> Iterator[Record]:
        last: tuple[Any, Position] | None = None
        for number, line in enumerate(lines, start=1):
            where = f"{path}:{number}"
            if not line.endswith(b"\n"):
                raise FileFormatError(where, "the last line is cut short (no newline)")
            try:
                message = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise FileFormatError(where, f"not a JSON object: {exc}") from None
            if not isinstance(message, dict):
                raise FileFormatError(where, "not a JSON object")
            raw_position = _field(message, "_position", dict, where)
            if last is None or last[0] != raw_position:
                last = (raw_position, _position(raw_position, where))
            yield Record(line, where, last[1], message)

    def decoder(self, schema: TableSchema) -> Callable[[Record], RowChange]:
        decoders = [(c.name, decoder_for(c, BytesForm.LATIN1)) for c in schema.columns]
        names = [c.name for c in schema.columns]
        name_set = set(names)

        def texts(row: dict[str, Any], where: str) -> list[Any]:
            if row.keys() != name_set:
                raise FileFormatError(
                    where,
                    f"row columns {sorted(row)} differ from schema version {schema.version} "
                    f"of {schema.name} ({names})",
                )
            return [row[name] for name in names]

        def decode(record: Record) -> RowChange:
            message, where = record.payload, record.where
            if _field(message, "isDdl", bool, where):
                raise FileFormatError(where, "a DDL message in a data file")
            table = TableName(
                _field(message, "database", str, where), _field(message, "table", str, where)
            )
            if table != schema.name:
                raise FileFormatError(
                    where, f"row of {table} in the folder of {schema.name} (moved file?)"
                )
            kind = _field(message, "type", str, where)
            snapshot = message.get("_snapshot", False) is True
            try:
                data = decode_image(texts(_image(message, "data", where), where), decoders)
                before = after = None
                if kind == "INSERT":
                    op, after = (Op.READ if snapshot else Op.CREATE), data
                elif kind == "UPDATE":
                    op, after = Op.UPDATE, data
                    before = decode_image(texts(_image(message, "old", where), where), decoders)
                elif kind == "DELETE":
                    op, before = Op.DELETE, data
                else:
                    raise FileFormatError(where, f"unknown row type {kind!r}")
            except ValueError as exc:
                if isinstance(exc, FileFormatError):
                    raise
                raise FileFormatError(where, str(exc)) from None
            txn = message.get("_txn")
            if txn is not None and not isinstance(txn, str):
                raise FileFormatError(where, f"_txn must be a string or null, not {txn!r:.40}")
            return RowChange(
                table,
                op,
                before,
                after,
                row_key(schema, data),
                record.position,
                txn,
                schema.version,
            )

        return decode


def encode_ddl(ddl: DdlEvent, now_ms: int) -> bytes:
    """A DDL event as a canal-json DDL message (one line)."""
    canal_type = "ALTER" if ddl.kind in _ALTER_KINDS else _DDL_TYPES.get(ddl.kind, "QUERY")
    message = {
        "id": 0,
        "database": ddl.schema,
        "table": ddl.tables[0].table if ddl.tables else "",
        "pkNames": None,
        "isDdl": True,
        "type": canal_type,
        "es": now_ms,
        "ts": now_ms,
        "sql": ddl.statement,
        "sqlType": None,
        "mysqlType": None,
        "data": None,
        "old": None,
        "_position": ddl.position.to_dict(),
        "_kind": ddl.kind.value,
        "_tables": [{"schema": t.schema, "table": t.table} for t in ddl.tables],
    }
    return (_dumps(message) + "\n").encode("utf-8")


def decode_ddl(data: bytes, where: str) -> DdlEvent:
    """Reads what :func:`encode_ddl` wrote; raises :class:`FileFormatError`."""
    try:
        message = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FileFormatError(where, f"not a JSON object: {exc}") from None
    if not isinstance(message, dict) or message.get("isDdl") is not True:
        raise FileFormatError(where, "not a canal-json DDL message")
    position = _position(_field(message, "_position", dict, where), where)
    tables = _field(message, "_tables", list, where)
    try:
        return DdlEvent(
            position,
            _field(message, "database", str, where),
            tuple(TableName(t["schema"], t["table"]) for t in tables),
            DdlKind.parse(_field(message, "_kind", str, where)),
            _field(message, "sql", str, where),
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise FileFormatError(where, f"bad DDL message: {exc}") from None
