"""What the owner does with one changefeed in one cycle, decided from what it read.

Pure functions over a ``CycleView`` (the changefeed's state and its tables as
the owner's mirrors hold them, and what the DDL puller says): no etcd, no
clock, no source, so every transition is unit-tested (tests/unit/owner). The
cycle (``owner/changefeed.py``) reads the view, asks ``decide``, and carries
out the step with fenced writes::

    state     condition (first that holds)                       step
    ───────── ────────────────────────────────────────────────── ──────────────
    normal    no start point yet                                 INITIALIZE
    normal    a table runs on a live capture and reports error   TABLE_ERROR
    normal    the DDL puller failed                              PULLER_ERROR
    normal    (otherwise)                                        ADVANCE
    error     its retry time has come                            RETRY
    error     before its retry time                              HOLD
    stopped, failed, finished                                    HOLD

ADVANCE persists the checkpoint (``checkpoint_to_save`` of the tables' lowest,
which the table reader keeps per reader group), takes the barrier
step (``barrier_step``), finishes a snapshot-only changefeed whose tables
all finished (``snapshot_done``), and schedules (``owner/scheduler.py``).
HOLD keeps the tables stopped. A table's error on a capture that is gone is
not the changefeed's error: the scheduler gives the table to a live capture,
which runs it from its record (retrying instead would fail again at once,
for ever, since the task still names the dead capture).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from cdc.changefeed import Barrier, ChangefeedState, TableEntry, TableState
from cdc.model.position import Position

__all__ = [
    "BarrierStep",
    "CycleView",
    "Decision",
    "Step",
    "barrier_step",
    "capped_checkpoint",
    "checkpoint_to_save",
    "complete_checkpoint",
    "decide",
    "snapshot_done",
    "unsettled",
]


class Step(enum.Enum):
    """The owner's step for a changefeed this cycle (see the module docstring)."""

    INITIALIZE = "initialize"
    TABLE_ERROR = "table error"
    PULLER_ERROR = "ddl puller error"
    ADVANCE = "advance"
    RETRY = "retry"
    HOLD = "hold"


@dataclass(frozen=True)
class CycleView:
    """What one cycle decides from. ``failed``: the tables whose pipeline reports an
    error while their task says run (``TableReader.failed``)."""

    state: ChangefeedState
    started: bool
    retry_at: float | None
    now: float
    failed: Mapping[str, TableEntry]
    live_captures: frozenset[str]
    puller_failed: bool = False


@dataclass(frozen=True)
class Decision:
    step: Step
    table: str | None = None
    """TABLE_ERROR: the table whose error the changefeed takes."""


def decide(view: CycleView) -> Decision:
    """The step for this cycle (see the module docstring)."""
    if view.state is ChangefeedState.NORMAL:
        if not view.started:
            return Decision(Step.INITIALIZE)
        for table, entry in sorted(view.failed.items()):
            task = entry.task
            if entry.failed and task is not None and task.capture_id in view.live_captures:
                return Decision(Step.TABLE_ERROR, table)
        if view.puller_failed:
            return Decision(Step.PULLER_ERROR)
        return Decision(Step.ADVANCE)
    retry_at = view.retry_at
    if view.state is ChangefeedState.ERROR and retry_at is not None and view.now >= retry_at:
        return Decision(Step.RETRY)
    return Decision(Step.HOLD)


# --- checkpoints ----------------------------------------------------------------------------


def capped_checkpoint(
    checkpoint: Position | None, barrier: Barrier | None, *, has_tasks: bool
) -> Position | None:
    """The changefeed checkpoint: never past the barrier's limit.

    Table checkpoints can lie beyond a DDL not applied yet (a snapshot anchored
    after it, a table gone before its snapshot began); a changefeed checkpoint
    past it would let a new owner's DDL puller, which starts there, skip the
    DDL for good. The barrier's limit is the next DDL's, or the position the
    DDL puller has read up to: unknown (None) until it has read. With no
    table (``has_tasks`` false), everything up to the barrier is delivered.
    """
    if barrier is None:
        return None
    if checkpoint is None:
        return None if has_tasks else barrier.limit
    return min(checkpoint, barrier.limit, key=Position.key)


def unsettled(entry: TableEntry) -> bool:
    """Whether the table's snapshot has chunks to read again after a DDL."""
    record = entry.record
    return (
        entry.task is not None
        and record is not None
        and (record.pending_until is not None or record.reread_from is not None)
    )


def complete_checkpoint(checkpoint: Position | None, *, unsettled: bool) -> Position | None:
    """The checkpoint to persist: None (the saved one stays) while a table's snapshot has
    chunks to read again after a DDL (``unsettled``).

    Such a table's binlog goes on (its checkpoint moves, and the barrier with
    it, so that it can reach the DDL its chunks wait for), but the rows of
    those chunks are not downstream: a persisted checkpoint past them would
    tell a user waiting for it that source and downstream are equal when they
    are not (found by the fuzz test, seed 2055).
    """
    return None if unsettled else checkpoint


def checkpoint_to_save(
    lowest: Position | None,
    barrier: Barrier | None,
    *,
    has_tasks: bool,
    unsettled: bool,
    tracked: bool,
) -> tuple[Position | None, Position | None]:
    """``(checkpoint, to persist)``: the lowest table checkpoint (``TableReader.
    lowest_checkpoint``) as the barrier allows it (where the barrier step compares), and
    what may be persisted as the changefeed's.

    ``tracked``: the changefeed follows DDL (not snapshot-only); without a DDL
    puller nothing caps the tables' checkpoint."""
    checkpoint = lowest
    if tracked:
        checkpoint = capped_checkpoint(checkpoint, barrier, has_tasks=has_tasks)
    return checkpoint, complete_checkpoint(checkpoint, unsettled=unsettled)


# --- the barrier ----------------------------------------------------------------------------


class BarrierStep(enum.Enum):
    """What the changefeed's checkpoint means for the next DDL (or target) of the barrier."""

    WAIT = "wait"
    """Not every table has reached it (or there is nothing pending)."""
    APPLY_DDL = "apply ddl"
    """Every change before the DDL is downstream: apply it, then move the barrier on."""
    FINISH = "finish"
    """The target position: every change up to it is downstream."""


def barrier_step(
    checkpoint: Position | None,
    limit: Position | None,
    *,
    is_ddl: bool,
    recorded: Position | None,
) -> BarrierStep:
    """The step for a pending barrier entry at ``limit`` (None: nothing pending); a DDL
    entry is applied once the checkpoint reached its limit, the target finishes there.

    ``recorded``: the lowest checkpoint of the tables' records (their readers' progress
    not counted), which must have reached the limit too: a table restarts from its
    record, and one restarting before a DDL already applied downstream would write
    rows of the old shape after it (processor/shared_stream.py writes every record at
    a DDL's limit once it stands there)."""
    if checkpoint is None or limit is None or checkpoint.key() < limit.key():
        return BarrierStep.WAIT
    if recorded is None or recorded.key() < limit.key():
        return BarrierStep.WAIT
    return BarrierStep.APPLY_DDL if is_ddl else BarrierStep.FINISH


def snapshot_done(tables: Mapping[str, TableEntry]) -> bool:
    """Whether every table of a snapshot-only changefeed reported its snapshot finished."""
    tasks = [e for e in tables.values() if e.task is not None]
    return all(e.record is not None and e.record.state is TableState.FINISHED for e in tasks)
