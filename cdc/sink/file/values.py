"""Canonical values as text and back, exactly, for both file protocols.

Every non-NULL canonical value (``cdc.typeconv``) is written as one string and
read back to an equal value of the same type, given the column it belongs to
(the reader takes the columns from the table version's ``schema.json``).
NULL is JSON ``null`` in canal-json and an unquoted ``\\N`` in csv.

==========================  ============================================  =====================
canonical value             text                                          example
==========================  ============================================  =====================
int (integers, year, bit)   decimal digits                                ``18446744073709551615``
Decimal                     positional notation, scale kept, no exponent  ``-12.50``
float (float, double)       ``repr``: the shortest text that reads back   ``0.10000000149011612``
                            to the same double
date / RawDate              ``YYYY-MM-DD``; zero dates as their literal   ``0000-00-00``
datetime (naive) /          ``YYYY-MM-DD HH:MM:SS[.ffffff]``, fraction    ``2024-05-31 01:02:03.5``
RawDateTime                 only when non-zero, then six digits           written ``...03.500000``
TIMESTAMP (aware datetime)  the same form, in UTC, without a zone suffix  ``2038-01-19 03:14:07``
                            (the column type says it is UTC)
timedelta (time)            ``[-]HH:MM:SS[.ffffff]``, hours up to 838      ``-838:59:59``
str (text, enum, json)      the text itself                               ``é€``
bytes (binary, blobs,       canal-json: each byte as the code point of    ``"\u0000ab"``
geometry)                   the same number (ISO-8859-1, as Canal does);
                            csv: base64 (TiCDC's csv default)             ``AGFi``
frozenset (set)             members comma-separated in definition order;  ``a,c``
                            the empty set is the empty string, not NULL
==========================  ============================================  =====================

A value of the wrong Python type for its column (a ``str`` in an INT column,
a naive datetime in a TIMESTAMP column) raises ``ValueError`` naming the
column: the file would otherwise hold something that cannot be read back.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from cdc.model.schema import Column
from cdc.typeconv import (
    BLOB_TYPES,
    DECIMAL_TYPES,
    INTEGER_TYPES,
    TEXT_TYPES,
    RawDate,
    RawDateTime,
    time_literal,
)

__all__ = [
    "BytesForm",
    "ValueDecoder",
    "ValueEncoder",
    "decoder_for",
    "encoder_for",
    "is_numeric",
]

ValueEncoder = Callable[[Any], "str | None"]
ValueDecoder = Callable[["str | None"], Any]


class BytesForm(enum.Enum):
    """How binary values become text: canal-json's ISO-8859-1 code points, csv's base64."""

    LATIN1 = "latin1"
    BASE64 = "base64"


_INTEGER = INTEGER_TYPES | {"year", "bit"}
_DECIMAL = DECIMAL_TYPES
_FLOAT = frozenset({"float", "double", "real", "double precision"})
_TEXT = TEXT_TYPES | {"enum", "json"}
_BYTES = BLOB_TYPES | {"binary"}
_NUMERIC = _INTEGER | _DECIMAL | _FLOAT


def is_numeric(column: Column) -> bool:
    """Whether the column's text is a number (csv leaves those unquoted, as TiCDC does)."""
    return column.data_type in _NUMERIC


def _unsupported(column: Column) -> ValueError:
    return ValueError(
        f"column {column.name!r}: type {column.column_type!r} (data_type {column.data_type!r}) "
        "is not supported by the file sink"
    )


def _wrong_type(column: Column, value: Any, wanted: str) -> ValueError:
    return ValueError(
        f"column {column.name!r} ({column.column_type}) holds {type(value).__name__} "
        f"{value!r:.80}; the canonical value is {wanted}"
    )


def _none_safe_encoder(
    column: Column, check: type | tuple[type, ...], wanted: str, fn: Callable[[Any], str]
) -> ValueEncoder:
    def encode(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, check) or isinstance(value, bool):
            raise _wrong_type(column, value, wanted)
        return fn(value)

    return encode


# --- encoders ---------------------------------------------------------------


def _date_text(value: date | RawDate) -> str:
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"


def _datetime_text(value: datetime | RawDateTime) -> str:
    text = (
        f"{value.year:04d}-{value.month:02d}-{value.day:02d} "
        f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}"
    )
    return f"{text}.{value.microsecond:06d}" if value.microsecond else text


def _encode_date(column: Column) -> ValueEncoder:
    def encode(value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, RawDate) or (
            isinstance(value, date) and not isinstance(value, datetime)
        ):
            return _date_text(value)
        raise _wrong_type(column, value, "a date or RawDate")

    return encode


def _encode_datetime(column: Column) -> ValueEncoder:
    def encode(value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, RawDateTime):
            return _datetime_text(value)
        if isinstance(value, datetime) and value.tzinfo is None:
            return _datetime_text(value)
        raise _wrong_type(column, value, "a naive datetime or RawDateTime")

    return encode


def _encode_timestamp(column: Column) -> ValueEncoder:
    def encode(value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, RawDateTime):
            return _datetime_text(value)
        if isinstance(value, datetime) and value.utcoffset() is not None:
            return _datetime_text(value.astimezone(UTC))
        raise _wrong_type(column, value, "an aware (UTC) datetime or RawDateTime")

    return encode


def _encode_set(column: Column) -> ValueEncoder:
    order = {member: i for i, member in enumerate(column.elements)}

    def encode(value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, frozenset | set):
            raise _wrong_type(column, value, "a frozenset of member names")
        if order:
            unknown = sorted(m for m in value if m not in order)
            if unknown:
                raise ValueError(
                    f"column {column.name!r}: {unknown} are not members of {column.column_type}"
                )
        for member in value:
            if not isinstance(member, str) or "," in member:
                raise ValueError(f"column {column.name!r}: SET member {member!r} is not valid")
        return ",".join(sorted(value, key=lambda m: (order.get(m, len(order)), m)))

    return encode


def _bytes_to_text(form: BytesForm) -> Callable[[bytes], str]:
    if form is BytesForm.LATIN1:
        return lambda value: value.decode("latin-1")
    return lambda value: base64.b64encode(value).decode("ascii")


def encoder_for(column: Column, form: BytesForm) -> ValueEncoder:
    """The function turning ``column``'s canonical values into text (None stays None)."""
    family = column.data_type
    if family in _INTEGER:
        return _none_safe_encoder(column, int, "an int", str)
    if family in _DECIMAL:
        return _none_safe_encoder(column, Decimal, "a Decimal", lambda v: format(v, "f"))
    if family in _FLOAT:
        return _none_safe_encoder(column, float, "a float", repr)
    if family in _TEXT:
        return _none_safe_encoder(column, str, "a str", lambda v: v)
    if family in _BYTES:
        return _none_safe_encoder(column, bytes, "bytes", _bytes_to_text(form))
    if family == "date":
        return _encode_date(column)
    if family == "datetime":
        return _encode_datetime(column)
    if family == "timestamp":
        return _encode_timestamp(column)
    if family == "time":
        return _none_safe_encoder(column, timedelta, "a timedelta", time_literal)
    if family == "set":
        return _encode_set(column)
    raise _unsupported(column)


# --- decoders ---------------------------------------------------------------


def _parts(text: str) -> tuple[int, ...]:
    """``YYYY-MM-DD[ HH:MM:SS[.ffffff]]`` as integers, for the zero dates."""
    day, _, clock = text.partition(" ")
    parts = [int(p) for p in day.split("-")]
    if len(parts) != 3:
        raise ValueError(f"{text!r} is not YYYY-MM-DD")
    if clock:
        hms, _, frac = clock.partition(".")
        numbers = [int(p) for p in hms.split(":")]
        if len(numbers) != 3:
            raise ValueError(f"{text!r} has no HH:MM:SS time")
        parts.extend(numbers)
        parts.append(int(frac.ljust(6, "0")) if frac else 0)
    return tuple(parts)


def _decode_date(text: str) -> date | RawDate:
    if len(text) != 10:
        raise ValueError(f"{text!r} is not YYYY-MM-DD")
    try:
        return date.fromisoformat(text)
    except ValueError:
        return RawDate(*_parts(text))


def _decode_datetime(text: str) -> datetime | RawDateTime:
    if len(text) < 19 or text[10] != " ":
        raise ValueError(f"{text!r} is not YYYY-MM-DD HH:MM:SS[.ffffff]")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return RawDateTime(*_parts(text))


def _decode_timestamp(text: str) -> datetime | RawDateTime:
    value = _decode_datetime(text)
    return value if isinstance(value, RawDateTime) else value.replace(tzinfo=UTC)


def _decode_time(text: str) -> timedelta:
    negative = text.startswith("-")
    hms, _, frac = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(p) for p in hms.split(":"))
    micros = ((hours * 60 + minutes) * 60 + seconds) * 1_000_000
    if frac:
        micros += int(frac.ljust(6, "0"))
    return timedelta(microseconds=-micros if negative else micros)


def _decode_set(text: str) -> frozenset[str]:
    return frozenset(text.split(",")) if text else frozenset()


def _text_to_bytes(form: BytesForm) -> Callable[[str], bytes]:
    if form is BytesForm.LATIN1:
        return lambda text: text.encode("latin-1")
    return lambda text: base64.b64decode(text.encode("ascii"), validate=True)


def _decimal(text: str) -> Decimal:
    value = Decimal(text)
    if not value.is_finite():
        raise ValueError(f"{text!r} is not a finite decimal")
    return value


def _parser_for(column: Column, form: BytesForm) -> Callable[[str], Any]:
    family = column.data_type
    if family in _INTEGER:
        return int
    if family in _DECIMAL:
        return _decimal
    if family in _FLOAT:
        return float
    if family in _TEXT:
        return str
    if family in _BYTES:
        return _text_to_bytes(form)
    simple = {
        "date": _decode_date,
        "datetime": _decode_datetime,
        "timestamp": _decode_timestamp,
        "time": _decode_time,
        "set": _decode_set,
    }.get(family)
    if simple is None:
        raise _unsupported(column)
    return simple


def decoder_for(column: Column, form: BytesForm) -> ValueDecoder:
    """The inverse of :func:`encoder_for`: text (or None) back to the canonical value.

    Raises ``ValueError`` naming the column for text that is not a value of it.
    """
    parse = _parser_for(column, form)

    def decode(text: str | None) -> Any:
        if text is None:
            return None
        if not isinstance(text, str):
            raise ValueError(
                f"column {column.name!r}: expected a string or null, not {type(text).__name__}"
            )
        try:
            return parse(text)
        except (ValueError, TypeError, InvalidOperation, binascii.Error, UnicodeError) as exc:
            raise ValueError(
                f"column {column.name!r} ({column.column_type}): cannot read {text!r:.80}: {exc}"
            ) from None

    return decode
