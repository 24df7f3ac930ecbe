"""Canonical Python values for MySQL/MariaDB column values, shared by every path.

A row read from the binlog (``cdc.binlog.rowdecode``) and the same row read by
a snapshot SELECT (PyMySQL with :func:`snapshot_connect_kwargs`) become the
SAME Python values here, and a sink writes them back unchanged through
:func:`to_sql_param`. One module owns all three directions so they cannot drift.

Canonical values (``None`` is SQL NULL for every type):

=====================================  ====================  ==================================
MySQL type (``Column.data_type``)      Python type           example
=====================================  ====================  ==================================
tinyint .. bigint [unsigned]           ``int``               ``18446744073709551615``
decimal(p,s)                           ``Decimal``           ``Decimal('-12.50')`` (scale kept)
float                                  ``float``             ``0.10000000149011612`` (the
                                                             float32 value, exactly)
double                                 ``float``             ``0.1``
date                                   ``date``              ``date(2024, 5, 31)``
date with zero/invalid parts           :class:`RawDate`      ``RawDate(0, 0, 0)`` = 0000-00-00
datetime(fsp)                          ``datetime`` (naive)  ``datetime(2024, 5, 31, 1, 2, 3,
                                                             500000)``
datetime with zero/invalid date        :class:`RawDateTime`  ``RawDateTime(2024, 0, 15, 10)``
timestamp(fsp)                         ``datetime`` aware,   ``datetime(2038, 1, 19, 3, 14, 7,
                                       tzinfo=UTC            tzinfo=timezone.utc)``
timestamp 0000-00-00 00:00:00          :class:`RawDateTime`  ``RawDateTime(0, 0, 0)``
time(fsp)                              ``timedelta``         ``-timedelta(hours=838, minutes=59,
                                                             seconds=59)``
year                                   ``int``               ``2155``; ``0`` for 0000
char/varchar/*text (any charset)       ``str``               ``'😀'``, ``'é€\\x81'`` (latin1)
binary(n)                              ``bytes`` of length n ``b'ab\\x00\\x00'`` (zero padded)
varbinary, *blob, geometry             ``bytes``             ``b'a\\x00'``
enum                                   ``str``               ``'é'``; ``''`` = invalid value 0
set                                    ``frozenset[str]``    ``frozenset({'x', 'z'})``
bit(n)                                 ``int``               ``4095`` for b'111111111111'
json (MySQL 8)                         ``str`` (JSON text)   ``'{"a": [1, 2.5]}'``
JSON in MariaDB (= longtext)           ``str``, exact text   ``'{"a":  [1,2.5]}'`` as inserted
=====================================  ====================  ==================================

Decisions worth knowing:

* TIMESTAMP is an instant: always an aware UTC ``datetime``, whatever the
  server's, the session's or this process's time zone. The binlog holds epoch
  seconds; snapshot sessions run with ``time_zone = '+00:00'``; sinks write
  with the same session zone (:data:`SINK_SESSION_SQL`).
* Zero dates are not NULL: ``0000-00-00``, zero parts (``2024-00-15``), year 0
  and ``ALLOW_INVALID_DATES`` days (``2024-02-31``) cannot live in ``date``, so
  they become :class:`RawDate` / :class:`RawDateTime` holding the parts;
  ``str()`` of one is the SQL literal that writes it back.
* FLOAT is the float32 the server stores. MariaDB prints FLOAT with six
  significant digits, so a plain SELECT loses bits: snapshots must select
  FLOAT columns as ``CAST(col AS DOUBLE)`` (:func:`select_expression`).
* SET is a ``frozenset`` (order and duplicates mean nothing to MySQL);
  written back as ``'a,b'`` in definition order.
* ENUM/SET labels come from the binlog's table map (or the DDL text): MariaDB's
  information_schema and SHOW CREATE TABLE print 4-byte characters of labels
  as '?'. ``to_sql_param`` checks SET members against ``Column.elements``.
* MySQL 8 logs JSON in its binary format; it is rendered as MySQL prints JSON
  (``", "`` and ``": "`` separators, keys in stored order). This is checked on
  hand-built documents only: the test servers are MariaDB, whose JSON is text.
* Generated columns (VIRTUAL and STORED) are in MariaDB's FULL row images with
  their computed values, and a snapshot SELECT returns them too: they decode
  like any column, and sinks must leave them out (:func:`writable_columns`).

Direction-specific input forms (what a converter receives):

* ``"binlog"``: values as ``cdc.binlog.rowdecode`` reads them from the row
  image. Numbers, text (already decoded from the column charset, see
  :func:`text_decoder`) and bytes arrive final; the rest arrive as the
  binlog's raw fields: DATE ``(y, m, d)``, DATETIME ``(y, m, d, hh, mm, ss,
  us)``, TIMESTAMP ``(epoch_seconds, us)``, TIME signed microseconds, ENUM the
  1-based index, SET the bit mask, BINARY(n) the bytes with trailing zeros cut
  (the server strips them when logging), MySQL 8 JSON the binary document.
* ``"select"``: values as PyMySQL returns them with :func:`snapshot_connect_kwargs`
  (numbers converted; temporal values, SET and text as ``str``; BIT and
  binary as ``bytes``).

Hot path: :func:`converter_for` is resolved once per column; the per-value
cost is one call, and types needing nothing get :func:`identity`, which
callers skip (:func:`row_converter` does).
"""

from __future__ import annotations

import codecs
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

import pymysql.converters
from pymysql.charset import charset_by_name
from pymysql.constants import FIELD_TYPE
from pymysqlreplication.json_binary import parse_json

from cdc.model.schema import Column

__all__ = [
    "SINK_SESSION_SQL",
    "SNAPSHOT_SESSION_SQL",
    "Converter",
    "RawDate",
    "RawDateTime",
    "Source",
    "UnsupportedType",
    "converter_for",
    "from_binlog",
    "from_select",
    "identity",
    "row_converter",
    "select_expression",
    "select_list",
    "sink_connect_kwargs",
    "snapshot_connect_kwargs",
    "sql_param_converter",
    "text_codec",
    "text_decoder",
    "to_sql_param",
    "writable_columns",
]

Source = Literal["binlog", "select"]
Converter = Callable[[Any], Any]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_F32 = struct.Struct("<f")
_MAX_TIME_US = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999

# Session settings. time_zone makes TIMESTAMP text UTC; an empty sql_mode
# rules out PAD_CHAR_TO_FULL_LENGTH (CHAR padded on read) and ANSI_QUOTES.
_SNAPSHOT_ASSIGNMENTS = ("time_zone = '+00:00'", "sql_mode = ''")
# Sinks must accept every value a source may hold: zero dates and zero parts
# (no NO_ZERO_DATE / NO_ZERO_IN_DATE), ALLOW_INVALID_DATES days, an explicit 0
# in an AUTO_INCREMENT column (NO_AUTO_VALUE_ON_ZERO), and the invalid ENUM
# value '' (only non-strict mode stores it; strict mode rejects it).
_SINK_ASSIGNMENTS = (
    "time_zone = '+00:00'",
    "sql_mode = 'NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES,NO_ENGINE_SUBSTITUTION'",
)
SNAPSHOT_SESSION_SQL: tuple[str, ...] = tuple(f"SET SESSION {a}" for a in _SNAPSHOT_ASSIGNMENTS)
"""Statements a snapshot reader runs on its connection (included in
:func:`snapshot_connect_kwargs`)."""
SINK_SESSION_SQL: tuple[str, ...] = tuple(f"SET SESSION {a}" for a in _SINK_ASSIGNMENTS)
"""Statements a SQL sink runs before writing :func:`to_sql_param` values."""


def _init_command(assignments: Sequence[str]) -> str:
    return "SET " + ", ".join(f"SESSION {a}" for a in assignments)


def _snapshot_conv() -> dict[Any, Any]:
    """PyMySQL ``conv``: numbers converted, everything else left as text/bytes.

    Dates and times stay ``str`` so zero dates are never half-converted (PyMySQL
    by default returns a ``date`` for good values and the text for zero ones).
    """
    conv: dict[Any, Any] = dict(pymysql.converters.encoders)
    for code in (
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONG,
        FIELD_TYPE.LONGLONG,
        FIELD_TYPE.YEAR,
    ):
        conv[code] = int
    conv[FIELD_TYPE.FLOAT] = float
    conv[FIELD_TYPE.DOUBLE] = float
    conv[FIELD_TYPE.DECIMAL] = Decimal
    conv[FIELD_TYPE.NEWDECIMAL] = Decimal
    return conv


def snapshot_connect_kwargs() -> dict[str, Any]:
    """Keyword arguments for ``pymysql.connect`` of a snapshot reader (merge
    host/user/... in). Values it returns feed ``from_select``."""
    return {
        "charset": "utf8mb4",
        "use_unicode": True,
        "conv": _snapshot_conv(),
        "init_command": _init_command(_SNAPSHOT_ASSIGNMENTS),
    }


def sink_connect_kwargs() -> dict[str, Any]:
    """Keyword arguments for ``pymysql.connect`` of a SQL sink writing
    :func:`to_sql_param` values."""
    return {
        "charset": "utf8mb4",
        "use_unicode": True,
        "init_command": _init_command(_SINK_ASSIGNMENTS),
    }


@dataclass(frozen=True, slots=True)
class RawDate:
    """A DATE the server holds but ``datetime.date`` cannot: 0000-00-00, zero
    parts (2024-00-15), year 0, or an ALLOW_INVALID_DATES day (2024-02-31).
    Distinct from NULL; ``str()`` is the literal that writes it back."""

    year: int
    month: int
    day: int

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}-{self.day:02d}"


@dataclass(frozen=True, slots=True)
class RawDateTime:
    """A DATETIME/TIMESTAMP whose date part ``datetime`` cannot hold (see
    :class:`RawDate`); a zero TIMESTAMP is ``RawDateTime(0, 0, 0)``.
    ``str()`` is the literal that writes it back."""

    year: int
    month: int
    day: int
    hour: int = 0
    minute: int = 0
    second: int = 0
    microsecond: int = 0

    def __str__(self) -> str:
        text = (
            f"{self.year:04d}-{self.month:02d}-{self.day:02d} "
            f"{self.hour:02d}:{self.minute:02d}:{self.second:02d}"
        )
        return f"{text}.{self.microsecond:06d}" if self.microsecond else text


def identity(value: Any) -> Any:
    """The converter of types whose value is already canonical."""
    return value


# --- type families ---------------------------------------------------------

INTEGER_TYPES = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bool", "boolean"}
)
DECIMAL_TYPES = frozenset({"decimal", "numeric", "dec", "fixed"})
_DOUBLE = frozenset({"double", "real", "double precision"})
TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
SPATIAL_TYPES = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
)
"""In the binlog's geometry-type order (the table map's metadata names them by index)."""
BLOB_TYPES = frozenset({"varbinary", "tinyblob", "blob", "mediumblob", "longblob", *SPATIAL_TYPES})
"""Types whose canonical value is the bytes as stored (BINARY(n) is not: it is padded)."""
_IDENTITY_TYPES = INTEGER_TYPES | DECIMAL_TYPES | _DOUBLE | TEXT_TYPES | BLOB_TYPES | {"year"}
_KNOWN = _IDENTITY_TYPES | {
    "float",
    "date",
    "datetime",
    "timestamp",
    "time",
    "binary",
    "enum",
    "set",
    "bit",
    "json",
}
_LENGTH = re.compile(r"\(\s*(\d+)\s*\)")


class UnsupportedType(ValueError):
    """A column of a type the product cannot convert; no retry changes that."""


def _family(column: Column) -> str:
    if not isinstance(column, Column):
        raise TypeError(f"expected a cdc.model.schema.Column, not {type(column).__name__}")
    if column.data_type not in _KNOWN:
        raise UnsupportedType(
            f"column {column.name!r}: type {column.column_type!r} is not supported "
            f"(data_type {column.data_type!r}); supported: {', '.join(sorted(_KNOWN))}. "
            "Change the column to a supported type on the source, or leave its table out of "
            "the changefeed's filter (a rule like '!schema.table')"
        )
    return column.data_type


def _length(column: Column) -> int:
    match = _LENGTH.search(column.column_type)
    if match is None:
        raise ValueError(
            f"column {column.name!r}: cannot read the length n of {column.column_type!r}; "
            "expected e.g. 'binary(16)' / 'bit(8)'"
        )
    return int(match.group(1))


# --- text ------------------------------------------------------------------


def _mysql_latin1_table() -> str:
    """MySQL's latin1 is cp1252 with the five bytes cp1252 leaves undefined
    (0x81 0x8D 0x8F 0x90 0x9D) mapped to the C1 controls U+0081.. (as the
    server converts them); Python's cp1252 codec rejects those bytes."""
    chars = []
    for b in range(256):
        try:
            chars.append(bytes([b]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(b))
    return "".join(chars)


_LATIN1_CODEC = "cdc_mysql_latin1"
_LATIN1_DECODING = _mysql_latin1_table()
_LATIN1_ENCODING = codecs.charmap_build(_LATIN1_DECODING)


def _latin1_search(name: str) -> codecs.CodecInfo | None:
    if name != _LATIN1_CODEC:
        return None
    return codecs.CodecInfo(
        name=_LATIN1_CODEC,
        encode=lambda text, errors="strict": codecs.charmap_encode(text, errors, _LATIN1_ENCODING),
        decode=lambda data, errors="strict": codecs.charmap_decode(data, errors, _LATIN1_DECODING),
    )


codecs.register(_latin1_search)
_CODEC_NAMES = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "ascii": "ascii",
    "latin1": _LATIN1_CODEC,
}


def text_codec(charset: str | None) -> str:
    """The Python codec name that ``bytes.decode`` needs for text stored in
    MySQL charset ``charset``, giving the characters a utf8mb4 SELECT returns
    (MySQL's latin1 gets a registered codec of its own, see above). Raises
    ``ValueError`` for ``binary``/``None`` (bytes, not text) and for charsets
    Python has no codec for."""
    if charset is None or charset == "binary":
        raise ValueError(f"charset {charset!r} holds bytes, not text")
    name = charset.lower()
    codec = _CODEC_NAMES.get(name)
    if codec is None:
        known = charset_by_name(name)
        codec = known.encoding if known is not None else name
    try:
        codecs.lookup(codec)
    except LookupError:
        raise ValueError(f"MySQL charset {charset!r} has no Python codec ({codec!r})") from None
    return codec


def text_decoder(charset: str | None) -> Callable[[bytes], str]:
    """``bytes -> str`` for MySQL charset ``charset`` (see :func:`text_codec`)."""
    codec = text_codec(charset)

    def decode_text(data: bytes) -> str:
        return data.decode(codec)

    return decode_text


# --- binlog converters ----------------------------------------------------


def _none_safe(fn: Converter) -> Converter:
    def convert(value: Any) -> Any:
        return None if value is None else fn(value)

    convert.__name__ = fn.__name__
    convert.__doc__ = fn.__doc__
    return convert


def _date_from_parts(parts: tuple[int, int, int]) -> date | RawDate:
    try:
        return date(*parts)
    except ValueError:
        return RawDate(*parts)


DateTimeParts = tuple[int, int, int, int, int, int, int]
"""Year, month, day, hour, minute, second, microsecond, as the binlog row decoder reads them."""


def _datetime_from_parts(parts: DateTimeParts) -> datetime | RawDateTime:
    try:
        return datetime(*parts)
    except ValueError:
        return RawDateTime(*parts)


def _timestamp_from_epoch(value: tuple[int, int]) -> datetime | RawDateTime:
    seconds, micros = value
    if seconds == 0 and micros == 0:
        return RawDateTime(0, 0, 0)
    return _EPOCH + timedelta(seconds=seconds, microseconds=micros)


def _time_from_micros(micros: int) -> timedelta:
    return timedelta(microseconds=micros)


def _binlog_binary(column: Column) -> Converter:
    n = _length(column)

    def pad_binary(value: bytes) -> bytes:
        return value if len(value) == n else value.ljust(n, b"\x00")

    return pad_binary


def _binlog_enum(column: Column) -> Converter:
    labels = ("", *column.elements)
    name = column.name

    def enum_label(index: int) -> str:
        try:
            return labels[index]
        except IndexError:
            raise ValueError(
                f"column {name!r}: ENUM index {index} is beyond its {len(labels) - 1} members "
                "(schema out of date?)"
            ) from None

    return enum_label


def _binlog_set(column: Column) -> Converter:
    members = column.elements
    limit = 1 << len(members)
    name = column.name
    cache: dict[int, frozenset[str]] = {}

    def set_members(mask: int) -> frozenset[str]:
        found = cache.get(mask)
        if found is None:
            if mask >= limit or mask < 0:
                raise ValueError(
                    f"column {name!r}: SET bit mask {mask:#x} has bits beyond its "
                    f"{len(members)} members (schema out of date?)"
                )
            found = frozenset(m for i, m in enumerate(members) if mask >> i & 1)
            if len(cache) < 4096:
                cache[mask] = found
        return found

    return set_members


def _json_text(value: Any) -> str:
    """MySQL's JSON text form of a document parsed by python-mysql-replication
    (keys and strings arrive as bytes): ``{"k": v, "k2": [1, 2]}``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, dict):
        items = (f"{_json_string(k)}: {_json_text(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    if isinstance(value, bytes | str):
        return _json_string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = repr(value)
        if "e" in text:
            mantissa, exponent = text.split("e")
            text = f"{mantissa}e{int(exponent)}"
        return text
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return f'"{value:%Y-%m-%d %H:%M:%S.%f}"'
    if isinstance(value, date):
        return f'"{value:%Y-%m-%d}"'
    if isinstance(value, timedelta):
        return f'"{time_literal(value)}"'
    raise ValueError(f"cannot render JSON value {value!r} ({type(value).__name__})")


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JSON_ESCAPES["\t"] = "\\t"


def _json_string(value: bytes | str) -> str:
    text = value.decode("utf-8") if isinstance(value, bytes) else value
    out = []
    for ch in text:
        escaped = _JSON_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ch < " ":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _binlog_json(value: bytes | str) -> str:
    """MySQL 8 logs JSON as its binary format; MariaDB's JSON is text already."""
    if isinstance(value, str):
        return value
    if not value:
        return "null"
    return _json_text(parse_json(value[0], value[1:]))


_BINLOG_SIMPLE: dict[str, Converter] = {
    "date": _date_from_parts,
    "datetime": _datetime_from_parts,
    "timestamp": _timestamp_from_epoch,
    "time": _time_from_micros,
    "json": _binlog_json,
}
_BINLOG_FACTORIES: dict[str, Callable[[Column], Converter]] = {
    "binary": _binlog_binary,
    "enum": _binlog_enum,
    "set": _binlog_set,
}


# --- select converters -----------------------------------------------------


def _float32(value: float) -> float:
    return _F32.unpack(_F32.pack(value))[0]


def _parse_date_text(text: str) -> tuple[int, ...]:
    day, _, clock = text.partition(" ")
    parts = [int(p) for p in day.split("-")]
    if clock:
        hms, _, frac = clock.partition(".")
        parts.extend(int(p) for p in hms.split(":"))
        parts.append(int(frac.ljust(6, "0")) if frac else 0)
    return tuple(parts)


def _select_date(value: str | date) -> date | RawDate:
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(value)
    except ValueError:
        return RawDate(*_parse_date_text(value))


def _select_datetime(value: str | datetime) -> datetime | RawDateTime:
    if isinstance(value, datetime):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return RawDateTime(*_parse_date_text(value))


def _select_timestamp(value: str | datetime) -> datetime | RawDateTime:
    """Text in the snapshot session's zone, UTC (``SNAPSHOT_SESSION_SQL``)."""
    parsed = _select_datetime(value)
    if isinstance(parsed, RawDateTime):
        return parsed
    return parsed.replace(tzinfo=UTC)


def _select_time(value: str | timedelta) -> timedelta:
    if isinstance(value, timedelta):
        return value
    negative = value.startswith("-")
    hms, _, frac = value.lstrip("-").partition(".")
    hours, minutes, seconds = (int(p) for p in hms.split(":"))
    micros = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000
    if frac:
        micros += int(frac.ljust(6, "0"))
    return timedelta(microseconds=-micros if negative else micros)


def _select_set(value: str | frozenset[str]) -> frozenset[str]:
    if isinstance(value, frozenset):
        return value
    return frozenset(value.split(",")) if value else frozenset()


def _select_bit(value: bytes | int) -> int:
    return value if isinstance(value, int) else int.from_bytes(value, "big")


_SELECT_SIMPLE: dict[str, Converter] = {
    "float": _float32,
    "date": _select_date,
    "datetime": _select_datetime,
    "timestamp": _select_timestamp,
    "time": _select_time,
    "set": _select_set,
    "bit": _select_bit,
}


def converter_for(column: Column, source: Source) -> Converter:
    """The function turning one ``source`` value of ``column`` into its
    canonical value (None stays None). Returns :func:`identity` when nothing
    is to be done, so callers can skip it. Resolve once per column."""
    family = _family(column)
    if source == "binlog":
        factory = _BINLOG_FACTORIES.get(family)
        if factory is not None:
            return _none_safe(factory(column))
        simple = _BINLOG_SIMPLE.get(family)
    elif source == "select":
        simple = _SELECT_SIMPLE.get(family)
    else:
        raise ValueError(f"source must be 'binlog' or 'select', not {source!r}")
    return identity if simple is None else _none_safe(simple)


def _convert_one(column: Column, value: Any, source: Source) -> Any:
    convert = converter_for(column, source)
    try:
        return convert(value)
    except (TypeError, ValueError, IndexError, struct.error) as exc:
        raise ValueError(
            f"column {column.name!r} ({column.column_type}): cannot convert {source} value "
            f"{value!r}: {exc}"
        ) from exc


def from_binlog(column: Column, value: Any) -> Any:
    """Canonical value of one value as ``cdc.binlog.rowdecode`` reads it.
    Convenience form of ``converter_for(column, "binlog")(value)``."""
    return _convert_one(column, value, "binlog")


def from_select(column: Column, value: Any) -> Any:
    """Canonical value of one value as PyMySQL returns it with
    :func:`snapshot_connect_kwargs` (and :func:`select_expression`)."""
    return _convert_one(column, value, "select")


def row_converter(
    columns: Sequence[Column], source: Source
) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A function converting a whole row (values in ``columns`` order) to a
    tuple of canonical values; only non-identity columns cost a call."""
    columns = tuple(columns)
    work = [
        (i, convert)
        for i, column in enumerate(columns)
        if (convert := converter_for(column, source)) is not identity
    ]
    if not work:
        return tuple

    def convert_row(row: Sequence[Any]) -> tuple[Any, ...]:
        values = list(row)
        i = -1
        try:
            for i, convert in work:
                values[i] = convert(values[i])
        except (TypeError, ValueError, IndexError, struct.error) as exc:
            column = columns[i]
            raise ValueError(
                f"column {column.name!r} ({column.column_type}): cannot convert {source} "
                f"value {values[i]!r}: {exc}"
            ) from exc
        return tuple(values)

    return convert_row


# --- snapshot SELECT list ----------------------------------------------------


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def select_expression(column: Column) -> str:
    """The SELECT-list item reading ``column`` exactly: the quoted name, but
    ``CAST(`f` AS DOUBLE) AS `f``` for FLOAT, whose text form has only six
    significant digits (MariaDB 10.3+, MySQL 8.0.17+)."""
    name = _quote(column.name)
    if _family(column) == "float":
        return f"CAST({name} AS DOUBLE) AS {name}"
    return name


def select_list(columns: Sequence[Column]) -> str:
    """``select_expression`` of every column, comma separated."""
    return ", ".join(select_expression(c) for c in columns)


def writable_columns(columns: Sequence[Column]) -> tuple[Column, ...]:
    """The columns a sink writes: generated (VIRTUAL/STORED) columns are
    computed by the server and refuse explicit values."""
    return tuple(c for c in columns if not c.generated)


# --- sink parameters --------------------------------------------------------


def time_literal(value: timedelta) -> str:
    """`[-]HH:MM:SS[.ffffff]` of a TIME value (hours may exceed 24); ValueError outside
    MySQL's TIME range."""
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    if abs(micros) > _MAX_TIME_US:
        raise ValueError(f"TIME {value!r} is outside -838:59:59.999999..838:59:59.999999")
    sign = "-" if micros < 0 else ""
    seconds, frac = divmod(abs(micros), 1_000_000)
    minutes, seconds = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{frac:06d}" if frac else text


def _param_time(value: timedelta) -> str:
    if not isinstance(value, timedelta):
        raise TypeError(f"TIME needs a timedelta, not {type(value).__name__}")
    return time_literal(value)


def _param_date(value: date | RawDate) -> date | str:
    if isinstance(value, RawDate | RawDateTime):
        return str(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        raise ValueError(f"DATETIME values are naive (no time zone), not {value!r}")
    if not isinstance(value, date):
        raise TypeError(f"expected a date/datetime or RawDate/RawDateTime, not {value!r}")
    return value


def _param_timestamp(value: datetime | RawDateTime) -> datetime | str:
    if isinstance(value, RawDateTime):
        return str(value)
    if not isinstance(value, datetime):
        raise TypeError(f"TIMESTAMP needs an aware datetime or RawDateTime, not {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"TIMESTAMP {value!r} is naive: give an aware datetime (canonical: tzinfo=UTC); "
            "the sink session writes it as UTC (time_zone '+00:00')"
        )
    return value.astimezone(UTC).replace(tzinfo=None)


def _param_set(column: Column) -> Converter:
    order = {m: i for i, m in enumerate(column.elements)}
    name = column.name

    def set_text(value: Any) -> str:
        if isinstance(value, str):
            return value
        unknown = [m for m in value if m not in order] if order else []
        if unknown:
            raise ValueError(f"column {name!r}: {sorted(unknown)} are not SET members")
        return ",".join(sorted(value, key=lambda m: (order.get(m, len(order)), m)))

    return set_text


def _param_bit(column: Column) -> Converter:
    bits = _length(column)

    def bit_int(value: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"BIT needs an int, not {value!r}")
        if not 0 <= value < 1 << bits:
            raise ValueError(f"column {column.name!r}: {value} does not fit BIT({bits})")
        return value

    return bit_int


_PARAM_SIMPLE: dict[str, Converter] = {
    "date": _param_date,
    "datetime": _param_date,
    "timestamp": _param_timestamp,
    "time": _param_time,
}
_PARAM_FACTORIES: dict[str, Callable[[Column], Converter]] = {
    "set": _param_set,
    "bit": _param_bit,
}


def sql_param_converter(column: Column) -> Converter:
    """The function turning a canonical value into a PyMySQL query parameter
    that writes it back exactly, in a session set up by
    :data:`SINK_SESSION_SQL`. :func:`identity` where PyMySQL's own escaping
    is exact (numbers, str, bytes, date, naive datetime)."""
    family = _family(column)
    factory = _PARAM_FACTORIES.get(family)
    if factory is not None:
        return _none_safe(factory(column))
    simple = _PARAM_SIMPLE.get(family)
    return identity if simple is None else _none_safe(simple)


def to_sql_param(column: Column, value: Any) -> Any:
    """One canonical value as a PyMySQL parameter (see :func:`sql_param_converter`)."""
    convert = sql_param_converter(column)
    try:
        return convert(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"column {column.name!r} ({column.column_type}): cannot write {value!r}: {exc}"
        ) from exc
