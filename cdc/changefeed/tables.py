"""The two per-table values of the cluster: the owner's task and the processor's record.

``task/<cf>/<schema.table>`` (``TableTask``) is the owner's instruction, written
only by the owner, fenced: which capture runs the table and whether it should
run or stop. ``table-checkpoint/<cf>/<schema.table>`` (``TableRecord``) is the
processor's report, written by the capture named in the task, as a
transaction that requires the task key to be at the ``mod_revision`` the
processor last acted on, so a processor that lost the table cannot write it.

Moving a table from capture A to B (a balance, or a pause and resume)::

    owner      task {A, run}    ─►  task {A, stop, move_to B}  (rev R)
    A                               stops the pipeline, flushes the sink,
                                    record {A, stopped, task_revision R, checkpoint c}
    owner      sees the stopped record at R  ─►  task {B, run}
    B                               starts the pipeline from checkpoint c

A task whose capture's lease expired is given to another capture at once:
that capture is gone and runs nothing.

Removing a table (new table rules without it) is the first half of a move::

    owner      task {A, stop, removing}  (rev R)
    A                               stops the pipeline, flushes the sink,
                                    record {A, stopped, task_revision R}
    owner      sees the record at R (or A gone), and no share of the table's
               snapshot open on a live capture  ─►  task, record, chunks deleted

so nothing of the table is still on its way downstream once its keys are gone,
and the table can be added again at once (``owner/removals.py``).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cdc.changefeed.points import (
    StartPoint,
    point_from_dict,
    point_to_dict,
    position_from,
    position_to,
)
from cdc.model.position import Position
from cdc.model.schema import TableSchema

__all__ = ["TableRecord", "TableState", "TableTask", "TaskState"]


class TaskState(enum.Enum):
    """What the owner wants of a table pipeline: run ──► stop ──► run (on a capture)."""

    RUN = "run"
    STOP = "stop"


@dataclass(frozen=True)
class TableTask:
    """The owner's instruction for one table (see the module docstring).

    ``start`` and ``schema`` say where and with which table schema a pipeline
    without a record begins (a table created by DDL at ``start``, or a
    changefeed without snapshot); without them the pipeline snapshots the
    table first. ``move_to`` names the capture the table goes to once stopped.
    ``replace_downstream``: the downstream table of that name holds a partial
    snapshot under an older schema (a table renamed before its snapshot
    settled), so the snapshot drops it and creates it anew from the source.
    ``removing``: the table's rules no longer match it; its keys go once its
    pipeline has answered the stop (see the module docstring).
    """

    capture_id: str
    state: TaskState = TaskState.RUN
    move_to: str | None = None
    start: StartPoint | None = None
    schema: TableSchema | None = None
    replace_downstream: bool = False
    removing: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "capture_id": self.capture_id,
            "state": self.state.value,
            "move_to": self.move_to,
            "start": None if self.start is None else point_to_dict(self.start),
            "schema": None if self.schema is None else self.schema.to_dict(),
            "replace_downstream": self.replace_downstream,
            "removing": self.removing,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TableTask:
        start, schema = data.get("start"), data.get("schema")
        return cls(
            capture_id=str(data["capture_id"]),
            state=TaskState(data.get("state", TaskState.RUN.value)),
            move_to=data.get("move_to"),
            start=None if start is None else point_from_dict(start),
            schema=None if schema is None else TableSchema.from_dict(schema),
            replace_downstream=bool(data.get("replace_downstream", False)),
            removing=bool(data.get("removing", False)),
        )

    def run_on(self, capture_id: str) -> TableTask:
        """The same table, to run on ``capture_id``."""
        return replace(self, capture_id=capture_id, state=TaskState.RUN, move_to=None)

    def stop(self, move_to: str | None = None) -> TableTask:
        """The same table, to stop where it runs (and then go to ``move_to``)."""
        return replace(self, state=TaskState.STOP, move_to=move_to)

    def removal(self) -> TableTask:
        """The same table, to stop where it runs and then be removed."""
        return replace(self, state=TaskState.STOP, move_to=None, removing=True)


class TableState(enum.Enum):
    """What a processor reports about its table pipeline.

    running ──► stopped (asked to stop; its checkpoint is final)
       │   └──► finished (snapshot-only table done)
       └──────► error (the pipeline failed; the owner decides what next;
                       a stop is answered in this state, error kept)
    """

    RUNNING = "running"
    STOPPED = "stopped"
    ERROR = "error"
    FINISHED = "finished"

    @property
    def idle(self) -> bool:
        """Whether no pipeline runs for the table in this state."""
        return self is not TableState.RUNNING


@dataclass(frozen=True)
class TableRecord:
    """A processor's report on one table pipeline.

    ``checkpoint``: every change of the table up to here is durably in the
    sink (None while the snapshot has not finished). ``schema``: the table's
    schema at the checkpoint, so the next pipeline decodes the next rows with
    the right shape. ``task_revision``: the task's mod_revision this report
    answers.

    Snapshot facts (docs/ddl-during-snapshot.md): ``snapshot_at`` is the
    position whose schema the snapshot reads and the downstream table was
    prepared with, so a DDL of the table at or before it is already there;
    ``reread_from`` is set once the binlog passed a DDL of the table while
    chunks read at or after it (or never read) must be read again, before
    the binlog goes on; ``pending_until`` is set while some chunk has no
    valid read because a DDL of the table before that position met its read
    (a table renamed in that state is snapshotted again under its new name).

    ``reader``: the capture's binlog reader that holds the table (a
    ``stream-progress`` key of that capture, ``cdc/changefeed/stream_progress.py``).
    While the table stays there its checkpoint advances with the reader's
    progress key, not with this record, which is written again only when
    something else changes (docs/etcd-layout.md, "Checkpoints").
    """

    capture_id: str
    state: TableState
    task_revision: int
    checkpoint: Position | None = None
    schema: TableSchema | None = None
    error: str | None = None
    permanent: bool = False
    updated_at: float = field(default_factory=time.time)
    snapshot_at: Position | None = None
    reread_from: Position | None = None
    pending_until: Position | None = None
    reader: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": 1,
            "capture_id": self.capture_id,
            "state": self.state.value,
            "task_revision": self.task_revision,
            "checkpoint": position_to(self.checkpoint),
            "schema": None if self.schema is None else self.schema.to_dict(),
            "error": self.error,
            "permanent": self.permanent,
            "updated_at": self.updated_at,
            "snapshot_at": position_to(self.snapshot_at),
            "reread_from": position_to(self.reread_from),
            "pending_until": position_to(self.pending_until),
            "reader": self.reader,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], known: TableRecord | None = None) -> TableRecord:
        """Reads ``to_dict``'s output; fields it lacks take their defaults (a record
        of an older version, or one holding only a checkpoint). ``known``: an earlier
        record of the table, whose schema is taken as it is when ``data`` holds the same
        one (a processor reports the schema with every checkpoint; decoding it each
        time was most of what reading 10,000 records cost)."""
        schema = data.get("schema")
        decoded: TableSchema | None
        if schema is None:
            decoded = None
        elif known is not None and known.schema is not None and known.schema_data == schema:
            decoded = known.schema
        else:
            decoded = TableSchema.from_dict(schema)
        record = cls(
            capture_id=str(data.get("capture_id", "")),
            state=TableState(data.get("state", TableState.RUNNING.value)),
            task_revision=int(data.get("task_revision", 0)),
            checkpoint=position_from(data.get("checkpoint")),
            schema=decoded,
            error=data.get("error"),
            permanent=bool(data.get("permanent", False)),
            updated_at=float(data.get("updated_at", 0.0)),
            snapshot_at=position_from(data.get("snapshot_at")),
            reread_from=position_from(data.get("reread_from")),
            pending_until=position_from(data.get("pending_until")),
            reader=data.get("reader"),
        )
        object.__setattr__(record, "schema_data", schema)
        return record

    #: The schema as ``from_dict`` found it (compared, never changed), None otherwise.
    schema_data: Any = field(default=None, init=False, repr=False, compare=False)

    def answers(self, task_revision: int) -> bool:
        """Whether this is an idle report on the task as it is at ``task_revision``."""
        return self.state.idle and self.task_revision == task_revision
