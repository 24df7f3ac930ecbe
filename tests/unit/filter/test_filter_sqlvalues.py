"""MySQL value semantics used by row expressions, tested directly."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from decimal import Decimal

import pytest

from cdc.filter.sqlvalues import (
    arithmetic,
    compare,
    concat,
    is_true,
    like,
    like_regex,
    negate,
    to_number,
    to_text,
)


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        (1, 2, -1),
        (2, 2, 0),
        (3, 2, 1),
        (None, 1, None),
        (1, None, None),
        (None, None, None),
        ("b", "a", 1),
        ("B", "a", -1),  # code point order: binary collation
        (b"a", "a", 0),
        (b"\xff", "a", 1),
        (True, 1, 0),
        (Decimal("1.10"), Decimal("1.1"), 0),
        (Decimal("0.1"), 0.1, 0),
        ("10", 9, 1),
        ("10", "9", -1),
        (b"10", 9, 1),
        (date(2024, 1, 1), datetime(2024, 1, 1), 0),
        (date(2024, 1, 1), datetime(2024, 1, 1, 0, 0, 1), -1),
        (time(1), timedelta(hours=1), 0),
        (timedelta(hours=25), time(23), 1),
        ("2024-01-01", date(2024, 1, 2), -1),
        (b"2024-01-02", date(2024, 1, 2), 0),
        ("-01:30:00", timedelta(minutes=-90), 0),
        (date(2024, 1, 1), time(1), -1),  # a TIME is taken on the current date
        (datetime(9999, 1, 1), timedelta(hours=-1), 1),
    ],
)
def test_compare(left, right, expected):
    assert compare(left, right) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (True, 1),
        (" -1.5e1xyz", -15.0),
        ("abc", 0.0),
        ("", 0.0),
        ("+.5", 0.5),
        (b"12", 12.0),
        (datetime(2024, 1, 2, 3, 4, 5), 20240102030405),
        (datetime(2024, 1, 2, 3, 4, 5, 60), Decimal("20240102030405.000060")),
        (date(2024, 1, 2), 20240102),
        (time(3, 4, 5), 30405),
        (timedelta(hours=-26, minutes=-1), -260100),
    ],
)
def test_to_number(value, expected):
    result = to_number(value)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        (False, "0"),
        (12, "12"),
        (Decimal("1.50"), "1.50"),
        (Decimal("1E+3"), "1000"),
        (2.0, "2"),
        (0.1, "0.1"),
        (1e20, "1e20"),
        (b"x", b"x"),
        (datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05"),
        (datetime(2024, 1, 2, 3, 4, 5, 500000), "2024-01-02 03:04:05.500000"),
        (date(2024, 1, 2), "2024-01-02"),
        (time(3, 4, 5), "03:04:05"),
        (timedelta(days=2, seconds=1), "48:00:01"),
        (timedelta(seconds=-1.5), "-00:00:01.500000"),
    ],
)
def test_to_text(value, expected):
    assert to_text(value) == expected


def test_truth():
    assert is_true(None) is None
    assert is_true(0) is False
    assert is_true(Decimal("0.00")) is False
    assert is_true(0.0001) is True
    assert is_true("0.0") is False
    assert is_true("x") is False
    assert is_true("2x") is True
    assert is_true(date(2024, 1, 1)) is True
    assert is_true(timedelta(0)) is False


def test_arithmetic_types_and_nulls():
    assert arithmetic("+", 1, None) is None
    assert arithmetic("+", 2**64, 1) == 2**64 + 1
    assert arithmetic("*", Decimal("1.5"), 2) == Decimal("3.0")
    assert arithmetic("-", 1.5, Decimal("0.5")) == 1.0
    assert arithmetic("/", 1, 3) == Decimal("0.3333")
    assert arithmetic("/", 1.0, 4) == 0.25
    assert arithmetic("/", 1, 0) is None
    assert arithmetic("DIV", -7, 2) == -3
    assert arithmetic("DIV", 7.9, 2) == 3
    assert arithmetic("%", -7.5, 2) == -1.5
    assert arithmetic("%", Decimal("-7.5"), 2) == Decimal("-1.5")
    assert arithmetic("%", 1, Decimal("0")) is None
    assert negate(None) is None
    assert negate("3") == -3.0
    assert negate(Decimal("0.10")) == Decimal("-0.10")
    with pytest.raises(ValueError, match="unknown arithmetic operator"):
        arithmetic("^", 1, 2)


def test_like_translation():
    assert like_regex("a%b_c", "\\").pattern == "a.*b.c"
    assert like("a%", "a\\%", "\\") == 1
    assert like("ab", "a\\%", "\\") == 0
    assert like("a\\", "a\\", "\\") == 1  # a trailing escape stands for itself
    assert like("a.*", "a.*", None) == 1
    assert like("aXb", "a.*", None) == 0
    assert like(b"\x00\xffz", "%z", "\\") == 1
    assert like("x", b"_", "\\") == 1
    assert like(None, "%", "\\") is None
    assert like(5, "5", "\\") == 1


def test_concat():
    assert concat(["a", 1, Decimal("2.0")]) == "a12.0"
    assert concat(["a", None]) is None
    assert concat(["a", b"b"]) == b"ab"
    assert concat([]) == ""


def test_unsupported_values_raise_type_error():
    with pytest.raises(TypeError, match="type dict is not supported"):
        compare({"a": 1}, 1)
    with pytest.raises(TypeError, match="type list is not supported"):
        to_text([1])
