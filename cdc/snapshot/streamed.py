"""One chunk read straight into its sink as ``LOAD DATA`` lines: the lean copy path.

The same watermarks as ``reader.read_chunk`` (DBLog), with the rows never held::

    step 1/4  low watermark      (the consistent snapshot's binlog position)
              shape check        before any row is written (and again after the SELECT)
              target.begin()     the chunk's key range emptied downstream
    step 2/4  SELECT lines       textlines.read_chunk_text: one value (bare lines or
                                 escaped ones), or blocks of escaped lines
                                 ──► target.block
                                 (one LOAD DATA ... REPLACE each), then the shape check
    step 3/4  high watermark
    step 4/4  high > low ?       the window's binlog changes that touch the chunk
                                 ──► target.fold(changes): applied downstream in
                                 binlog order, by key, after the rows

Why applying the changes after loading equals folding them into the rows first:
each change sets one key's whole state (``fold.py``), so the last change of a key
decides it either way, and a key no change touched keeps the SELECT's row. Deletes
are confined to the chunk's range by key: the chunk key is the first key column
(``textlines.not_lean``), so a key's row lies in the range exactly when the change's
image does. Rows reach the downstream before the high watermark is known; the chunk
counts as done only once it is recorded, and a chunk read again empties its range
first, so a read that fails (a DDL met, a lost connection) leaves nothing that
counts.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.logs import get_logger
from cdc.model.events import RowChange
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.snapshot.chunk import Compare, SnapshotChunk
from cdc.snapshot.fold import touches
from cdc.snapshot.reader import (
    DEFINITION_ATTEMPTS,
    ChunkHooks,
    DefinitionChanged,
    binlog_changes,
    check_arguments,
    check_shape,
    compare_for,
    low_watermark,
    raise_schema_change,
)
from cdc.snapshot.textlines import read_chunk_text
from cdc.source.flavor import ServerInfo, current_position
from cdc.uri.mysql import MySQLURI

__all__ = ["LineTarget", "StreamedChunk", "read_chunk_lines"]

log = get_logger(__name__)


class LineTarget(abc.ABC):
    """Where a chunk's lines go (a database sink's loader, ``cdc.sink.mysql.chunkload``)."""

    @abc.abstractmethod
    def begin(self) -> None:
        """Before the first block: empty the chunk's key range (if the sink clears ranges)."""

    @abc.abstractmethod
    def block(self, data: bytes, rows: int, bare: bool) -> None:
        """Load ``rows`` lines (``data``, each line ending with its mark) and commit; ``bare``:
        the lines are bare (``textlines.BARE_FORMAT``), else escaped, tab-separated."""

    @abc.abstractmethod
    def fold(self, changes: Sequence[RowChange], compare: Compare | None) -> None:
        """Apply the binlog changes of the window that touch the chunk, in order, by key
        (``compare``: the chunk key's server order for text keys)."""


@dataclass(frozen=True)
class StreamedChunk:
    """What a chunk read as lines reports: its watermarks and about how many rows it holds
    (the SELECT's, plus creates less deletes of the window: an estimate for progress)."""

    chunk: SnapshotChunk
    high_watermark: Position
    low_watermark: Position
    row_count: int
    folded: int = 0


def read_chunk_lines(
    source: MySQLURI,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    target: LineTarget,
    *,
    conn: Any,
    hooks: ChunkHooks | None = None,
) -> StreamedChunk:
    """Reads ``chunk`` into ``target`` as of its high watermark (see the module doc).

    ``conn``: an open source connection made with ``snapshot_connect_kwargs()``, left
    open (drop it if this raises). Raises as ``read_chunk`` does.
    """
    check_arguments(schema, chunk, 1)
    hooks = hooks or ChunkHooks()
    attempt = 1
    while True:
        try:
            low, rows, high = _between_watermarks(conn, server, schema, chunk, target, hooks)
            break
        except DefinitionChanged:
            conn.rollback()
            if attempt >= DEFINITION_ATTEMPTS:
                raise
            attempt += 1
            log.info("chunk %s: its table was rebuilt meanwhile; reading it again", chunk.chunk_id)
    if high.key() <= low.key():
        log.info("chunk %s step 4/4 binlog did not move: rows as selected", chunk.chunk_id)
        return StreamedChunk(chunk, high, low, rows)
    changes = binlog_changes(source, server, schema, chunk, low, high)
    compare = compare_for(conn, schema, chunk, changes)
    touching = [change for change in changes if touches(chunk, change, compare)]
    if touching:
        target.fold(touching, compare)
    net = sum(_net(chunk, change, compare) for change in touching)
    log.info(
        "chunk %s step 4/4 applied %d of %d binlog change(s) after its rows",
        chunk.chunk_id,
        len(touching),
        len(changes),
    )
    return StreamedChunk(chunk, high, low, max(rows + net, 0), len(touching))


def _between_watermarks(
    conn: Any,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    target: LineTarget,
    hooks: ChunkHooks,
) -> tuple[Position, int, Position]:
    low = low_watermark(conn, server)
    log.info("chunk %s step 1/4 low watermark %s (lines)", chunk.chunk_id, low)
    if hooks.after_low_watermark is not None:
        hooks.after_low_watermark(chunk, low)
    # Rows reach the sink as they are read: a table already of another shape (a DDL
    # that finished before the snapshot opened) must be told before the first row. A DDL
    # after this check fails the SELECT (1412: changed after the snapshot opened) or
    # waits for the transaction's end (its metadata lock); the check after the SELECT
    # stays, as on the values path.
    check_shape(conn, schema, chunk)
    target.begin()
    try:
        rows = read_chunk_text(conn, schema, chunk, target.block)
    except pymysql.err.MySQLError as exc:
        raise_schema_change(exc, schema, chunk)
        raise
    check_shape(conn, schema, chunk)
    conn.commit()
    log.info("chunk %s step 2/4 loaded %d rows as lines", chunk.chunk_id, rows)
    if hooks.after_select is not None:
        hooks.after_select(chunk, rows)
    high = current_position(conn, server)
    log.info("chunk %s step 3/4 high watermark %s", chunk.chunk_id, high)
    if hooks.after_high_watermark is not None:
        hooks.after_high_watermark(chunk, high)
    return low, rows, high


def _net(chunk: SnapshotChunk, change: RowChange, compare: Compare | None) -> int:
    """+1 for a row entering the chunk, -1 for one leaving it, else 0."""
    before = change.before is not None and chunk.contains(change.before[chunk.key_column], compare)
    after = change.after is not None and chunk.contains(change.after[chunk.key_column], compare)
    return int(after) - int(before)
