"""Ordering chunk-key values in Python where the server's order allows it."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from cdc.snapshot.keyorder import python_compare

ASCENDING = [
    [-(2**63), -1, 0, 1, 2**64 - 1],
    [Decimal("-1.5"), Decimal("0"), Decimal("0.001"), Decimal("10")],
    [b"", b"\x00", b"\x00\x00", b"\x01", b"a", b"\xff"],
    [
        date(1000, 1, 1),
        date(2024, 2, 29),
        date(9999, 12, 31),
    ],
    [
        datetime(2024, 1, 1, 0, 0, tzinfo=UTC),
        datetime(2024, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=-1))),  # 01:30 UTC
        datetime(2024, 1, 1, 3, 0, tzinfo=timezone(timedelta(hours=1))),  # 02:00 UTC
    ],
    [-timedelta(hours=838), timedelta(microseconds=-1), timedelta(0), timedelta(hours=838)],
]


@pytest.mark.parametrize("values", ASCENDING, ids=lambda v: type(v[0]).__name__)
def test_values_order_as_on_the_server(values: list[Any]) -> None:
    for i, left in enumerate(values):
        for j, right in enumerate(values):
            expected = (i > j) - (i < j)
            assert python_compare(left, right) == expected, (left, right)


def test_zero_dates_sort_before_real_ones() -> None:
    from cdc.typeconv import RawDate, RawDateTime

    assert python_compare(RawDate(0, 0, 0), date(1, 1, 1)) < 0
    assert python_compare(RawDate(2024, 2, 31), date(2024, 3, 1)) < 0
    assert python_compare(RawDate(2024, 2, 31), date(2024, 2, 29)) > 0
    assert python_compare(RawDateTime(0, 0, 0), datetime(1970, 1, 1, tzinfo=UTC)) < 0


def test_text_is_refused() -> None:
    with pytest.raises(TypeError, match="collation"):
        python_compare("a", "b")


def test_mixed_types_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="share a type"):
        python_compare(b"a", 1)
