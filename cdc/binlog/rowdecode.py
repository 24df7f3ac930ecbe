"""Row events to canonical values, from the binlog's own FULL metadata.

python-mysql-replication (1.0.17) streams the events; its value readers are
not used, because they lose information: zero dates and dates with zero
parts become None (indistinguishable from NULL), an empty SET becomes None,
YEAR 0000 becomes 1900, BIT becomes a '0101' string, TIMESTAMP a naive
datetime, a TIME(3) of -01:02:03.004 comes out as -01:02:02.996, BINARY(n)
loses the zero padding the server stripped when logging, latin1 bytes 0x81/
0x8D/0x8F/0x90/0x9D raise UnicodeDecodeError, and ENUM/SET labels outside
UTF-8 become ''. It is also about five times slower. Instead::

    BinLogStreamReader(only_events=[TableMapEvent, WriteRowsEvent,
                                    UpdateRowsEvent, DeleteRowsEvent], ...)
      TableMapEvent --> RowDecoder.table_map(ev) --> BinlogTable (our Columns,
                        |                           one fused reader per column),
                        |                           remembered by table id
      RowsEvent -----> RowDecoder.rows(ev) --> [(before, after), ...]
                                                canonical tuples in column order

``rows`` works on the event's raw packet: (1) skip the post-header, column
count and present-columns bitmaps; (2) per row image read the NULL bitmap,
then call each column's reader, which unpacks the binlog bytes and applies
the ``cdc.typeconv`` binlog converter (skipped where it is the identity);
(3) pair images by event kind: insert ``(None, after)``, delete ``(before,
None)``, update ``(before, after)``. The library's lazy ``event.rows`` is never
touched, so its decoding cost is never paid.

Generated columns: MariaDB 10.11 with ``binlog_row_image=FULL`` logs VIRTUAL
and STORED generated columns in every image (before and after) with their
computed values, and the table map does not mark them as generated. So
:class:`BinlogTable` columns carry ``generated=False``; which columns are
generated must come from the table schema (information_schema), and sinks
skip them (``cdc.typeconv.writable_columns``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import CHARSET, FIELD_TYPE
from pymysqlreplication.row_event import (
    PartialUpdateRowsEvent,
    RowsEvent,
    TableMapEvent,
)

from cdc import typeconv
from cdc.binlog.imagereader import ImageReader, Layout, compile_image_reader
from cdc.model.schema import Column

__all__ = [
    "DELETE_EVENTS",
    "UPDATE_EVENTS",
    "WRITE_EVENTS",
    "BinlogDecodeError",
    "BinlogTable",
    "Row",
    "RowChange",
    "RowDecoder",
    "TableCache",
    "columns_from_table_map",
    "decode_rows",
    "parse_table_map",
    "rows_body",
    "table_map_body",
]

Row = tuple[Any, ...]
RowChange = tuple[Row | None, Row | None]
Reader = Callable[[bytes, int], tuple[Any, int]]

_HEADER = 20  # the OK byte of the replication packet plus the 19-byte event header
_ROWS_POST_HEADER = {1: 8, 2: 10}
_V2_EVENTS = frozenset({0x1E, 0x1F, 0x20})


class BinlogDecodeError(ValueError):
    """A row or table-map event this module cannot decode exactly; the message
    says which table, column and binlog position, and what to check."""


@dataclass(frozen=True, slots=True)
class _Field:
    """Per-column binlog encoding details from the table map's metadata block."""

    type: int
    max_length: int = 0
    length_size: int = 0
    fsp: int = 0
    precision: int = 0
    scale: int = 0
    bits: int = 0
    size: int = 0


@dataclass(frozen=True)
class BinlogTable:
    """One table as a table-map event describes it: our ``Column``s built from
    the FULL metadata (names, types, signedness, charsets, ENUM/SET members,
    nullability), the primary key, and the per-column readers."""

    schema: str
    table: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    readers: tuple[Reader, ...] = field(repr=False, compare=False)
    image: ImageReader | None = field(default=None, repr=False, compare=False)
    """The compiled reader of an image (``imagereader.py``); None: ``read_image``."""

    def read_image(self, data: bytes, pos: int) -> tuple[Row, int]:
        """Read one row image at ``pos``: its NULL bitmap, then every column, one by
        one."""
        width = (len(self.readers) + 7) >> 3
        nulls = data[pos] if width == 1 else int.from_bytes(data[pos : pos + width], "little")
        pos += width
        values: list[Any] = []
        append = values.append
        if nulls == 0:
            for reader in self.readers:
                value, pos = reader(data, pos)
                append(value)
        else:
            for reader in self.readers:
                if nulls & 1:
                    append(None)
                else:
                    value, pos = reader(data, pos)
                    append(value)
                nulls >>= 1
        return tuple(values), pos


# --- table map ---------------------------------------------------------------


class _Cursor:
    """Sequential reader over a table-map body (not a hot path)."""

    def __init__(self, data: bytes, pos: int, end: int) -> None:
        self.data, self.pos, self.end = data, pos, end

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise BinlogDecodeError("table map event is truncated")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def u8(self) -> int:
        return self.take(1)[0]

    def lenenc(self) -> int:
        first = self.u8()
        if first < 0xFB:
            return first
        size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
        if size is None:
            raise BinlogDecodeError(f"bad length-encoded integer prefix {first:#x}")
        return int.from_bytes(self.take(size), "little")

    def lenenc_bytes(self) -> bytes:
        return self.take(self.lenenc())


# Types carrying a SIGNEDNESS bit (MySQL's has_signedess_information_type):
# YEAR and the pre-5.0 DECIMAL included, BIT not.
_NUMERIC = frozenset(
    {
        FIELD_TYPE.DECIMAL,
        FIELD_TYPE.YEAR,
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONG,
        FIELD_TYPE.LONGLONG,
        FIELD_TYPE.NEWDECIMAL,
        FIELD_TYPE.FLOAT,
        FIELD_TYPE.DOUBLE,
    }
)
_CHARACTER = frozenset(
    {FIELD_TYPE.STRING, FIELD_TYPE.VAR_STRING, FIELD_TYPE.VARCHAR, FIELD_TYPE.BLOB}
)
_ENUM_SET = frozenset({FIELD_TYPE.ENUM, FIELD_TYPE.SET})
_MBMAXLEN = {
    "utf8mb4": 4,
    "utf8mb3": 3,
    "utf8": 3,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "ucs2": 2,
    "big5": 2,
    "sjis": 2,
    "cp932": 2,
    "gbk": 2,
    "gb2312": 2,
    "euckr": 2,
    "ujis": 3,
    "eucjpms": 3,
    "gb18030": 4,
}
_INT_NAMES = {
    FIELD_TYPE.TINY: "tinyint",
    FIELD_TYPE.SHORT: "smallint",
    FIELD_TYPE.INT24: "mediumint",
    FIELD_TYPE.LONG: "int",
    FIELD_TYPE.LONGLONG: "bigint",
}
_BLOB_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
_GEOMETRY_NAMES = typeconv.SPATIAL_TYPES


def _read_field(cursor: _Cursor, type_code: int) -> _Field:
    """Decode one column's entry of the table map's metadata block."""
    if type_code in (FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE):
        return _Field(type_code, size=cursor.u8())
    if type_code in (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY, FIELD_TYPE.JSON):
        return _Field(type_code, length_size=cursor.u8())
    if type_code == FIELD_TYPE.VARCHAR:
        return _Field(type_code, max_length=int.from_bytes(cursor.take(2), "little"))
    if type_code in (FIELD_TYPE.TIMESTAMP2, FIELD_TYPE.DATETIME2, FIELD_TYPE.TIME2):
        return _Field(type_code, fsp=cursor.u8())
    if type_code == FIELD_TYPE.NEWDECIMAL:
        return _Field(type_code, precision=cursor.u8(), scale=cursor.u8())
    if type_code == FIELD_TYPE.BIT:
        bits, whole_bytes = cursor.u8(), cursor.u8()
        return _Field(type_code, bits=whole_bytes * 8 + bits)
    if type_code in (FIELD_TYPE.STRING, FIELD_TYPE.VAR_STRING):
        high, low = cursor.u8(), cursor.u8()
        if high in _ENUM_SET:
            return _Field(high, size=low)
        return _Field(FIELD_TYPE.STRING, max_length=(((high << 4) & 0x300) ^ 0x300) + low)
    return _Field(type_code)


@dataclass
class _Optional:
    """The optional metadata (binlog_row_metadata=FULL) of one table map."""

    unsigned: list[bool] = field(default_factory=list)
    charsets: list[int] = field(default_factory=list)
    enum_set_charsets: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    set_values: list[list[bytes]] = field(default_factory=list)
    enum_values: list[list[bytes]] = field(default_factory=list)
    geometry_types: list[int] = field(default_factory=list)
    primary_key: list[int] = field(default_factory=list)


def _bool_list(raw: bytes, count: int) -> list[bool]:
    return [bool(raw[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]


def _charset_list(cursor: _Cursor, end: int, count: int, per_column: bool) -> list[int]:
    if per_column:
        return [cursor.lenenc() for _ in range(count)]
    default = cursor.lenenc()
    found = [default] * count
    while cursor.pos < end:
        index = cursor.lenenc()
        collation = cursor.lenenc()
        if index < count:
            found[index] = collation
    return found


def _string_lists(cursor: _Cursor, end: int) -> list[list[bytes]]:
    out = []
    while cursor.pos < end:
        out.append([cursor.lenenc_bytes() for _ in range(cursor.lenenc())])
    return out


def _read_optional(cursor: _Cursor, fields: list[_Field], dbms: str) -> _Optional:
    meta = _Optional()
    types = [f.type for f in fields]
    character = [t in _CHARACTER or (t == FIELD_TYPE.GEOMETRY and dbms == "mariadb") for t in types]
    n_numeric = sum(t in _NUMERIC for t in types)
    n_char = sum(character)
    n_enum_set = sum(t in _ENUM_SET for t in types)
    while cursor.pos < cursor.end:
        kind = cursor.u8()
        length = cursor.lenenc()
        end = cursor.pos + length
        if kind == 1:
            meta.unsigned = _bool_list(cursor.take(length), n_numeric)
        elif kind in (2, 3):
            meta.charsets = _charset_list(cursor, end, n_char, per_column=kind == 3)
        elif kind == 4:
            while cursor.pos < end:
                meta.names.append(cursor.lenenc_bytes().decode("utf-8"))
        elif kind == 5:
            meta.set_values = _string_lists(cursor, end)
        elif kind == 6:
            meta.enum_values = _string_lists(cursor, end)
        elif kind == 7:
            while cursor.pos < end:
                meta.geometry_types.append(cursor.lenenc())
        elif kind == 8:
            while cursor.pos < end:
                meta.primary_key.append(cursor.lenenc())
        elif kind == 9:
            while cursor.pos < end:
                meta.primary_key.append(cursor.lenenc())
                cursor.lenenc()
        elif kind in (10, 11):
            meta.enum_set_charsets = _charset_list(cursor, end, n_enum_set, per_column=kind == 11)
        cursor.pos = end
    if cursor.pos != cursor.end:
        raise BinlogDecodeError("table map optional metadata overruns the event")
    return meta


def _charset_names(collation_id: int, dbms: str) -> tuple[str, str]:
    known = CHARSET.charset_by_id(collation_id, dbms)
    if known is None:
        raise BinlogDecodeError(
            f"collation id {collation_id} is unknown to python-mysql-replication's "
            f"{dbms} charset table; cannot decode its text exactly"
        )
    return known.name, known.collation


def _quote_element(element: str) -> str:
    return "'" + element.replace("\\", "\\\\").replace("'", "''") + "'"


def _build_column(
    name: str,
    f: _Field,
    nullable: bool,
    unsigned: bool,
    charset: tuple[str, str] | None,
    elements: tuple[str, ...],
    geometry_type: int,
) -> Column:
    """Our Column for one binlog field. Display widths are not in the binlog:
    ``column_type`` spells the type without them (``int unsigned``)."""
    t = f.type
    suffix = " unsigned" if unsigned else ""
    cs_name, collation = charset if charset is not None else (None, None)
    kw: dict[str, Any] = {"nullable": nullable}
    if t in _INT_NAMES:
        data_type = _INT_NAMES[t]
        return Column(name, data_type, data_type + suffix, unsigned=unsigned, **kw)
    if t == FIELD_TYPE.NEWDECIMAL:
        spelled = f"decimal({f.precision},{f.scale}){suffix}"
        return Column(
            name, "decimal", spelled, unsigned=unsigned, precision=f.precision, scale=f.scale, **kw
        )
    if t in (FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE):
        data_type = "float" if t == FIELD_TYPE.FLOAT else "double"
        return Column(name, data_type, data_type + suffix, unsigned=unsigned, **kw)
    temporal = {
        FIELD_TYPE.DATETIME2: "datetime",
        FIELD_TYPE.DATETIME: "datetime",
        FIELD_TYPE.TIMESTAMP2: "timestamp",
        FIELD_TYPE.TIMESTAMP: "timestamp",
        FIELD_TYPE.TIME2: "time",
        FIELD_TYPE.TIME: "time",
    }.get(t)
    if temporal is not None:
        spelled = f"{temporal}({f.fsp})" if f.fsp else temporal
        return Column(name, temporal, spelled, fsp=f.fsp, **kw)
    if t in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE):
        return Column(name, "date", "date", **kw)
    if t == FIELD_TYPE.YEAR:
        return Column(name, "year", "year(4)", **kw)
    if t == FIELD_TYPE.BIT:
        return Column(name, "bit", f"bit({f.bits})", precision=f.bits, **kw)
    if t in _ENUM_SET:
        data_type = "enum" if t == FIELD_TYPE.ENUM else "set"
        spelled = f"{data_type}({','.join(_quote_element(e) for e in elements)})"
        return Column(
            name, data_type, spelled, charset=cs_name, collation=collation, elements=elements, **kw
        )
    if t == FIELD_TYPE.JSON:
        return Column(name, "json", "json", **kw)
    if t == FIELD_TYPE.GEOMETRY:
        geometry = _GEOMETRY_NAMES[geometry_type] if geometry_type < 8 else "geometry"
        return Column(name, geometry, geometry, **kw)
    if charset is None:
        raise BinlogDecodeError(f"column {name!r}: the table map gives no charset")
    binary = cs_name == "binary"
    if t == FIELD_TYPE.BLOB:
        size = _BLOB_NAMES.get(f.length_size, "long")
        data_type = size + ("blob" if binary else "text")
        return Column(name, data_type, data_type, charset=cs_name, collation=collation, **kw)
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        length = f.max_length // (1 if binary else _MBMAXLEN.get(cs_name or "", 1))
        base = "var" if t == FIELD_TYPE.VARCHAR else ""
        data_type = base + ("binary" if binary else "char")
        return Column(
            name, data_type, f"{data_type}({length})", charset=cs_name, collation=collation, **kw
        )
    raise BinlogDecodeError(f"column {name!r}: binlog type {t} is not supported")


def _decode_labels(raw: list[bytes], charset: tuple[str, str] | None) -> tuple[str, ...]:
    if charset is None or charset[0] == "binary":
        return tuple(r.decode("utf-8") for r in raw)
    codec = typeconv.text_codec(charset[0])
    return tuple(r.decode(codec) for r in raw)


@dataclass(frozen=True)
class _Parsed:
    schema: str
    table: str
    columns: tuple[Column, ...]
    fields: tuple[_Field, ...]
    primary_key: tuple[str, ...]


def _parse_body(body: bytes, dbms: str) -> _Parsed:
    """Parse a table-map body from after the table id to its end."""
    cursor = _Cursor(body, 2, len(body))  # 2 bytes of flags
    schema = cursor.take(cursor.u8()).decode("utf-8")
    cursor.take(1)
    table = cursor.take(cursor.u8()).decode("utf-8")
    cursor.take(1)
    count = cursor.lenenc()
    types = list(cursor.take(count))
    meta_end = cursor.lenenc()
    meta_end += cursor.pos
    fields = [_read_field(cursor, t) for t in types]
    if cursor.pos != meta_end:
        raise BinlogDecodeError(f"{schema}.{table}: table map column metadata has a bad length")
    nullable = _bool_list_le(cursor.take((count + 7) >> 3), count)
    meta = _read_optional(cursor, fields, dbms)
    if len(meta.names) != count:
        raise BinlogDecodeError(
            f"{schema}.{table}: the table map carries no column names; set "
            "binlog_row_metadata=FULL on the source (MySQL 8.0.1+, MariaDB 10.5+)"
        )
    columns = []
    numeric = char = enum_set = enum_pos = set_pos = geometry_pos = 0
    for i, f in enumerate(fields):
        unsigned = False
        charset = None
        elements: tuple[str, ...] = ()
        geometry_type = 0
        if f.type in _NUMERIC:
            unsigned = bool(meta.unsigned) and meta.unsigned[numeric]
            numeric += 1
        if f.type in _CHARACTER or (f.type == FIELD_TYPE.GEOMETRY and dbms == "mariadb"):
            if meta.charsets:
                charset = _charset_names(meta.charsets[char], dbms)
            char += 1
        if f.type in _ENUM_SET:
            if meta.enum_set_charsets:
                charset = _charset_names(meta.enum_set_charsets[enum_set], dbms)
            enum_set += 1
            if f.type == FIELD_TYPE.ENUM:
                elements = _decode_labels(meta.enum_values[enum_pos], charset)
                enum_pos += 1
            else:
                elements = _decode_labels(meta.set_values[set_pos], charset)
                set_pos += 1
        if f.type == FIELD_TYPE.GEOMETRY:
            if meta.geometry_types:
                geometry_type = meta.geometry_types[geometry_pos]
            geometry_pos += 1
        columns.append(
            _build_column(meta.names[i], f, nullable[i], unsigned, charset, elements, geometry_type)
        )
    primary_key = tuple(columns[i].name for i in meta.primary_key)
    return _Parsed(schema, table, tuple(columns), tuple(fields), primary_key)


def _bool_list_le(raw: bytes, count: int) -> list[bool]:
    return [bool(raw[i >> 3] & (1 << (i & 7))) for i in range(count)]


def _event_body(event: Any) -> bytes:
    """The event's bytes after the 19-byte header, without the checksum."""
    raw = event.packet.packet.get_all_data()
    return raw[_HEADER : _HEADER + event.event_size]


def parse_table_map(event: TableMapEvent) -> BinlogTable:
    """A :class:`BinlogTable` from a table-map event's raw bytes (its readers
    included). Raises :class:`BinlogDecodeError` when metadata is missing."""
    body = _event_body(event)
    return _table_from_body(body[6:], getattr(event, "dbms", None) or "mysql")


def columns_from_table_map(event: TableMapEvent) -> tuple[Column, ...]:
    """The table's columns as the binlog's FULL metadata defines them."""
    return parse_table_map(event).columns


def _table_from_body(body: bytes, dbms: str) -> BinlogTable:
    parsed = _parse_body(body, dbms)
    built = [_reader(c, f, parsed) for c, f in zip(parsed.columns, parsed.fields, strict=True)]
    readers = tuple(reader for reader, _ in built)
    table = BinlogTable(parsed.schema, parsed.table, parsed.columns, parsed.primary_key, readers)
    # set after: a row with a NULL goes back to this very table's column-by-column reader
    image = compile_image_reader([layout for _, layout in built], readers, table.read_image)
    object.__setattr__(table, "image", image)
    return table


# --- value readers --------------------------------------------------------------

_FRAC = {0: (0, 0), 1: (1, 10000), 2: (1, 10000), 3: (2, 100), 4: (2, 100), 5: (3, 1), 6: (3, 1)}
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _struct_reader(fmt: str) -> Reader:
    unpack = struct.Struct(fmt).unpack_from
    size = struct.calcsize(fmt)

    def read_fixed(data: bytes, pos: int) -> tuple[Any, int]:
        return unpack(data, pos)[0], pos + size

    return read_fixed


def _int24_reader(signed: bool) -> Reader:
    def read_int24(data: bytes, pos: int) -> tuple[int, int]:
        return int.from_bytes(data[pos : pos + 3], "little", signed=signed), pos + 3

    return read_int24


def _decimal_reader(precision: int, scale: int) -> Reader:
    """MySQL's packed DECIMAL: groups of 9 digits in 4 bytes, big-endian,
    leftover digits in 1-4 bytes, sign in the top bit, negatives inverted."""
    intg = precision - scale
    int_full, int_part = divmod(intg, 9)
    frac_full, frac_part = divmod(scale, 9)
    int_lead = _DIG2BYTES[int_part]
    frac_tail = _DIG2BYTES[frac_part]
    size = int_lead + int_full * 4 + frac_full * 4 + frac_tail
    frac_width = frac_full * 9 + frac_part

    def read_decimal(data: bytes, pos: int) -> tuple[Decimal, int]:
        raw = bytearray(data[pos : pos + size])
        negative = not raw[0] & 0x80
        raw[0] ^= 0x80
        if negative:
            raw = bytearray(b ^ 0xFF for b in raw)
        at = 0
        integer = 0
        if int_lead:
            integer = int.from_bytes(raw[:int_lead], "big")
            at = int_lead
        for _ in range(int_full):
            integer = integer * 1_000_000_000 + int.from_bytes(raw[at : at + 4], "big")
            at += 4
        fraction = 0
        for _ in range(frac_full):
            fraction = fraction * 1_000_000_000 + int.from_bytes(raw[at : at + 4], "big")
            at += 4
        if frac_tail:
            fraction = fraction * 10**frac_part + int.from_bytes(raw[at:], "big")
        sign = "-" if negative else ""
        text = f"{sign}{integer}.{fraction:0{frac_width}d}" if frac_width else f"{sign}{integer}"
        return Decimal(text), pos + size

    return read_decimal


def _length_prefixed(prefix: int, codec: str | None) -> Reader:
    """Bytes after a little-endian length of ``prefix`` bytes, decoded as text
    with ``codec`` unless it is None (binary)."""
    if codec is None:

        def read_bytes(data: bytes, pos: int) -> tuple[bytes, int]:
            start = pos + prefix
            end = start + int.from_bytes(data[pos:start], "little")
            return data[start:end], end

        return read_bytes
    if prefix == 1:

        def read_short_text(data: bytes, pos: int) -> tuple[str, int]:
            end = pos + 1 + data[pos]
            return data[pos + 1 : end].decode(codec), end

        return read_short_text

    def read_text(data: bytes, pos: int) -> tuple[str, int]:
        start = pos + prefix
        end = start + int.from_bytes(data[pos:start], "little")
        return data[start:end].decode(codec), end

    return read_text


def _frac(data: bytes, pos: int, nbytes: int, scale: int) -> int:
    return int.from_bytes(data[pos : pos + nbytes], "big") * scale


def _date_reader(data: bytes, pos: int) -> tuple[tuple[int, int, int], int]:
    v = data[pos] | data[pos + 1] << 8 | data[pos + 2] << 16
    return (v >> 9, v >> 5 & 15, v & 31), pos + 3


def _datetime2_reader(fsp: int) -> Reader:
    nbytes, scale = _FRAC[fsp]

    def read_datetime2(data: bytes, pos: int) -> tuple[typeconv.DateTimeParts, int]:
        packed = int.from_bytes(data[pos : pos + 5], "big") - 0x8000000000
        ymd = packed >> 17
        ym = ymd >> 5
        hms = packed & 0x1FFFF
        micros = _frac(data, pos + 5, nbytes, scale) if nbytes else 0
        parts = (ym // 13, ym % 13, ymd & 31, hms >> 12, hms >> 6 & 63, hms & 63, micros)
        return parts, pos + 5 + nbytes

    return read_datetime2


def _timestamp2_reader(fsp: int) -> Reader:
    nbytes, scale = _FRAC[fsp]

    def read_timestamp2(data: bytes, pos: int) -> tuple[tuple[int, int], int]:
        seconds = int.from_bytes(data[pos : pos + 4], "big")
        micros = _frac(data, pos + 4, nbytes, scale) if nbytes else 0
        return (seconds, micros), pos + 4 + nbytes

    return read_timestamp2


def _time2_reader(fsp: int) -> Reader:
    """MySQL 5.6 TIME: the packed value ``(hms << 24) + micros``, offset so it
    sorts as unsigned; negatives borrow from the integer part."""
    nbytes, scale = _FRAC[fsp]
    total = 3 + nbytes

    def read_time2(data: bytes, pos: int) -> tuple[int, int]:
        if nbytes == 3:
            packed = int.from_bytes(data[pos : pos + 6], "big") - 0x800000000000
        else:
            intpart = int.from_bytes(data[pos : pos + 3], "big") - 0x800000
            frac = int.from_bytes(data[pos + 3 : pos + total], "big") if nbytes else 0
            if intpart < 0 and frac:
                intpart += 1
                frac -= 1 << (8 * nbytes)
            packed = (intpart << 24) + frac * scale
        negative = packed < 0
        if negative:
            packed = -packed
        hms = packed >> 24
        micros = ((hms >> 12 & 0x3FF) * 3600 + (hms >> 6 & 63) * 60 + (hms & 63)) * 1_000_000
        micros += packed & 0xFFFFFF
        return (-micros if negative else micros), pos + total

    return read_time2


def _old_datetime_reader(data: bytes, pos: int) -> tuple[typeconv.DateTimeParts, int]:
    v = int.from_bytes(data[pos : pos + 8], "little")
    day, clock = divmod(v, 1_000_000)
    parts = (day // 10000, day // 100 % 100, day % 100, clock // 10000, clock // 100 % 100)
    return (*parts, clock % 100, 0), pos + 8


def _old_time_reader(data: bytes, pos: int) -> tuple[int, int]:
    v = int.from_bytes(data[pos : pos + 3], "little", signed=True)
    negative = v < 0
    v = abs(v)
    micros = ((v // 10000) * 3600 + (v // 100 % 100) * 60 + v % 100) * 1_000_000
    return (-micros if negative else micros), pos + 3


def _old_timestamp_reader(data: bytes, pos: int) -> tuple[tuple[int, int], int]:
    return (int.from_bytes(data[pos : pos + 4], "little"), 0), pos + 4


def _year_reader(data: bytes, pos: int) -> tuple[int, int]:
    v = data[pos]
    return (v + 1900 if v else 0), pos + 1


def _uint_reader(size: int) -> Reader:
    def read_uint(data: bytes, pos: int) -> tuple[int, int]:
        return int.from_bytes(data[pos : pos + size], "little"), pos + size

    return read_uint


def _bit_reader(bits: int) -> Reader:
    size = (bits + 7) >> 3

    def read_bit(data: bytes, pos: int) -> tuple[int, int]:
        return int.from_bytes(data[pos : pos + size], "big"), pos + size

    return read_bit


#: ``struct`` format characters of the signed integers (upper case: unsigned).
_INT_FORMATS = {
    FIELD_TYPE.TINY: "b",
    FIELD_TYPE.SHORT: "h",
    FIELD_TYPE.LONG: "i",
    FIELD_TYPE.LONGLONG: "q",
}


def _layout(column: Column, f: _Field) -> Layout | None:
    """How the column's binlog encoding lies in an image when it is a ``struct`` format or
    a length-prefixed string (None: another encoding, read by its own reader)."""
    t = f.type
    if t in _INT_FORMATS:
        fmt = _INT_FORMATS[t]
        return Layout(fmt=fmt.upper() if column.unsigned else fmt)
    if t == FIELD_TYPE.FLOAT:
        return Layout(fmt="f")
    if t == FIELD_TYPE.DOUBLE:
        return Layout(fmt="d")
    text = column.charset not in (None, "binary") and t not in (
        FIELD_TYPE.GEOMETRY,
        FIELD_TYPE.JSON,
    )
    codec = typeconv.text_codec(column.charset) if text else None
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return Layout(prefix=1 if f.max_length < 256 else 2, codec=codec)
    if t in (FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY, FIELD_TYPE.JSON):
        return Layout(prefix=f.length_size, codec=codec)
    return None


def _raw_reader(column: Column, f: _Field, layout: Layout | None) -> Reader:
    """The reader of the binlog encoding (``layout``: the column's, from ``_layout``),
    producing the value typeconv's ``binlog`` direction expects."""
    if layout is not None:
        if layout.fmt:
            return _struct_reader("<" + layout.fmt)
        return _length_prefixed(layout.prefix, layout.codec)
    t = f.type
    if t == FIELD_TYPE.INT24:
        return _int24_reader(signed=not column.unsigned)
    if t == FIELD_TYPE.NEWDECIMAL:
        return _decimal_reader(f.precision, f.scale)
    if t in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE):
        return _date_reader
    if t == FIELD_TYPE.DATETIME2:
        return _datetime2_reader(f.fsp)
    if t == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2_reader(f.fsp)
    if t == FIELD_TYPE.TIME2:
        return _time2_reader(f.fsp)
    if t == FIELD_TYPE.DATETIME:
        return _old_datetime_reader
    if t == FIELD_TYPE.TIME:
        return _old_time_reader
    if t == FIELD_TYPE.TIMESTAMP:
        return _old_timestamp_reader
    if t == FIELD_TYPE.YEAR:
        return _year_reader
    if t in _ENUM_SET:
        return _uint_reader(f.size)
    if t == FIELD_TYPE.BIT:
        return _bit_reader(f.bits)
    raise BinlogDecodeError(f"column {column.name!r}: binlog type {t} is not supported")


def _reader(column: Column, f: _Field, parsed: _Parsed) -> tuple[Reader, Layout | None]:
    """The raw reader fused with the typeconv binlog converter; and the column's layout
    when its raw value is the value (no conversion), for the compiled image reader."""
    try:
        layout = _layout(column, f)
        raw = _raw_reader(column, f, layout)
        convert = typeconv.converter_for(column, "binlog")
    except ValueError as exc:
        raise BinlogDecodeError(f"{parsed.schema}.{parsed.table}: {exc}") from exc
    if convert is typeconv.identity:
        return raw, layout

    def read_converted(data: bytes, pos: int) -> tuple[Any, int]:
        value, pos = raw(data, pos)
        return convert(value), pos

    return read_converted, None


# --- rows --------------------------------------------------------------------


#: Row event type codes (the binlog header's type byte), v1 and v2 alike.
WRITE_EVENTS = frozenset({0x17, 0x1E})
UPDATE_EVENTS = frozenset({0x18, 0x1F})
DELETE_EVENTS = frozenset({0x19, 0x20})


class TableCache:
    """Parsed tables by their table-map bytes (everything after the table id).

    The table map that precedes every transaction then costs one dictionary
    lookup; a decode worker process keeps one too, fed the same bytes.
    """

    LIMIT = 1024

    def __init__(self) -> None:
        self._by_body: dict[tuple[bytes, str], BinlogTable] = {}

    def get(self, body: bytes, dbms: str, where: str) -> BinlogTable:
        key = (body, dbms)
        table = self._by_body.get(key)
        if table is None:
            try:
                table = _table_from_body(body, dbms)
            except BinlogDecodeError as exc:
                raise BinlogDecodeError(f"{exc} (table map at {where})") from exc
            if len(self._by_body) >= self.LIMIT:
                self._by_body.clear()
            self._by_body[key] = table
        return table


def table_map_body(event: TableMapEvent) -> tuple[int, bytes, str]:
    """A table-map event's table id, its bytes after the id, and the server kind."""
    body = _event_body(event)
    return int.from_bytes(body[:6], "little"), body[6:], getattr(event, "dbms", None) or "mysql"


def rows_body(event: RowsEvent) -> bytes:
    """A row event's bytes after the header, for :func:`decode_rows` (here or in a worker).

    Partial JSON updates (MySQL's binlog_row_value_options=PARTIAL_JSON) are refused
    here: their images are not whole rows."""
    if isinstance(event, PartialUpdateRowsEvent):
        raise BinlogDecodeError(
            f"partial JSON update at {_where(event)}: set binlog_row_value_options='' "
            "on the source; partial row images cannot be decoded to full rows"
        )
    return _event_body(event)


def decode_rows(event_type: int, body: bytes, table: BinlogTable, where: str) -> list[RowChange]:
    """A row event's rows as ``(before, after)`` pairs of canonical tuples.

    ``event_type`` is the header's type code, ``body`` what :func:`rows_body`
    gives, ``where`` names the event in errors ("end position N")."""
    try:
        pos = _rows_start(event_type, body, table, where)
        return _read_rows(event_type, body, pos, table, where)
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
        if isinstance(exc, BinlogDecodeError):
            raise
        raise BinlogDecodeError(
            f"cannot decode a row of {table.schema}.{table.table} at {where}: {exc}"
        ) from exc


def _rows_start(event_type: int, body: bytes, table: BinlogTable, where: str) -> int:
    version = 2 if event_type in _V2_EVENTS else 1
    pos = _ROWS_POST_HEADER[version]
    if version == 2:
        pos += int.from_bytes(body[pos - 2 : pos], "little") - 2
    cursor = _Cursor(body, pos, len(body))
    count = cursor.lenenc()
    if count != len(table.columns):
        raise BinlogDecodeError(
            f"row event at {where} has {count} columns but the table map of "
            f"{table.schema}.{table.table} has {len(table.columns)}"
        )
    width = (count + 7) >> 3
    full = ((1 << count) - 1).to_bytes(width, "little")
    images = 2 if event_type in UPDATE_EVENTS else 1
    for _ in range(images):
        if cursor.take(width) != full:
            raise BinlogDecodeError(
                f"row event at {where} for {table.schema}.{table.table} lacks "
                "columns: set binlog_row_image=FULL on the source"
            )
    return cursor.pos


def _read_rows(
    event_type: int, body: bytes, pos: int, table: BinlogTable, where: str
) -> list[RowChange]:
    end = len(body)
    read = table.image or table.read_image
    out: list[RowChange] = []
    append = out.append
    if event_type in WRITE_EVENTS:
        while pos < end:
            after, pos = read(body, pos)
            append((None, after))
    elif event_type in DELETE_EVENTS:
        while pos < end:
            before, pos = read(body, pos)
            append((before, None))
    elif event_type in UPDATE_EVENTS:
        while pos < end:
            before, pos = read(body, pos)
            after, pos = read(body, pos)
            append((before, after))
    else:
        raise BinlogDecodeError(f"event type {event_type:#x} at {where} is not a row event")
    if pos != end:
        raise BinlogDecodeError(
            f"row event at {where} for {table.schema}.{table.table}: rows overrun "
            "the event (table map does not match the rows?)"
        )
    return out


class RowDecoder:
    """Decodes the row events of one binlog stream. Feed it every
    TableMapEvent (``table_map``) and call ``rows`` for each row event.

    Table ids are per stream, so use one decoder per ``BinLogStreamReader``.
    """

    def __init__(self, cache: TableCache | None = None) -> None:
        self._by_id: dict[int, BinlogTable] = {}
        self._cache = cache or TableCache()

    def table_map(self, event: TableMapEvent) -> BinlogTable:
        """Register (and return) the table a table-map event describes."""
        table_id, body, dbms = table_map_body(event)
        table = self._cache.get(body, dbms, _where(event))
        self._by_id[table_id] = table
        return table

    def forget_tables(self) -> None:
        """Forgets which table each id names (a new binlog file: ids may be reused)."""
        self._by_id.clear()

    def table(self, event: RowsEvent | TableMapEvent) -> BinlogTable:
        """The registered table of a row event (or parse a table-map event)."""
        if isinstance(event, TableMapEvent):
            return self.table_map(event)
        table = self._by_id.get(event.table_id)
        if table is None:
            raise BinlogDecodeError(
                f"row event at {_where(event)} for table id {event.table_id} "
                f"({getattr(event, 'schema', '?')}.{getattr(event, 'table', '?')}) came before "
                "its table map: include TableMapEvent in only_events and pass each one to "
                "RowDecoder.table_map"
            )
        return table

    def columns(self, event: RowsEvent | TableMapEvent) -> tuple[Column, ...]:
        """The columns of the event's table, from the binlog's own metadata."""
        return self.table(event).columns

    def rows(self, event: RowsEvent) -> list[RowChange]:
        """The event's rows as ``(before, after)`` pairs of canonical tuples."""
        body = rows_body(event)
        table = self.table(event)
        return decode_rows(event.event_type, body, table, _where(event))


def _where(event: Any) -> str:
    return f"end position {getattr(getattr(event, 'packet', None), 'log_pos', '?')}"
