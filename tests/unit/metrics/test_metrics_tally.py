"""cdc.metrics.tally: rows per op exactly, bytes exactly for small batches and estimated
from an even sample for large ones."""

from __future__ import annotations

from cdc.binlog.rowchanges import TableShape, row_change
from cdc.metrics import EXACT_ROWS, tally
from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName

AT = Position("binlog.000001", 4)
T = TableName("shop", "items")


def _insert(i: int, text: str) -> RowChange:
    return RowChange(T, Op.CREATE, None, {"id": i, "name": text}, (i,), AT)


def test_a_small_batch_is_sized_row_by_row() -> None:
    batch = [_insert(i, "x" * i) for i in range(EXACT_ROWS)]
    counts, size = tally(batch)
    assert counts[Op.CREATE] == EXACT_ROWS
    assert size == sum(8 + i for i in range(EXACT_ROWS))


def test_a_large_batch_counts_every_row_and_estimates_bytes_from_a_sample() -> None:
    deletes = [
        RowChange(T, Op.DELETE, {"id": i, "name": "abcd"}, None, (i,), AT) for i in range(500)
    ]
    batch = [_insert(i, "abcd") for i in range(1500)] + deletes
    counts, size = tally(batch)
    assert counts == {Op.CREATE: 1500, Op.UPDATE: 0, Op.DELETE: 500, Op.READ: 0}
    assert size == 2000 * (8 + 4)  # uniform rows: the estimate is exact


def test_a_large_batch_of_uneven_rows_is_estimated_within_a_tenth() -> None:
    batch = [_insert(i, "y" * (i % 100)) for i in range(10_000)]
    exact = sum(8 + i % 100 for i in range(10_000))
    _, size = tally(batch)
    assert abs(size - exact) <= exact / 10


def test_decoded_rows_are_sized_from_their_values_without_making_their_images() -> None:
    shape = TableShape(T, ("id", "name"), (0,))
    inserts = [row_change(shape, Op.CREATE, None, (i, "x" * i), AT, None) for i in range(10)]
    deletes = [row_change(shape, Op.DELETE, (i, "abc"), None, AT, None) for i in range(5)]
    counts, size = tally(inserts + deletes)
    assert counts[Op.CREATE] == 10 and counts[Op.DELETE] == 5
    assert size == sum(8 + i for i in range(10)) + 5 * (8 + 3)
    assert all("after" not in c.__dict__ and "before" not in c.__dict__ for c in inserts + deletes)
