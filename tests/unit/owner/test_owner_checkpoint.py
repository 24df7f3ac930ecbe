"""The changefeed checkpoint never passes the barrier (owner/decisions.py), a pure function.

Table checkpoints can lie beyond a DDL the owner has not applied yet (a table
whose snapshot anchored after it, or that was gone before its snapshot
began); persisted, such a checkpoint let a new owner's DDL puller start past
the DDL and skip it for good (found by the fuzz test, seed 2038).
"""

from __future__ import annotations

from dataclasses import replace

from cdc.changefeed import (
    Barrier,
    BarrierKind,
    TableEntry,
    TableRecord,
    TableState,
    TableTask,
)
from cdc.model.position import Position
from owner.decisions import capped_checkpoint, complete_checkpoint, unsettled


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def entry(checkpoint: int | None) -> TableEntry:
    at = None if checkpoint is None else pos(checkpoint)
    record = TableRecord("c1", TableState.RUNNING, 1, at)
    return TableEntry("db.t", TableTask("c1"), 1, record)


DDL = Barrier(BarrierKind.DDL, pos(500))
RESOLVED = Barrier(BarrierKind.RESOLVED, pos(900))


def test_a_table_checkpoint_past_a_pending_ddl_is_held_at_its_limit() -> None:
    assert capped_checkpoint(pos(800), DDL, has_tasks=True) == pos(500)
    assert capped_checkpoint(pos(400), DDL, has_tasks=True) == pos(400)


def test_never_past_what_the_ddl_puller_has_read() -> None:
    assert capped_checkpoint(pos(1000), RESOLVED, has_tasks=True) == pos(900)


def test_unknown_until_the_ddl_puller_has_read() -> None:
    assert capped_checkpoint(pos(300), None, has_tasks=True) is None


def test_a_table_without_checkpoint_holds_it_and_no_table_means_the_barrier() -> None:
    assert capped_checkpoint(None, RESOLVED, has_tasks=True) is None
    assert capped_checkpoint(None, RESOLVED, has_tasks=False) == pos(900)


def test_not_persisted_while_a_snapshot_has_chunks_to_read_again() -> None:
    """Seed 2055: a table re-reading chunks after a DDL reported the DDL's position as its
    checkpoint; persisted, the changefeed said "equal up to here" with 546 rows missing."""
    record = TableRecord("c1", TableState.RUNNING, 1, pos(800))
    rereading = TableEntry("db.t", TableTask("c1"), 1, replace(record, reread_from=pos(800)))
    pending = TableEntry("db.t", TableTask("c1"), 1, replace(record, pending_until=pos(900)))
    settled = entry(700)
    assert unsettled(rereading) and unsettled(pending) and not unsettled(settled)
    assert complete_checkpoint(pos(700), unsettled=True) is None
    assert complete_checkpoint(pos(700), unsettled=False) == pos(700)
