"""``keys_held`` (cdc.snapshot.repair): which keys a re-snapshot chunk wrote the source
still holds, asked of the source itself, so that its key collations decide."""

from __future__ import annotations

import datetime
import decimal

import pytest
from conftest import Source

from cdc.snapshot.repair import keys_held


def test_the_source_answers_for_each_key_in_its_own_collation(src: Source) -> None:
    src.execute(
        "CREATE TABLE t (k VARCHAR(10) COLLATE utf8mb4_general_ci, d DATE, n DECIMAL(6,2), "
        "PRIMARY KEY (k, d, n))",
        "INSERT INTO t VALUES ('a', '2024-01-02', 1.50), ('ß', '2024-01-02', 2.00)",
    )
    day = datetime.date(2024, 1, 2)
    keys = [
        ("a", day, decimal.Decimal("1.50")),
        ("A ", day, decimal.Decimal("1.5")),  # the same row in general_ci, PAD SPACE
        ("s", day, decimal.Decimal("2.00")),  # 'ß' = 's' in general_ci
        ("b", day, decimal.Decimal("1.50")),
        ("a", datetime.date(2024, 1, 3), decimal.Decimal("1.50")),
    ]
    assert keys_held(src.snap, src.schema("t"), keys) == [True, True, True, False, False]


def test_many_keys_are_asked_in_batches_and_answered_now(src: Source) -> None:
    src.execute("CREATE TABLE n (id BIGINT PRIMARY KEY)")
    src.execute("INSERT INTO n SELECT seq FROM seq_1_to_600 WHERE seq % 3 <> 0")
    schema = src.schema("n")
    keys = [(i,) for i in range(1, 601)]
    assert keys_held(src.snap, schema, keys) == [i % 3 != 0 for i in range(1, 601)]
    src.execute("DELETE FROM n WHERE id = 1")  # a change after the last answer is seen
    assert keys_held(src.snap, schema, [(1,), (2,)]) == [False, True]


@pytest.mark.parametrize("asked", [[], [(7,)]])
def test_no_keys_asked_and_a_key_of_an_empty_table(src: Source, asked: list[tuple[int]]) -> None:
    src.execute("CREATE TABLE e (id INT PRIMARY KEY)")
    assert keys_held(src.snap, src.schema("e"), asked) == [False] * len(asked)
