"""MySQL value semantics for row expressions: NULL, coercions, comparison, arithmetic, LIKE.

The event filter's ``ignore-*-value-expr`` expressions are SQL, so they must
give the answers MySQL would give for the same row. This module holds those
rules, apart from parsing (:mod:`cdc.filter.expr`). Values are the decoded
Python values of a row: ``None`` (NULL), ``bool``/``int``, ``Decimal``,
``float``, ``str``, ``bytes``, ``datetime``, ``date``, ``time`` and
``timedelta`` (MySQL ``TIME``). Anything else raises ``TypeError``.

Comparison (MySQL 8 "Type Conversion in Expression Evaluation"):

1. NULL on either side gives NULL (``<=>`` aside, handled by the caller).
2. Two strings compare as strings; a ``bytes`` side makes it a binary
   comparison (the ``str`` side is UTF-8 encoded). Comparison is by code point,
   case- and accent-sensitive, like ``utf8mb4_bin`` (TiDB's default collation);
   MySQL's ``*_ci`` collations would ignore case: use ``LOWER()`` for that.
3. Two integers, or integers and decimals, compare exactly.
4. A float on either side compares as doubles.
5. A string against a number becomes a number by its longest numeric prefix,
   as MySQL does: ``'12abc'`` is 12, ``'abc'`` is 0 (so ``'abc' = 0`` is true
   in MySQL too). Against a float it compares as a double; against an integer
   or a decimal exactly, as MariaDB and TiDB do for a column against a
   constant (``bigint_id = '9007199254740993'`` holds). MySQL 8 documents a
   double comparison there, which differs only beyond 15 significant digits.
6. A temporal value against a string parses the string as the same kind of
   temporal value (``created < '2024-01-01'``); a DATE against a DATETIME
   compares as DATETIME, a TIME against either as a DATETIME on the current
   date; if the string does not parse they compare as strings.
   A temporal value against a number compares its numeric form
   (``YYYYMMDDhhmmss[.ffffff]``, ``YYYYMMDD``, ``hhmmss``).

Arithmetic: integers stay integers; a decimal makes it DECIMAL; a float or a
string makes it DOUBLE. ``/`` gives a DECIMAL whose scale is the dividend's
scale plus 4 (``div_precision_increment``), ``1/3`` is ``0.3333``; ``/``, ``DIV``
and ``%`` by zero give NULL; ``%`` takes the dividend's sign. Integers do not
overflow at 64 bits here (MySQL would raise an out-of-range error).

Text forms follow MySQL: DATETIME ``2024-01-02 03:04:05[.ffffff]``, TIME
``[-]hh:mm:ss[.ffffff]``, DECIMAL with its scale. Fractions of seconds always
print six digits: a decoded value does not carry its column's precision.

Booleans are the integers 1 and 0; a value is true when it is not NULL and its
numeric value is not zero.
"""

from __future__ import annotations

import decimal
import functools
import math
import re
from datetime import date, datetime, time, timedelta
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal
from typing import Any

__all__ = [
    "arithmetic",
    "compare",
    "concat",
    "is_true",
    "like",
    "like_regex",
    "negate",
    "to_number",
    "to_text",
]

_DEC = decimal.Context(prec=65, rounding=ROUND_HALF_UP)
_MAX_DIV_SCALE = 30
_DIV_INCREMENT = 4
_NUMERIC_PREFIX = re.compile(r"\s*([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")
_DATETIME = re.compile(
    r"\s*(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})\d*)?)?)?\s*"
)
_TIME = re.compile(r"\s*(-)?(?:(\d+)\s+)?(\d+):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,6})\d*)?)?\s*")

_TEXT = (str, bytes)
_NUMBER = (int, Decimal, float)


def _norm(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


def _type_error(value: Any) -> TypeError:
    return TypeError(
        f"value {value!r} of type {type(value).__name__} is not supported in expressions "
        "(supported: NULL, int, Decimal, float, str, bytes, datetime, date, time, timedelta)"
    )


def _string_to_double(text: str) -> float:
    found = _NUMERIC_PREFIX.match(text)
    return float(found.group(1)) if found else 0.0


def _text_to_decimal(text: str | bytes) -> Decimal:
    string = text.decode("latin-1") if isinstance(text, bytes) else text
    found = _NUMERIC_PREFIX.match(string)
    return Decimal(found.group(1)) if found else Decimal(0)


def _fraction(number: int, micro: int) -> int | Decimal:
    return Decimal(f"{number}.{micro:06d}") if micro else number


def _temporal_number(value: Any) -> int | Decimal:
    if isinstance(value, datetime):
        whole = int(value.strftime("%Y%m%d%H%M%S"))
        return _fraction(whole, value.microsecond)
    if isinstance(value, date):
        return int(value.strftime("%Y%m%d"))
    if isinstance(value, time):
        return _fraction(value.hour * 10000 + value.minute * 100 + value.second, value.microsecond)
    negative = value < timedelta(0)
    span = -value if negative else value
    seconds = span.days * 86400 + span.seconds
    hours, rest = divmod(seconds, 3600)
    number = _fraction(hours * 10000 + (rest // 60) * 100 + rest % 60, span.microseconds)
    return -number if negative else number


def to_number(value: Any) -> int | Decimal | float | None:
    """The numeric value MySQL uses for ``value`` in a numeric context."""
    value = _norm(value)
    if value is None or isinstance(value, _NUMBER):
        return value
    if isinstance(value, str):
        return _string_to_double(value)
    if isinstance(value, bytes):
        return _string_to_double(value.decode("latin-1"))
    if isinstance(value, datetime | date | time | timedelta):
        return _temporal_number(value)
    raise _type_error(value)


def _format_float(value: float) -> str:
    text = repr(value)
    if text.endswith(".0"):
        text = text[:-2]
    return text.replace("e+", "e")


def _format_clock(hours: int, minutes: int, seconds: int, micro: int) -> str:
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    return f"{text}.{micro:06d}" if micro else text


def _format_temporal(value: Any) -> str:
    if isinstance(value, datetime):
        clock = _format_clock(value.hour, value.minute, value.second, value.microsecond)
        return f"{value.date().isoformat()} {clock}"
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return _format_clock(value.hour, value.minute, value.second, value.microsecond)
    negative = value < timedelta(0)
    span = -value if negative else value
    hours, rest = divmod(span.days * 86400 + span.seconds, 3600)
    text = _format_clock(hours, rest // 60, rest % 60, span.microseconds)
    return "-" + text if negative else text


def to_text(value: Any) -> str | bytes | None:
    """The string MySQL uses for ``value`` in a string context; ``bytes`` stay binary."""
    value = _norm(value)
    if value is None or isinstance(value, _TEXT):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return _format_float(value)
    if isinstance(value, datetime | date | time | timedelta):
        return _format_temporal(value)
    raise _type_error(value)


def is_true(value: Any) -> bool | None:
    """MySQL truth: None for NULL, else whether the numeric value is non-zero."""
    number = to_number(value)
    if number is None:
        return None
    return number != 0


def _sign(left: Any, right: Any) -> int:
    return (left > right) - (left < right)


def _compare_numbers(left: Any, right: Any) -> int:
    if isinstance(left, float) or isinstance(right, float):
        return _sign(float(left), float(right))
    return _sign(left, right)


def _parse_datetime(text: str) -> datetime | None:
    found = _DATETIME.fullmatch(text)
    if found is not None:
        y, mo, d, h, mi, s, frac = found.groups()
        try:
            return datetime(
                int(y),
                int(mo),
                int(d),
                int(h or 0),
                int(mi or 0),
                int(s or 0),
                int((frac or "0").ljust(6, "0")),
            )
        except ValueError:
            return None
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


def _parse_timedelta(text: str) -> timedelta | None:
    found = _TIME.fullmatch(text)
    if found is None:
        return None
    minus, days, hours, minutes, seconds, frac = found.groups()
    span = timedelta(
        days=int(days or 0),
        hours=int(hours),
        minutes=int(minutes),
        seconds=int(seconds or 0),
        microseconds=int((frac or "0").ljust(6, "0")),
    )
    return -span if minus else span


def _as_datetime(value: date) -> datetime:
    return value if isinstance(value, datetime) else datetime(value.year, value.month, value.day)


def _as_timedelta(value: time | timedelta) -> timedelta:
    if isinstance(value, timedelta):
        return value
    return timedelta(
        hours=value.hour, minutes=value.minute, seconds=value.second, microseconds=value.microsecond
    )


def _on_today(value: Any) -> datetime:
    """A DATE or DATETIME as it is; a TIME on the current date, as MySQL compares them."""
    if isinstance(value, date):
        return _as_datetime(value)
    return datetime.combine(date.today(), time()) + _as_timedelta(value)


def _compare_datetimes(left: datetime, right: datetime) -> int:
    if (left.tzinfo is None) != (right.tzinfo is None):
        if left.tzinfo is None:
            left = left.replace(tzinfo=right.tzinfo)
        else:
            right = right.replace(tzinfo=left.tzinfo)
    return _sign(left, right)


def _compare_temporal_text(temporal: Any, text: str | bytes) -> int:
    """Compare a temporal value with a string, temporal on the left."""
    string = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    if isinstance(temporal, date):
        parsed_dt = _parse_datetime(string)
        if parsed_dt is not None:
            return _compare_datetimes(_as_datetime(temporal), parsed_dt)
    else:
        parsed_td = _parse_timedelta(string)
        if parsed_td is not None:
            return _sign(_as_timedelta(temporal), parsed_td)
    return _sign(_format_temporal(temporal), string)


def compare(left: Any, right: Any) -> int | None:
    """-1, 0 or 1 as MySQL orders ``left`` and ``right``; None when either is NULL."""
    left, right = _norm(left), _norm(right)
    if left is None or right is None:
        return None
    left_text, right_text = isinstance(left, _TEXT), isinstance(right, _TEXT)
    if left_text and right_text:
        if type(left) is not type(right):
            left = left.encode() if isinstance(left, str) else left
            right = right.encode() if isinstance(right, str) else right
        return _sign(left, right)
    left_time = isinstance(left, datetime | date | time | timedelta)
    right_time = isinstance(right, datetime | date | time | timedelta)
    if left_time and right_time:
        left_date, right_date = isinstance(left, date), isinstance(right, date)
        if left_date and right_date:
            return _compare_datetimes(_as_datetime(left), _as_datetime(right))
        if not left_date and not right_date:
            return _sign(_as_timedelta(left), _as_timedelta(right))
        return _compare_datetimes(_on_today(left), _on_today(right))
    if left_time and right_text:
        return _compare_temporal_text(left, right)
    if right_time and left_text:
        return -_compare_temporal_text(right, left)
    if left_text and isinstance(right, int | Decimal):
        return _sign(_text_to_decimal(left), right)
    if right_text and isinstance(left, int | Decimal):
        return _sign(left, _text_to_decimal(right))
    return _compare_numbers(to_number(left), to_number(right))


def _numeric_pair(left: Any, right: Any) -> tuple[Any, Any, type] | None:
    x, y = to_number(left), to_number(right)
    if x is None or y is None:
        return None
    if isinstance(x, float) or isinstance(y, float):
        return float(x), float(y), float
    if isinstance(x, Decimal) or isinstance(y, Decimal):
        return Decimal(x), Decimal(y), Decimal
    return x, y, int


def _scale(value: int | Decimal) -> int:
    if isinstance(value, int):
        return 0
    exponent = value.as_tuple().exponent
    return -exponent if isinstance(exponent, int) and exponent < 0 else 0


def _divide(x: Any, y: Any, kind: type) -> Any:
    if kind is float:
        return x / y
    scale = min(_scale(x) + _DIV_INCREMENT, _MAX_DIV_SCALE)
    quotient = _DEC.divide(Decimal(x), Decimal(y))
    return quotient.quantize(Decimal(1).scaleb(-scale), context=_DEC)


def _int_divide(x: Any, y: Any, kind: type) -> int:
    if kind is int:
        quotient = abs(x) // abs(y)
        return -quotient if (x < 0) != (y < 0) else quotient
    if kind is float:
        return math.trunc(x / y)
    return int(_DEC.divide(x, y).to_integral_value(rounding=ROUND_DOWN))


def _modulo(x: Any, y: Any, kind: type) -> Any:
    if kind is int:
        rest = abs(x) % abs(y)
        return -rest if x < 0 else rest
    if kind is float:
        return math.fmod(x, y)
    return _DEC.remainder(x, y)


def arithmetic(operator: str, left: Any, right: Any) -> Any:
    """``left <operator> right`` for ``+ - * / DIV %``; NULL in, or division by zero, is NULL."""
    pair = _numeric_pair(left, right)
    if pair is None:
        return None
    x, y, kind = pair
    if operator in ("/", "DIV", "%") and y == 0:
        return None
    if operator == "/":
        return _divide(x, y, kind)
    if operator == "DIV":
        return _int_divide(x, y, kind)
    if operator == "%":
        return _modulo(x, y, kind)
    if kind is Decimal:
        method = {"+": _DEC.add, "-": _DEC.subtract, "*": _DEC.multiply}[operator]
        return method(x, y)
    if operator == "+":
        return x + y
    if operator == "-":
        return x - y
    if operator == "*":
        return x * y
    raise ValueError(f"unknown arithmetic operator {operator!r}")


def negate(value: Any) -> Any:
    """Unary minus; a string is negated as a double."""
    number = to_number(value)
    if number is None:
        return None
    return _DEC.minus(number) if isinstance(number, Decimal) else -number


@functools.lru_cache(maxsize=512)
def like_regex(pattern: str | bytes, escape: str | bytes | None) -> re.Pattern[Any]:
    """Translate a LIKE pattern: ``%`` any run, ``_`` one character, ``escape`` quotes the next.

    An escape character at the very end stands for itself, as in MySQL.
    """
    binary = isinstance(pattern, bytes)
    chars: list[Any] = [pattern[i : i + 1] for i in range(len(pattern))]
    percent, underscore = (b"%", b"_") if binary else ("%", "_")
    out: list[Any] = []
    i = 0
    while i < len(chars):
        ch = chars[i]
        if escape and ch == escape and i + 1 < len(chars):
            out.append(re.escape(chars[i + 1]))
            i += 2
            continue
        if ch == percent:
            out.append(b".*" if binary else ".*")
        elif ch == underscore:
            out.append(b"." if binary else ".")
        else:
            out.append(re.escape(ch))
        i += 1
    joined = (b"" if binary else "").join(out)
    return re.compile(joined, re.DOTALL)


def _same_kind(values: list[Any]) -> list[Any]:
    if any(isinstance(v, bytes) for v in values):
        return [v.encode() if isinstance(v, str) else v for v in values]
    return values


def like(value: Any, pattern: Any, escape: str | bytes | None = "\\") -> int | None:
    """``value LIKE pattern ESCAPE escape`` as 1, 0 or None (NULL)."""
    text, template = to_text(value), to_text(pattern)
    if text is None or template is None:
        return None
    text, template, esc = _same_kind([text, template, escape or None])
    return int(like_regex(template, esc).fullmatch(text) is not None)


def concat(values: list[Any]) -> str | bytes | None:
    """MySQL ``CONCAT``: NULL if any argument is NULL; binary if any argument is."""
    texts = [to_text(v) for v in values]
    if any(t is None for t in texts):
        return None
    same = _same_kind(texts)
    return (b"" if same and isinstance(same[0], bytes) else "").join(same)
