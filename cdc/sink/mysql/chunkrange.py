"""The statement that empties a snapshot chunk's key range downstream before its rows go in.

A chunk can be read and written more than once: a task retried, a restart
before its high watermark was recorded, a chunk read again after a DDL of its
table (docs/ddl-during-snapshot.md). Its rows replace the range as it was at
the later read, and REPLACE alone cannot remove a row that the earlier read
had and the later one does not (deleted in between: the binlog's DELETE
lies before the new high watermark, so the hand-off drops it). Emptying the
range first makes every load of a chunk leave exactly the chunk's rows.
"""

from __future__ import annotations

from cdc.model.schema import TableSchema
from cdc.sink.mysql.statements import Statement, literal
from cdc.snapshot.chunk import SnapshotChunk

__all__ = ["clear_statement"]


def clear_statement(schema: TableSchema, chunk: SnapshotChunk) -> Statement:
    """``DELETE FROM t WHERE <chunk's range>``, values rendered as literals."""
    where, params = chunk.where_clause()
    condition = where % tuple(literal(p) for p in params)
    return Statement(
        sql=f"DELETE FROM {schema.name.quoted()} WHERE {condition}",
        description=f"DELETE of snapshot chunk {chunk.chunk_id}'s key range in {schema.name}",
    )
