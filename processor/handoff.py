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

A table with a unique key besides its row key (``replay_all``) gets every change of
a done chunk's rows, whatever its position: the sink writes such a table by
``REPLACE``, which also removes any row clashing on the other key, so an older change
delivered for one row (after its own chunk's high watermark) can remove a row a later
chunk read, whose own changes up to that chunk's high watermark would be dropped as
"in the snapshot": nothing would bring it back. Delivered in binlog order instead,
those changes restore it, as the sink's replay after a crash does (``statements.py``):
every chunk is loaded before the binlog starts, and writes are by full row images.
Found by the randomized test (a variety soak, seed 617): row 1778 holding ``u = 1426``
was updated, then moved to 3892; the tail chunk read 3892 after the move, the update
of 1778 (past its chunk's mark) was delivered and its REPLACE removed 3892, and the
move's insert of 3892 lay before the tail chunk's mark.

A chunk still pending (its read met a DDL of the table: see
docs/ddl-during-snapshot.md) holds every change back: it is read again once
the binlog stands at that DDL, and that read contains them all. A DDL of the
table at position d invalidates every chunk whose high watermark is at or
after d: its rows were read after the DDL, but the downstream gets the DDL
only now (``invalidated_by``).
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
from cdc.snapshot.records import ChunkRecord


class HandoffError(RuntimeError):
    """The hand-off cannot start: a chunk is not done, so its rows are not in the sink."""


class HandoffGate:
    """Decides, per binlog change of one table, whether the snapshot already holds it.

    `key_columns` identify a row (the table's primary key, or the unique key
    the snapshot used); `compare` orders chunk-key values as the server does
    and is needed for text keys (`cdc.snapshot.keyorder.ServerTextOrder`).
    `floor`: the snapshot's anchor position (its schema's), where the binlog
    starts when it is lower than every high watermark, so that no DDL of the
    table after the anchor is missed. `changed_by`: for a plan with pending
    chunks, a position the DDL that left them pending lies before; the
    binlog must meet a DDL of the table by then (``check_pending``).
    `replay_all`: deliver every change of a done chunk's rows (a table with a unique
    key besides its row key; see the module docstring).
    """

    def __init__(
        self,
        records: Sequence[ChunkRecord],
        key_columns: Sequence[str],
        compare: Compare | None = None,
        *,
        floor: Position | None = None,
        changed_by: Position | None = None,
        replay_all: bool = False,
    ) -> None:
        if not records:
            raise HandoffError("binlog hand-off needs the table's snapshot plan; it has none")
        self._chunks = [r.chunk for r in records]
        self._marks: list[Position | None] = [r.high_watermark if r.done else None for r in records]
        self.pending = tuple(
            r.chunk.chunk_id for r, m in zip(records, self._marks, strict=True) if m is None
        )
        if self.pending and changed_by is None:
            raise HandoffError(
                "binlog hand-off needs every chunk done; still pending: "
                f"{', '.join(self.pending[:5])}"
            )
        self.changed_by = changed_by if self.pending else None
        self._compare = compare
        self._replay_all = replay_all
        self._key_columns = tuple(key_columns)
        self.key_column = self._chunks[0].key_column
        done = [m for m in self._marks if m is not None]
        lowest = [*done, *([floor] if floor is not None else [])]
        if not lowest:
            raise HandoffError("binlog hand-off needs a done chunk or the snapshot's anchor")
        self.start: Position = min(lowest, key=Position.key)
        self.end: Position | None = None if self.pending else max(done, key=Position.key)
        self._upper_keys = (
            None if compare is not None else [sort_key(c.upper) for c in self._chunks[:-1]]
        )

    @property
    def asks_server(self) -> bool:
        """Whether ``admit`` asks the source server (the order of a text chunk key)."""
        return self._compare is not None

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
        return mark is not None and (self._replay_all or position.key() > mark.key())

    def invalidated_by(self, ddl_position: Position) -> list[str]:
        """The chunks to read again after a DDL of the table at ``ddl_position``: pending
        ones and those whose high watermark is at or after it."""
        key = ddl_position.key()
        return [
            c.chunk_id
            for c, m in zip(self._chunks, self._marks, strict=True)
            if m is None or m.key() >= key
        ]

    def check_pending(self, position: Position) -> None:
        """Fails closed when the binlog passed ``changed_by`` with chunks still pending.

        Their reads met another schema, so a DDL of the table lies before
        ``changed_by``; a binlog that passes it without one (a DDL this
        product cannot see) would hold their changes back forever.
        """
        if self.changed_by is not None and position.key() > self.changed_by.key():
            raise HandoffError(
                f"snapshot chunks {', '.join(self.pending[:5])} met a schema change before "
                f"{self.changed_by}, but the binlog shows no DDL of the table up to there; "
                "their rows cannot be placed. Re-create the changefeed for this table"
            )

    def admit(self, change: RowChange) -> Iterator[RowChange]:
        """The part of `change` to deliver: the change, one half of it, or nothing."""
        position = change.position
        if self.end is not None and position.key() > self.end.key():
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
