"""Matching the rows of a chunk: keyed by value, or whole rows as a multiset."""

from __future__ import annotations

from decimal import Decimal

from cdc.diff.report import DiffKind, RowDiff
from cdc.diff.rows import compare_keyed, compare_whole, select_rows_sql
from cdc.model.schema import Column, TableName

NAMES = ("id", "v", "w")
M, E, D = DiffKind.MISSING_IN_TARGET, DiffKind.EXTRA_IN_TARGET, DiffKind.DIFFERENT


def test_keyed_rows_are_compared_exactly() -> None:
    source = [(1, None, "a"), (2, "x ", "b"), (3, Decimal("1.50"), b"\x00"), (4, 0.1, "d")]
    target = [(1, "", "a"), (2, "x", "B"), (3, Decimal("1.5"), b"\x00"), (5, 0.1, "d")]
    diffs = compare_keyed(source, target, NAMES, (0,))
    assert diffs == [
        RowDiff(D, (1,), source[0], target[0], ("v",)),  # NULL is not ''
        RowDiff(D, (2,), source[1], target[1], ("v", "w")),  # trailing space, case
        RowDiff(M, (4,), source[3], None),
        RowDiff(E, (5,), None, target[3]),
    ]  # 1.50 and 1.5 are the same DECIMAL value


def test_composite_keys_and_order() -> None:
    source = [("a", 1, 0), ("a", 2, 0), ("b", 1, 0)]
    target = [("a", 2, 1), ("c", 1, 0), ("a", 1, 0)]
    diffs = compare_keyed(source, target, NAMES, (0, 1))
    assert [(d.kind, d.key, d.columns) for d in diffs] == [
        (D, ("a", 2), ("w",)),
        (M, ("b", 1), ()),
        (E, ("c", 1), ()),
    ]


def test_a_key_matcher_pairs_leftovers_as_one_different_row() -> None:
    source = [("Case", 1, "x"), ("keep", 2, "y")]
    target = [("case", 1, "x"), ("other", 3, "z")]
    asked = []

    def casefold_matcher(source_only: list[tuple], target_only: list[tuple]) -> dict[tuple, tuple]:
        asked.append((list(source_only), list(target_only)))
        folded = {(k[0].lower(), k[1]): k for k in target_only}
        return {
            k: folded[(k[0].lower(), k[1])] for k in source_only if (k[0].lower(), k[1]) in folded
        }

    diffs = compare_keyed(source, target, NAMES, (0, 1), casefold_matcher)
    assert asked == [([("Case", 1), ("keep", 2)], [("case", 1), ("other", 3)])]
    assert [(d.kind, d.key, d.columns) for d in diffs] == [
        (D, ("Case", 1), ("id",)),
        (M, ("keep", 2), ()),
        (E, ("other", 3), ()),
    ]


def test_the_matcher_is_not_asked_when_one_side_has_no_leftover() -> None:
    def refuse(source_only: list[tuple], target_only: list[tuple]) -> dict[tuple, tuple]:
        raise AssertionError("no leftovers on both sides: nothing to pair")

    diffs = compare_keyed([(1, 0, 0), (2, 0, 0)], [(1, 0, 0)], NAMES, (0,), refuse)
    assert [(d.kind, d.key) for d in diffs] == [(M, (2,))]


def test_whole_rows_are_a_multiset() -> None:
    source = [(1, "x"), (1, "x"), (1, "x"), (3, None)]
    target = [(1, "x"), (2, "y"), (3, ""), (2, "y")]
    diffs = compare_whole(source, target)
    assert [(d.kind, d.key, d.source, d.target) for d in diffs] == [
        (M, None, (1, "x"), None),
        (M, None, (1, "x"), None),
        (M, None, (3, None), None),
        (E, None, None, (2, "y")),
        (E, None, None, (2, "y")),
        (E, None, None, (3, "")),
    ]
    assert compare_whole(source, list(reversed(source))) == []


def test_select_reads_float_as_double_and_orders_by_position() -> None:
    columns = [Column("id", "int", "int"), Column("f%", "float", "float")]
    sql = select_rows_sql(TableName("d", "t"), columns, "`id` >= %s", (0,))
    assert sql == (
        "SELECT `id`, CAST(`f%%` AS DOUBLE) AS `f%%` FROM `d`.`t` WHERE `id` >= %s ORDER BY 1"
    )
