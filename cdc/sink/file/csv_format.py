"""csv: TiCDC's csv layout, one record per row image, ``\\n`` terminated.

Columns of a record::

    op, table, schema, position, txn, image, <the table's columns in schema order>
    "I","orders","shop","binlog.000003:1234 gtid=0-1-42","0-1-42","after",7,"new",\\N

* ``op``: ``I`` insert (and snapshot read), ``U`` update, ``D`` delete.
* ``position``: the commit position as ``Position.__str__`` prints it
  (``FILE:OFFSET gtid=SET``); TiCDC puts its commit-ts here.
* ``txn``: the source transaction (GTID), ``\\N`` when none.
* ``image``: which row image the values are. ``after`` for an insert,
  ``snapshot`` for a snapshot read, ``before`` for a delete; an UPDATE is two
  records, ``before`` then ``after``, always adjacent (TiCDC's
  ``output-old-value`` writes an update as a pair the same way).

Quoting: every value except numbers is quoted with ``"`` and inner quotes
doubled; numbers (integer, decimal, float, year, bit columns) are not. A
quoted field may hold newlines. NULL is an unquoted ``\\N``, so the string
``\\N`` (quoted) and NULL never meet. Binary values are base64 (TiCDC's
``binary-encoding-method`` default). There is no header line: the columns
are those of the folder's ``schema.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
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
from cdc.sink.file.values import BytesForm, decoder_for, encoder_for, is_numeric

__all__ = ["CsvCodec", "split_record"]

NULL = "\\N"
META_COLUMNS = ("op", "table", "schema", "position", "txn", "image")
_OPS = {Op.CREATE: "I", Op.READ: "I", Op.UPDATE: "U", Op.DELETE: "D"}
_AFTER_IMAGES = {Op.CREATE: "after", Op.READ: "snapshot"}


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _field(text: str | None, numeric: bool) -> str:
    if text is None:
        return NULL
    return text if numeric else _quote(text)


class _Encoder:
    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.encoders = [(c.name, encoder_for(c, BytesForm.BASE64)) for c in schema.columns]
        self.numeric = [is_numeric(c) for c in schema.columns]
        self.names = f"{_quote(schema.name.table)},{_quote(schema.name.schema)}"
        self._position: Position | None = None
        self._position_text = ""

    def line(self, op: str, change: RowChange, image_name: str, image: Any) -> str:
        if change.position is not self._position:
            self._position = change.position
            self._position_text = _quote(str(change.position))
        txn = NULL if change.txn_id is None else _quote(change.txn_id)
        texts = encode_image(image, self.encoders, change, self.schema)
        values = ",".join(_field(t, n) for t, n in zip(texts, self.numeric, strict=True))
        return f'"{op}",{self.names},{self._position_text},{txn},"{image_name}",{values}\n'

    def __call__(self, change: RowChange, now_ms: int) -> bytes:
        op = change.op
        letter = _OPS[op]
        if op is Op.UPDATE:
            text = self.line(letter, change, "before", change.before) + self.line(
                letter, change, "after", change.after
            )
        elif op is Op.DELETE:
            text = self.line(letter, change, "before", change.before)
        else:
            text = self.line(letter, change, _AFTER_IMAGES[op], change.after)
        return text.encode("utf-8")


def split_record(text: str, where: str) -> list[str | None]:
    """The fields of one record (without its ``\\n``): quoted fields as their text,
    an unquoted ``\\N`` as None, other unquoted fields as they are."""
    fields: list[str | None] = []
    i, n = 0, len(text)
    while True:
        if i < n and text[i] == '"':
            parts = []
            j = i + 1
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise FileFormatError(where, "a quoted field is not closed")
                parts.append(text[j:k])
                if k + 1 < n and text[k + 1] == '"':
                    parts.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            fields.append("".join(parts))
        else:
            k = text.find(",", i)
            k = n if k < 0 else k
            token = text[i:k]
            if '"' in token:
                raise FileFormatError(where, f"a quote inside an unquoted field: {token!r:.40}")
            fields.append(None if token == NULL else token)
            i = k
        if i == n:
            return fields
        if text[i] != ",":
            raise FileFormatError(where, f"text after a quoted field: {text[i : i + 20]!r}")
        i += 1


def _lines_to_records(lines: Iterable[bytes], path: str) -> Iterator[tuple[bytes, str]]:
    """Joins physical lines into records: a record ends at a newline outside quotes
    (an even number of quote characters so far)."""
    pending: list[bytes] = []
    quotes = 0
    start = 1
    for number, line in enumerate(lines, start=1):
        if not pending:
            start = number
        pending.append(line)
        quotes += line.count(b'"')
        if quotes % 2 == 0 and line.endswith(b"\n"):
            yield b"".join(pending), f"{path}:{start}"
            pending, quotes = [], 0
    if pending:
        raise FileFormatError(f"{path}:{start}", "the last record is cut short")


class _Parsed:
    """One decoded physical record: meta fields and value texts."""

    __slots__ = ("image", "op", "position_text", "schema", "table", "txn", "values")

    def __init__(self, fields: list[str | None], where: str) -> None:
        if len(fields) < len(META_COLUMNS) + 1:
            raise FileFormatError(where, f"{len(fields)} fields; a record has at least 7")
        op, table, schema, position, txn, image = fields[: len(META_COLUMNS)]
        for name, value in (("op", op), ("table", table), ("schema", schema)):
            if value is None:
                raise FileFormatError(where, f"the {name} field is NULL")
        if position is None or image is None:
            raise FileFormatError(where, "the position or image field is NULL")
        self.op, self.table, self.schema = op, table, schema
        self.position_text, self.txn, self.image = position, txn, image
        self.values = fields[len(META_COLUMNS) :]


class CsvCodec(RowCodec):
    """Row changes as csv records (``CDC00000001.csv``)."""

    protocol = FileProtocol.CSV
    extension = "csv"

    def encoder(self, schema: TableSchema) -> RowEncoder:
        return _Encoder(schema)

    def records(self, lines: Iterable[bytes], path: str) -> Iterator[Record]:
        last: tuple[str, Position] | None = None
        held: tuple[bytes, str, _Parsed] | None = None
        for raw, where in _lines_to_records(lines, path):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FileFormatError(where, f"not UTF-8: {exc}") from None
            parsed = _Parsed(split_record(text[:-1], where), where)
            if last is None or last[0] != parsed.position_text:
                try:
                    last = (parsed.position_text, Position.parse(parsed.position_text))
                except ValueError as exc:
                    raise FileFormatError(where, f"bad position: {exc}") from None
            if held is not None:
                first_raw, first_where, first = held
                held = None
                if parsed.op != "U" or parsed.image != "after":
                    raise FileFormatError(
                        first_where, "an UPDATE's before image is not followed by its after image"
                    )
                if parsed.position_text != first.position_text:
                    raise FileFormatError(where, "the two images of an UPDATE differ in position")
                yield Record(first_raw + raw, first_where, last[1], (first, parsed))
                continue
            if parsed.op == "U":
                if parsed.image != "before":
                    raise FileFormatError(where, "an UPDATE's after image without its before image")
                held = (raw, where, parsed)
                continue
            yield Record(raw, where, last[1], (parsed,))
        if held is not None:
            raise FileFormatError(held[1], "an UPDATE's before image ends the file")

    def decoder(self, schema: TableSchema) -> Callable[[Record], RowChange]:
        decoders = [(c.name, decoder_for(c, BytesForm.BASE64)) for c in schema.columns]
        width = len(decoders)

        def image(parsed: _Parsed, where: str) -> dict[str, Any]:
            if len(parsed.values) != width:
                raise FileFormatError(
                    where,
                    f"{len(parsed.values)} values; schema version {schema.version} of "
                    f"{schema.name} has {width} columns",
                )
            try:
                return decode_image(parsed.values, decoders)
            except ValueError as exc:
                raise FileFormatError(where, str(exc)) from None

        def decode(record: Record) -> RowChange:
            where = record.where
            first = record.payload[0]
            table = TableName(first.schema, first.table)
            if table != schema.name:
                raise FileFormatError(
                    where, f"row of {table} in the folder of {schema.name} (moved file?)"
                )
            before = after = None
            if first.op == "U":
                op = Op.UPDATE
                before = image(first, where)
                after = image(record.payload[1], where)
            elif first.op == "I" and first.image in ("after", "snapshot"):
                op = Op.CREATE if first.image == "after" else Op.READ
                after = image(first, where)
            elif first.op == "D" and first.image == "before":
                op = Op.DELETE
                before = image(first, where)
            else:
                raise FileFormatError(where, f"unknown op/image {first.op!r}/{first.image!r}")
            keyed = after if after is not None else before
            assert keyed is not None  # every op above sets one image or both
            return RowChange(
                table,
                op,
                before,
                after,
                row_key(schema, keyed),
                record.position,
                first.txn,
                schema.version,
            )

        return decode
