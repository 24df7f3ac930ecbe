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
answers the table's current task (``TableEntry.carry_group``) and the
records read are complete enough (``ProgressBoard.progress_of``). The record itself is
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
from cdc.model.position import Position
from cdc.store import Versioned

__all__ = ["FORMAT_VERSION", "ProgressBoard", "StreamProgress"]

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


@dataclass
class ProgressBoard:
    """A changefeed's progress keys as last read, and how complete the records read with
    them were (None: read after the progress keys, so complete).

    Shared by the table entries of a ``TableReader``, which updates it at each read: a
    table's entry then stays the same object while its task and record do, and the
    owner's cycle rebuilds nothing for the tables that did not change (issue #15)."""

    readers: Mapping[tuple[str, str], StreamProgress] = field(default_factory=dict)
    records_through: int | None = None

    def progress_of(self, group: tuple[str, str]) -> StreamProgress | None:
        """The progress of reader ``(capture, reader)``, where the records read include its
        last record write (see the module docstring: ``records_through``)."""
        found = self.readers.get(group)
        if found is None:
            return None
        if self.records_through is not None and self.records_through < found.records_through:
            return None
        return found
