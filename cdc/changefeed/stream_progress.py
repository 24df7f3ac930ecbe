"""How far each binlog reader of a capture has brought the tables it holds.

    stream-progress/<cf>/<capture>/<reader>
        {"v": 1, "position": P, "records_through": W, "updated_at": unix time}

A capture reads each changefeed's binlog once and holds many tables on one
reader (docs/data-path.md); every table it holds is durable in the sink up
to the same boundary. So at each checkpoint interval the reader flushes its
sink and writes this one key, not one record per table: what etcd and the
owner handle follows the number of readers, not of tables (issue #15).

A table's record names the reader holding it (``TableRecord.reader``). Its
checkpoint is then ``max(record.checkpoint, P)``, provided the record
answers the table's current task (``apply_progress``). The record itself is
written again only when something else changes: the table joins or leaves
a reader, follows a DDL (a new schema), its task's revision moves, its
snapshot facts change, or, slowly, to keep a restart close by.

Why ``records_through``: a table that leaves a reader has its record
rewritten (no reader) before the reader writes progress again; a reader of
the keys that saw the new progress but not yet that record (the owner reads
records and progress keys from two watched mirrors) would carry the table
along to a position it never reached. W is the revision of the reader's
last record write; a progress is usable only where the records read
include every write up to W (``KeyReader.applied_through``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cdc.changefeed.points import position_from, position_to
from cdc.changefeed.tables import TableRecord, TableState, TableTask, TaskState
from cdc.model.position import Position
from cdc.store import Versioned

__all__ = ["FORMAT_VERSION", "ProgressBoard", "StreamProgress", "apply_progress"]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class StreamProgress:
    """One reader's boundary: every table it holds is durable in the sink up to
    ``position``; ``records_through`` is the revision of its last record write."""

    position: Position
    records_through: int = 0
    updated_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": FORMAT_VERSION,
            "position": position_to(self.position),
            "records_through": self.records_through,
            "updated_at": self.updated_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StreamProgress:
        version = data.get("v")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"unsupported stream progress format version {version!r}; this build reads "
                f"version {FORMAT_VERSION}"
            )
        position = position_from(data.get("position"))
        if position is None:
            raise ValueError("a stream progress without a position")
        return cls(
            position, int(data.get("records_through", 0)), float(data.get("updated_at", 0.0))
        )

    @classmethod
    def decode(cls, item: Versioned) -> StreamProgress:
        return cls.from_dict(item.json())


def apply_progress(
    task: TableTask | None,
    task_revision: int,
    record: TableRecord | None,
    progress: Mapping[tuple[str, str], StreamProgress],
    records_through: int | None,
) -> StreamProgress | None:
    """The progress of the reader holding a table, which carries it beyond its record;
    None when none applies.

    It applies when the record is a running report on the current task (same
    capture, same task revision: a task the owner moved or stopped keeps its
    record's checkpoint until the capture answers), names a reader, and that
    reader's progress is known; ``records_through`` is the revision up to which
    the records read are complete (None: read after the progress, so complete).
    """
    if (
        record is None
        or record.reader is None
        or record.state is not TableState.RUNNING
        or task is None
        or task.state is not TaskState.RUN
        or task.capture_id != record.capture_id
        or record.task_revision != task_revision
    ):
        return None
    found = progress.get((record.capture_id, record.reader))
    if found is None:
        return None
    if records_through is not None and records_through < found.records_through:
        return None
    return found


@dataclass
class ProgressBoard:
    """A changefeed's progress keys as last read, and how complete the records read with
    them were (``apply_progress``'s ``records_through``).

    Shared by the table entries of a ``TableReader``, which updates it at each read: a
    table's entry then stays the same object while its task and record do, and the
    owner's cycle rebuilds nothing for the tables that did not change (issue #15)."""

    readers: Mapping[tuple[str, str], StreamProgress] = field(default_factory=dict)
    records_through: int | None = None

    def carried(
        self, task: TableTask | None, task_revision: int, record: TableRecord | None
    ) -> StreamProgress | None:
        if not self.readers:
            return None
        return apply_progress(task, task_revision, record, self.readers, self.records_through)
