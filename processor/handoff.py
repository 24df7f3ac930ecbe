"""The snapshot-to-binlog hand-off of one table (DESIGN.md, "Lock-free snapshot", step 5).

    binlog read starts at   min(high watermark of the table's chunks)
    a change at position p to a row whose chunk-key value falls in chunk c:
        p <= hw(c)  ──► already in the chunk's snapshot rows: dropped
        p >  hw(c)  ──► delivered
    once p > max(high watermark): every change is delivered, no lookup at all

An UPDATE that moves a row from chunk a to chunk b is two halves: the delete
of the old key (judged against a) and the upsert of the new one (judged
against b); a half that is already in the snapshot is dropped, the other is
delivered as a DELETE or a CREATE of its own.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.snapshot.chunk import Compare
from cdc.snapshot.keyorder import sort_key
from processor.snapshot_progress import ChunkRecord


class HandoffError(RuntimeError):
    """The hand-off cannot start: a chunk is not done, so its rows are not in the sink."""


class HandoffGate:
    """Decides, per binlog change of one table, whether the snapshot already holds it.

    `key_columns` identify a row (the table's primary key, or the unique key
    the snapshot used); `compare` orders chunk-key values as the server does
    and is needed for text keys (`cdc.snapshot.keyorder.ServerTextOrder`).
    """

    def __init__(
        self,
        records: Sequence[ChunkRecord],
        key_columns: Sequence[str],
        compare: Compare | None = None,
    ) -> None:
        if not records:
            raise HandoffError("binlog hand-off needs the table's snapshot plan; it has none")
        pending = [r.chunk.chunk_id for r in records if not r.done or r.high_watermark is None]
        if pending:
            raise HandoffError(
                f"binlog hand-off needs every chunk done; still pending: {', '.join(pending[:5])}"
            )
        self._chunks = [r.chunk for r in records]
        self._marks = [r.high_watermark for r in records if r.high_watermark is not None]
        self._compare = compare
        self._key_columns = tuple(key_columns)
        self.key_column = self._chunks[0].key_column
        self.start: Position = min(self._marks)
        self.end: Position = max(self._marks)
        self._upper_keys = (
            None if compare is not None else [sort_key(c.upper) for c in self._chunks[:-1]]
        )

    def _chunk_of(self, value: object) -> int:
        if value is None:
            return 0
        if self._upper_keys is not None:
            # The chunks tile the key space in order; an upper bound is exclusive.
            return bisect.bisect_right(self._upper_keys, sort_key(value))
        for i, chunk in enumerate(self._chunks):
            if chunk.contains(value, self._compare):
                return i
        raise HandoffError(f"no chunk of the plan holds key value {value!r}")

    def _after_snapshot(self, image: Mapping[str, Any] | None, position: Position) -> bool:
        if image is None:
            return False
        mark = self._marks[self._chunk_of(image.get(self.key_column))]
        return position.key() > mark.key()

    def admit(self, change: RowChange) -> Iterator[RowChange]:
        """The part of `change` to deliver: the change, one half of it, or nothing."""
        position = change.position
        if position.key() > self.end.key():
            yield change
            return
        if change.op is not Op.UPDATE:
            if self._after_snapshot(change.row, position):
                yield change
            return
        old = self._after_snapshot(change.before, position)
        new = self._after_snapshot(change.after, position)
        if old and new:
            yield change
        elif old and change.before is not None:
            key = tuple(change.before[c] for c in self._key_columns)
            yield replace(change, op=Op.DELETE, after=None, key=key)
        elif new:
            yield replace(change, op=Op.CREATE, before=None)
