"""The splitter's pure parts: the distribution check, arithmetic ranges, the chunk-key choice."""

from __future__ import annotations

import pytest

from cdc.model.schema import Column, TableName, TableSchema
from cdc.snapshot.errors import SnapshotError
from cdc.snapshot.splitter import (
    arithmetic_bounds,
    arithmetic_step,
    chunk_column,
    chunks_from_bounds,
    distribution_factor,
    with_tail,
)

T = TableName("shop", "orders")


def schema(primary_key: tuple[str, ...] = (), unique_keys: tuple = ()) -> TableSchema:
    return TableSchema(
        T,
        (
            Column("id", "bigint", "bigint(20)", nullable=False),
            Column("name", "varchar", "varchar(20)", nullable=False, charset="utf8mb4"),
            Column("code", "varchar", "varchar(20)", nullable=True, charset="utf8mb4"),
            Column("kind", "enum", "enum('a','b')", elements=("a", "b")),
            Column("ratio", "float", "float"),
        ),
        primary_key,
        unique_keys,
    )


def test_distribution_factor_is_key_values_per_row() -> None:
    assert distribution_factor(1, 100, 100) == 1.0
    assert distribution_factor(1, 1000, 100) == 10.0
    assert distribution_factor(5, 5, 10) == 0.1
    with pytest.raises(ValueError, match="positive row count"):
        distribution_factor(1, 2, 0)


@pytest.mark.parametrize(
    ("low", "high", "rows", "size", "step"),
    [
        (1, 100_000, 100_000, 8096, 8096),  # dense keys: chunk_size keys per chunk
        (1, 200_000, 100_000, 8096, 16192),  # every other key used: twice the span
        (1, 100, 200, 10, 5),  # two rows per value (composite first column)
        (1, 1_000_000, 1000, 10, 10_000),  # factor 1000: still arithmetic
        (1, 1_000_001, 1000, 10, None),  # factor just over 1000: by query
        (1, 2, 100, 10, None),  # factor 0.02: too many duplicates for arithmetic
        (1, 10**12, 3, 8096, None),  # the sparse keys 1, 2, 10^12
        (1, 10, 0, 8096, None),  # no row estimate
        (7, 7, 1, 8096, 8096),  # one row
        (1, 100, 2000, 1, 1),  # step never below 1
    ],
)
def test_arithmetic_step_follows_the_distribution_check(
    low: int, high: int, rows: int, size: int, step: int | None
) -> None:
    assert arithmetic_step(low, high, rows, size) == step


def test_arithmetic_bounds_cover_the_range_evenly() -> None:
    assert arithmetic_bounds(1, 100, 30) == [31, 61, 91]
    assert arithmetic_bounds(1, 90, 30) == [31, 61]
    assert arithmetic_bounds(5, 5, 10) == []
    assert arithmetic_bounds(-10, 10, 10) == [0, 10]
    assert arithmetic_bounds(2**64 - 3, 2**64 - 1, 1) == [2**64 - 2, 2**64 - 1]
    with pytest.raises(ValueError, match="step"):
        arithmetic_bounds(1, 10, 0)


def test_chunks_from_bounds_are_numbered_and_open_at_both_ends() -> None:
    s = schema(("id",))
    chunks = chunks_from_bounds(s, s.column("id"), [31, 61])
    assert [(c.n, c.lower, c.upper) for c in chunks] == [
        (0, None, 31),
        (1, 31, 61),
        (2, 61, None),
    ]
    assert {c.key_column for c in chunks} == {"id"}
    only = chunks_from_bounds(s, s.column("id"), [])
    assert [(c.n, c.lower, c.upper) for c in only] == [(0, None, None)]


def test_chunk_column_is_the_first_key_column() -> None:
    assert chunk_column(schema(("name", "id"))).name == "name"
    assert chunk_column(schema((), (("code",), ("name", "id")))).name == "name"


def test_keyless_table_needs_a_chunk_key() -> None:
    with pytest.raises(SnapshotError) as info:
        chunk_column(schema((), (("code",),)))
    message = str(info.value)
    assert "shop.orders" in message
    assert 'chunk-key-columns = { "shop.orders" = "<column>" }' in message


def test_given_chunk_key_wins_and_is_matched_case_insensitively() -> None:
    assert chunk_column(schema(("id",)), "NAME").name == "name"
    assert chunk_column(schema(), "code").name == "code"


def test_unknown_chunk_key_names_the_columns() -> None:
    with pytest.raises(
        SnapshotError, match="'nope' given for shop.orders does not exist.*id, name"
    ):
        chunk_column(schema(("id",)), "nope")


@pytest.mark.parametrize("column", ["kind", "ratio"])
def test_chunk_key_of_an_unsplittable_type_is_refused(column: str) -> None:
    with pytest.raises(SnapshotError, match="cannot be split into ranges"):
        chunk_column(schema(("id",)), column)


@pytest.mark.parametrize(
    ("bounds", "high", "expected"),
    [
        ([31, 61, 91], 100, [31, 61, 91, 100]),  # the tail starts at the MAX seen
        ([31, 61, 100], 100, [31, 61, 100]),  # already there
        ([], 100, []),  # a table of one chunk has no tail
        (["c011", "c021"], "c025", ["c011", "c021", "c025"]),
    ],
)
def test_with_tail(bounds: list, high: object, expected: list) -> None:
    assert with_tail(bounds, high) == expected
