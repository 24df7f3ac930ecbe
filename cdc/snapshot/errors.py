"""Errors of the snapshot: each message names the table or chunk and what to do."""

from __future__ import annotations

__all__ = ["ChunkSchemaChanged", "SnapshotError", "TableGone"]


class SnapshotError(RuntimeError):
    """A table cannot be split or a chunk cannot be read as things are; the message says why."""


class ChunkSchemaChanged(SnapshotError):
    """A DDL on the chunk's table ran between its watermarks.

    The rows read and the binlog images no longer share one shape; the chunk
    must be read again once the schema history has applied the DDL.
    """


class TableGone(SnapshotError):
    """The table is not on the source under its name any more (renamed or dropped after
    its snapshot was anchored): its binlog holds the DDL that took it."""
