"""Folding binlog changes into a chunk's rows: the DBLog reconciliation, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.fold import ChunkFold, chunk_values, touches

T = TableName("shop", "items")
AT = Position("binlog.000001", 100)
SCHEMA = TableSchema(
    T,
    (
        Column("id", "int", "int(11)", nullable=False),
        Column("grp", "varchar", "varchar(10)", charset="utf8mb4"),
        Column("v", "int", "int(11)"),
    ),
    ("id",),
)
CHUNK = SnapshotChunk(T, 1, "id", 10, 20)


def row(id_: int, v: int = 0, grp: str = "g") -> dict[str, Any]:
    return {"id": id_, "grp": grp, "v": v}


def insert(after: dict[str, Any]) -> RowChange:
    return RowChange(T, Op.CREATE, None, after, (after["id"],), AT)


def update(before: dict[str, Any], after: dict[str, Any]) -> RowChange:
    return RowChange(T, Op.UPDATE, before, after, (after["id"],), AT)


def delete(before: dict[str, Any]) -> RowChange:
    return RowChange(T, Op.DELETE, before, None, (before["id"],), AT)


def folded(selected: list[dict[str, Any]], changes: list[RowChange]) -> dict[int, int]:
    fold = ChunkFold(SCHEMA, CHUNK)
    for r in selected:
        fold.add(r)
    for change in changes:
        fold.apply(change)
    return {key[0]: r["v"] for key, r in fold.rows.items()}


def test_insert_inside_is_added_outside_ignored() -> None:
    assert folded([row(10)], [insert(row(15, 1)), insert(row(20, 1)), insert(row(9, 1))]) == {
        10: 0,
        15: 1,
    }


def test_update_puts_the_after_image() -> None:
    assert folded([row(12)], [update(row(12), row(12, 5))]) == {12: 5}


def test_key_change_into_and_out_of_the_range() -> None:
    changes = [update(row(25), row(11, 1)), update(row(13), row(30, 1))]
    assert folded([row(13)], changes) == {11: 1}


def test_delete_removes_and_deleting_an_absent_row_is_harmless() -> None:
    assert folded([row(10), row(11)], [delete(row(11)), delete(row(15))]) == {10: 0}


def test_replaying_changes_the_select_already_saw_gives_the_same_rows() -> None:
    # The SELECT ran after all of these: it saw 15 inserted, 11 updated, 12 gone.
    changes = [insert(row(15, 1)), update(row(11), row(11, 7)), delete(row(12))]
    after_select = [row(10), row(11, 7), row(15, 1)]
    before_select = [row(10), row(11), row(12)]
    assert folded(after_select, changes) == folded(before_select, changes) == {10: 0, 11: 7, 15: 1}


def test_last_change_of_a_key_wins() -> None:
    changes = [
        insert(row(16, 1)),
        delete(row(16, 1)),
        insert(row(16, 2)),
        update(row(16, 2), row(16, 3)),
    ]
    assert folded([], changes) == {16: 3}


def test_applied_counts_changes_that_altered_the_rows() -> None:
    fold = ChunkFold(SCHEMA, CHUNK)
    assert fold.apply(insert(row(11)))
    assert not fold.apply(insert(row(99)))
    assert not fold.apply(delete(row(5)))
    assert fold.applied == 1


def test_rows_move_between_chunks_when_the_chunk_key_is_not_the_key() -> None:
    by_group = SnapshotChunk(T, 0, "v", None, 10)
    fold = ChunkFold(SCHEMA, by_group)
    fold.add(row(1, 5))
    fold.apply(update(row(1, 5), row(1, 50)))  # leaves: v moved out of [.., 10)
    fold.apply(update(row(2, 70), row(2, 7)))  # enters
    assert {k[0]: r["v"] for k, r in fold.rows.items()} == {2: 7}


def test_text_chunk_key_uses_the_collation_order_given() -> None:
    by_group = SnapshotChunk(T, 1, "grp", "b", "m")

    def casefold(a: Any, b: Any) -> int:
        return (a.casefold() > b.casefold()) - (a.casefold() < b.casefold())

    fold = ChunkFold(SCHEMA, by_group, casefold)
    fold.apply(insert(row(1, grp="B")))
    fold.apply(insert(row(2, grp="M")))
    assert [k[0] for k in fold.rows] == [1]
    with pytest.raises(TypeError, match="collation"):
        ChunkFold(SCHEMA, by_group).apply(insert(row(3, grp="c")))


def test_keyless_tables_cannot_be_folded() -> None:
    keyless = TableSchema(T, SCHEMA.columns, ())
    with pytest.raises(ValueError, match="no key"):
        ChunkFold(keyless, CHUNK)


def test_read_rows_are_not_binlog_changes() -> None:
    with pytest.raises(ValueError, match="READ"):
        ChunkFold(SCHEMA, CHUNK).apply(RowChange(T, Op.READ, None, row(11), (11,), AT))


def test_touches_and_chunk_values_look_at_both_images() -> None:
    move_in = update(row(30), row(12))
    move_out = update(row(12), row(30))
    outside = update(row(30), row(31))
    assert touches(CHUNK, move_in) and touches(CHUNK, move_out)
    assert not touches(CHUNK, outside)
    assert chunk_values(CHUNK, [move_in, delete(row(4))]) == [30, 12, 4]
