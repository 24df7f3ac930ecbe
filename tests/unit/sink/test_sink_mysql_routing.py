"""Lane routing (cdc.sink.mysql.routing): one row's spellings meet in one lane."""

from __future__ import annotations

import pytest

from cdc.model import TableName
from cdc.sink.mysql.routing import fold_key, fold_text, lane_for

T = TableName("shop", "items")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("abc", "ABC"),
        ("abc", "abc   "),
        ("Crème Brûlée", "creme brulee"),
        ("ﬁle", "FILE"),  # compatibility ligature
        ("Ärger", "arger"),
    ],
)
def test_spellings_of_one_row_fold_alike(a: str, b: str) -> None:
    assert fold_text(a) == fold_text(b)
    for lanes in (2, 7, 16):
        assert lane_for(T, fold_key((1, a)), lanes) == lane_for(T, fold_key((1, b)), lanes)


def test_distinct_keys_stay_distinct_and_non_text_values_are_untouched() -> None:
    assert fold_text("abc") != fold_text("abd")
    assert fold_text(" a") != fold_text("a")  # leading spaces count in every collation
    key = (1, b"AB", 2.5)
    assert fold_key(key) is key


def test_lanes_spread_keys_and_a_table_key_of_none_routes_by_table() -> None:
    lanes = {lane_for(T, (i,), 8) for i in range(1000)}
    assert lanes == set(range(8))
    assert {lane_for(T, None, 8) for _ in range(3)} == {lane_for(T, None, 8)}
    assert lane_for(T, (5,), 1) == 0
