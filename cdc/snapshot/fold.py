"""Folding binlog changes into a chunk's rows by key (DBLog's watermark reconciliation).

The SELECT saw the chunk at some moment between the low and the high
watermark. Replaying every change of (low, high] on top of it, in binlog
order, gives the chunk as it was at the high watermark, because each change
sets a row's whole state by key:

    CREATE  after in chunk          -> rows[key(after)] = after
    UPDATE  key(before) leaves      -> rows.pop(key(before))
            after in chunk          -> rows[key(after)] = after   (key changes too)
    DELETE                          -> rows.pop(key(before))

A change the SELECT already saw is harmless to replay (it writes the same
state again); one it missed is applied. Rows entering or leaving the range
(a key or chunk-key update) are handled by the two halves of UPDATE. Row
identity is the table's key (primary key, else the unique NOT NULL key), so
a keyless table cannot be folded (see ``reader``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cdc.model.events import Op, RowChange
from cdc.model.schema import TableSchema
from cdc.snapshot.chunk import Compare, SnapshotChunk

__all__ = ["ChunkFold", "chunk_values", "touches"]


def chunk_values(chunk: SnapshotChunk, changes: Iterable[RowChange]) -> list[Any]:
    """The chunk-key values the changes' images hold (what membership tests will ask)."""
    column = chunk.key_column
    return [
        image[column]
        for change in changes
        for image in (change.before, change.after)
        if image is not None
    ]


def touches(chunk: SnapshotChunk, change: RowChange, compare: Compare | None = None) -> bool:
    """Whether the change's before or after image lies in the chunk."""
    return any(
        image is not None and chunk.contains(image[chunk.key_column], compare)
        for image in (change.before, change.after)
    )


class ChunkFold:
    """A chunk's rows by key: the SELECT's rows, then the binlog changes folded in.

    Holds the whole chunk in memory (one dict entry per row), so memory is
    bounded by the chunk's size: about ``chunk_size`` rows, more only when
    one chunk-key value has more rows than that.
    """

    def __init__(
        self, schema: TableSchema, chunk: SnapshotChunk, compare: Compare | None = None
    ) -> None:
        if not schema.key_columns:
            raise ValueError(
                f"table {schema.name} has no key: its rows have no identity to fold by"
            )
        self.chunk = chunk
        self.key_columns = schema.key_columns
        self.compare = compare
        self.rows: dict[tuple[Any, ...], Mapping[str, Any]] = {}
        self.applied = 0

    def key_of(self, row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.key_columns)

    def add(self, row: Mapping[str, Any]) -> None:
        """A row the SELECT returned."""
        self.rows[self.key_of(row)] = row

    def _inside(self, row: Mapping[str, Any]) -> bool:
        return self.chunk.contains(row[self.chunk.key_column], self.compare)

    def apply(self, change: RowChange) -> bool:
        """Folds one binlog change in; True when it changed the chunk's rows."""
        changed = False
        if change.op is Op.CREATE:
            if self._inside(change.row_after):
                self.rows[self.key_of(change.row_after)] = change.row_after
                changed = True
        elif change.op is Op.UPDATE:
            changed = self.rows.pop(self.key_of(change.row_before), None) is not None
            if self._inside(change.row_after):
                self.rows[self.key_of(change.row_after)] = change.row_after
                changed = True
        elif change.op is Op.DELETE:
            changed = self.rows.pop(self.key_of(change.row_before), None) is not None
        else:
            raise ValueError(f"cannot fold a {change.op.name} change into a chunk: {change}")
        if changed:
            self.applied += 1
        return changed
