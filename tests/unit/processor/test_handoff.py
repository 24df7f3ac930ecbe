"""The hand-off rule: a change is delivered only after its chunk's high watermark."""

from __future__ import annotations

import pytest

from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.records import ChunkRecord, ChunkState
from processor.handoff import HandoffError, HandoffGate

T = TableName("db", "t")


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def records(marks: list[int], bounds: list[int]) -> list[ChunkRecord]:
    edges: list[int | None] = [None, *bounds, None]
    return [
        ChunkRecord(SnapshotChunk(T, n, "id", lo, hi), ChunkState.DONE, pos(mark), 1, 0.0, 1.0)
        for n, (lo, hi, mark) in enumerate(zip(edges, edges[1:], marks, strict=False))
    ]


def change(op: Op, at: int, before: int | None = None, after: int | None = None) -> RowChange:
    b = {"id": before, "v": "old"} if before is not None else None
    a = {"id": after, "v": "new"} if after is not None else None
    key = (after if after is not None else before,)
    return RowChange(T, op, b, a, key, pos(at))


# Chunks: (-inf,100) hw 500 | [100,200) hw 300 | [200,+inf) hw 700
GATE = HandoffGate(records([500, 300, 700], [100, 200]), key_columns=("id",))


def test_reading_starts_at_the_lowest_high_watermark() -> None:
    assert GATE.start == pos(300) and GATE.end == pos(700)


@pytest.mark.parametrize(
    ("key", "at", "delivered"),
    [
        (50, 500, False),  # at the chunk's watermark: already in its snapshot
        (50, 501, True),
        (150, 301, True),
        (150, 300, False),
        (100, 400, True),  # boundary belongs to the upper chunk (hw 300)
        (99, 400, False),
        (250, 650, False),
        (250, 701, True),
    ],
)
def test_insert_and_delete_follow_their_chunk(key: int, at: int, delivered: bool) -> None:
    for op, before, after in ((Op.CREATE, None, key), (Op.DELETE, key, None)):
        out = list(GATE.admit(change(op, at, before, after)))
        assert (out != []) is delivered, (op, key, at)


def test_everything_after_the_highest_watermark_is_delivered_without_lookup() -> None:
    gate = HandoffGate(records([500, 300, 700], [100, 200]), ("id",), compare=_refuse)
    assert len(list(gate.admit(change(Op.CREATE, 701, after=150)))) == 1


def _refuse(a: object, b: object) -> int:
    raise AssertionError("no lookup expected past the highest watermark")


def test_update_moving_a_row_between_chunks_is_split() -> None:
    # From chunk 0 (hw 500) to chunk 1 (hw 300) at 400: the delete half is in chunk 0's
    # snapshot already, the new row is not in chunk 1's.
    out = list(GATE.admit(change(Op.UPDATE, 400, before=50, after=150)))
    assert [(c.op, c.key, c.before, c.after) for c in out] == [
        (Op.CREATE, (150,), None, {"id": 150, "v": "new"})
    ]
    # The other way round: only the removal of the old key is news.
    out = list(GATE.admit(change(Op.UPDATE, 400, before=150, after=50)))
    assert [(c.op, c.key, c.after) for c in out] == [(Op.DELETE, (150,), None)]
    assert len(list(GATE.admit(change(Op.UPDATE, 600, before=50, after=150)))) == 1
    assert list(GATE.admit(change(Op.UPDATE, 250, before=50, after=150))) == []


def test_pending_chunks_refuse_the_hand_off() -> None:
    pending = records([500, 300], [100])
    pending[1] = ChunkRecord(pending[1].chunk, ChunkState.PENDING, None, 0, 0.0, None)
    with pytest.raises(HandoffError, match="still pending: db.t:1"):
        HandoffGate(pending, ("id",))


def _pending(recs: list[ChunkRecord], n: int) -> list[ChunkRecord]:
    """``recs`` with chunk ``n`` pending again (its read met another schema)."""
    r = recs[n]
    recs[n] = ChunkRecord(r.chunk, ChunkState.PENDING, None, 0, r.planned_at, None)
    return recs


def test_the_anchor_lowers_the_start_so_every_ddl_after_it_is_met() -> None:
    gate = HandoffGate(records([500, 300, 700], [100, 200]), ("id",), floor=pos(120))
    assert gate.start == pos(120) and gate.end == pos(700)
    assert list(gate.admit(change(Op.UPDATE, 200, before=150, after=150))) == []


def test_a_pending_chunk_holds_back_every_change_of_its_keys() -> None:
    gate = HandoffGate(
        _pending(records([500, 300, 700], [100, 200]), 1), ("id",), changed_by=pos(900)
    )
    assert gate.pending == ("db.t:1",) and gate.end is None
    assert list(gate.admit(change(Op.CREATE, 5000, after=150))) == []
    assert list(gate.admit(change(Op.CREATE, 5000, after=50))) != []
    moved = list(gate.admit(change(Op.UPDATE, 5000, before=50, after=150)))
    assert [c.op for c in moved] == [Op.DELETE]


def test_pending_chunks_need_the_position_their_ddl_lies_before() -> None:
    with pytest.raises(HandoffError, match="still pending: db.t:1"):
        HandoffGate(_pending(records([500, 300, 700], [100, 200]), 1), ("id",))


def test_a_ddl_invalidates_pending_chunks_and_those_read_at_or_after_it() -> None:
    gate = HandoffGate(
        _pending(records([500, 300, 700], [100, 200]), 1), ("id",), changed_by=pos(900)
    )
    assert gate.invalidated_by(pos(500)) == ["db.t:0", "db.t:1", "db.t:2"]
    assert gate.invalidated_by(pos(501)) == ["db.t:1", "db.t:2"]
    assert GATE.invalidated_by(pos(800)) == []


def test_pending_chunks_without_their_ddl_fail_closed_past_the_position() -> None:
    gate = HandoffGate(
        _pending(records([500, 300, 700], [100, 200]), 1), ("id",), changed_by=pos(900)
    )
    gate.check_pending(pos(900))
    with pytest.raises(HandoffError, match="no DDL of the table"):
        gate.check_pending(pos(901))
    GATE.check_pending(pos(10**6))


def test_a_table_with_another_unique_key_gets_every_change_of_its_done_chunks() -> None:
    """``replay_all``: the sink's REPLACE of an older change may remove a row a later
    chunk read (they clash on the other unique key); that row's own changes up to its
    chunk's mark must come too, in order, to bring it back (the variety soak's seed 617)."""
    gate = HandoffGate(records([500, 300, 700], [100, 200]), ("id",), replay_all=True)
    assert gate.start == pos(300)
    for key, at in ((50, 310), (150, 300), (250, 650), (250, 701)):
        for op, before, after in ((Op.CREATE, None, key), (Op.DELETE, key, None)):
            assert len(list(gate.admit(change(op, at, before, after)))) == 1, (op, key, at)
    assert [c.op for c in gate.admit(change(Op.UPDATE, 400, before=50, after=250))] == [Op.UPDATE]
    held = HandoffGate(
        _pending(records([500, 300, 700], [100, 200]), 1),
        ("id",),
        changed_by=pos(900),
        replay_all=True,
    )
    assert list(held.admit(change(Op.CREATE, 310, after=150))) == []  # a pending chunk's
    assert len(list(held.admit(change(Op.CREATE, 310, after=50)))) == 1
