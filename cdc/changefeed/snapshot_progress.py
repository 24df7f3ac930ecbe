"""Snapshot chunks and their high watermarks in etcd: the resume point of every snapshot.

The processors write them; the admin API reads them (``table_progress``), which
is why this lives with the other per-changefeed values rather than in ``processor``.

    plan(table, chunks)   create-only, one key per chunk: state pending
        │                 (a second plan of the same table returns the first: resume)
        ▼
    run chunk on Spark ─► rows durably in the sink
        │
        ▼
    mark_done(chunk, high watermark, rows)   CAS pending -> done; only now does it count
        │
        ▼
    load(table) after a crash: done chunks are skipped, the rest run again
    reopen(table, ids) a DDL of the table came before their high watermarks: done ->
                      pending, to be read again with the new schema

Keys: `/cdc/<cluster>/snapshot/<changefeed>/<schema.table>/<n>` (cdc.store.keys).
Value: {"v": 1, "chunk": SnapshotChunk.to_dict(), "state": "pending"|"done",
"high_watermark": Position.to_dict()|null, "rows": int, "planned_at": s, "finished_at": s|null}.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.records import ChunkRecord, ChunkState
from cdc.store import Absent, EtcdStore, Put
from cdc.store.keys import SnapshotChunkKey

_BATCH = 64


def _tiles(records: Sequence[ChunkRecord]) -> bool:
    """Whether the chunks 0..n-1 cover the key space without a gap."""
    chunks = [r.chunk for r in records]
    if [c.n for c in chunks] != list(range(len(chunks))):
        return False
    if chunks[0].lower is not None or chunks[-1].upper is not None:
        return False
    return all(a.upper == b.lower for a, b in zip(chunks, chunks[1:], strict=False))


@dataclass(frozen=True)
class TableProgress:
    """What `cdcctl changefeed query` shows per table."""

    table: TableName
    chunks_total: int
    chunks_done: int
    rows: int
    rows_per_second: float | None
    lowest_high_watermark: Position | None
    highest_high_watermark: Position | None

    @property
    def finished(self) -> bool:
        return self.chunks_total > 0 and self.chunks_done == self.chunks_total


class ChunkStateError(RuntimeError):
    """A chunk key is missing or was changed under us (two processors ran the same chunk)."""


class SnapshotProgress:
    """The chunk records of one changefeed."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.changefeed_id = changefeed_id

    def _key(self, table: TableName, n: int) -> SnapshotChunkKey:
        return self.store.keys.snapshot_chunk(self.changefeed_id, str(table), n)

    def plan(self, table: TableName, chunks: Sequence[SnapshotChunk]) -> list[ChunkRecord]:
        """Records the chunks of `table` unless a complete plan exists; the plan in force.

        etcd caps a transaction at 128 operations, so a plan is written in
        batches; a crash between batches leaves a plan with a gap, which
        `load` can tell (the chunks no longer tile the key space) and which is
        replaced here, as none of its chunks can have run.
        """
        existing = self.load(table)
        if existing and _tiles(existing):
            return existing
        if existing:
            if any(r.done for r in existing):
                raise ChunkStateError(
                    f"snapshot plan of {table} is incomplete but has finished chunks; "
                    "remove the changefeed's snapshot state and start again"
                )
            self.store.delete_prefix(self._prefix(table))
        now = time.time()
        records = [ChunkRecord(c, ChunkState.PENDING, None, 0, now, None) for c in chunks]
        for first in range(0, len(records), _BATCH):
            batch = records[first : first + _BATCH]
            keys = [str(self._key(table, r.chunk.n)) for r in batch]
            ops = [Put(k, r.to_dict()) for k, r in zip(keys, batch, strict=True)]
            if not self.store.txn([Absent(k) for k in keys], ops):
                return self.load(table)
        return records

    def replan(
        self, table: TableName, chunks: Sequence[SnapshotChunk], request: str
    ) -> list[ChunkRecord]:
        """The chunks of re-snapshot ``request`` of ``table``: its plan if one exists whole
        (a capture that took the table over resumes it), else ``chunks``, written in place
        of what the table's chunk records held (its own snapshot's, settled long ago, or
        an earlier request's).

        Only the capture holding the table writes a re-snapshot plan, so the delete and
        the create-only writes that follow meet no other writer.
        """
        existing = self.load(table)
        if existing and all(r.request == request for r in existing) and _tiles(existing):
            return existing
        if existing:
            self.store.delete_prefix(self._prefix(table))
        now = time.time()
        records = [
            ChunkRecord(c, ChunkState.PENDING, None, 0, now, None, request) for c in chunks
        ]
        for first in range(0, len(records), _BATCH):
            batch = records[first : first + _BATCH]
            keys = [str(self._key(table, r.chunk.n)) for r in batch]
            ops = [Put(k, r.to_dict()) for k, r in zip(keys, batch, strict=True)]
            if not self.store.txn([Absent(k) for k in keys], ops):
                raise ChunkStateError(
                    f"re-snapshot {request} of {table}: chunk records appeared while its plan "
                    "was written (another capture holds the table?); it is run again by the "
                    "table's holder"
                )
        return records

    def _prefix(self, table: TableName) -> str:
        return self.store.keys.prefix_of(SnapshotChunkKey, self.changefeed_id, str(table))

    def load(self, table: TableName) -> list[ChunkRecord]:
        items = self.store.get_prefix(self._prefix(table))
        records = [ChunkRecord.from_dict(item.json()) for item in items]
        return sorted(records, key=lambda r: r.chunk.n)

    def mark_done(self, chunk: SnapshotChunk, high_watermark: Position, rows: int) -> ChunkRecord:
        """pending -> done with its high watermark; idempotent for the same watermark."""
        key = self._key(chunk.table, chunk.n)
        result: dict[str, ChunkRecord] = {}

        def finish(old: dict[str, Any] | None) -> dict[str, Any]:
            if old is None:
                raise ChunkStateError(f"chunk {chunk.chunk_id} is not planned (key {key} missing)")
            record = ChunkRecord.from_dict(old)
            if record.done:
                result["record"] = record
                return old
            done = replace(
                record,
                state=ChunkState.DONE,
                high_watermark=high_watermark,
                rows=rows,
                finished_at=time.time(),
            )
            result["record"] = done
            return done.to_dict()

        self.store.update(key, finish)
        return result["record"]

    def reopen(self, table: TableName, chunk_ids: Sequence[str]) -> None:
        """done -> pending for ``chunk_ids`` of ``table``: they are read again."""
        wanted = set(chunk_ids)
        for record in self.load(table):
            if record.chunk.chunk_id not in wanted or not record.done:
                continue

            def reset(old: dict[str, Any] | None) -> dict[str, Any] | None:
                if old is None:
                    return None
                current = ChunkRecord.from_dict(old)
                return replace(
                    current, state=ChunkState.PENDING, high_watermark=None, rows=0, finished_at=None
                ).to_dict()

            self.store.update(self._key(table, record.chunk.n), reset)

    def table_progress(self, table: TableName) -> TableProgress:
        records = self.load(table)
        done = [r for r in records if r.done]
        rows = sum(r.rows for r in done)
        rate = None
        if done:
            started = min(r.planned_at for r in records)
            ended = max(r.finished_at or started for r in done)
            rate = rows / (ended - started) if ended > started else None
        marks = [r.high_watermark for r in done if r.high_watermark is not None]
        return TableProgress(
            table,
            len(records),
            len(done),
            rows,
            rate,
            min(marks) if marks else None,
            max(marks) if marks else None,
        )
