"""The snapshot of one table, shared by the single-process runner and the table pipelines.

    downstream table created or checked                 (first run only)
    chunk plan in etcd (SnapshotProgress: a plan that exists is resumed)
    pending chunks on Spark, ``batch_chunks`` at a time; a chunk counts as done
    only after its rows are in the sink and its high watermark is in etcd
    all done ──► the table's hand-off gate (binlog from its lowest high watermark)

A stop between batches leaves the finished chunks recorded; the next run
(on any capture) runs only the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import ContextLogger
from cdc.metrics import snapshot_chunks_done
from cdc.model.schema import TableSchema
from cdc.snapshot.keyorder import ServerTextOrder
from cdc.snapshot.splitter import split_table
from cdc.typeconv import TEXT_TYPES
from processor.downstream_tables import prepare_downstream_table
from processor.handoff import HandoffGate
from processor.snapshot_progress import ChunkRecord, SnapshotProgress
from sparkjobs.snapshot import SinkWriter, run_chunks

__all__ = [
    "SnapshotChunkFailed",
    "SnapshotJob",
    "handoff_gate",
    "snapshot_table",
]


class SnapshotChunkFailed(RuntimeError):
    def __init__(self, chunk_id: str, error: str) -> None:
        super().__init__(f"snapshot chunk {chunk_id} failed: {error}")
        self.chunk_id = chunk_id


@dataclass
class SnapshotJob:
    """What snapshotting a table of a changefeed needs.

    ``spark`` gives the Spark session (called only when a chunk has to run);
    ``on_batch(chunk ids, rows)`` is called after each batch is recorded.
    """

    config: ChangefeedConfig
    progress: SnapshotProgress
    spark: Callable[[], Any]
    batch_chunks: int = 8
    on_batch: Callable[[list[str], int], None] | None = None


def snapshot_table(
    job: SnapshotJob, source: Any, schema: TableSchema, stop: threading.Event, log: ContextLogger
) -> HandoffGate | None:
    """Runs the table's pending chunks; its gate once all are done, None if stopped first."""
    table = schema.name
    records = job.progress.load(table)
    if not records:
        outcome = prepare_downstream_table(source, job.config.sink_uri, schema)
        log.info("downstream table: %s", outcome)
        chunk_key = job.config.chunk_key_columns.get(str(table))
        chunks = split_table(source, schema, job.config.chunk_size, chunk_key)
        records = job.progress.plan(table, chunks)
    pending = [r for r in records if not r.done]
    log.info("snapshot: %d chunks, %d to run", len(records), len(pending))
    if pending:
        writer = SinkWriter(job.config.sink_uri.unmasked(), job.config.changefeed_id)
        source_text = job.config.source_uri.unmasked()
        for first in range(0, len(pending), job.batch_chunks):
            if stop.is_set():
                return None
            batch = [r.chunk for r in pending[first : first + job.batch_chunks]]
            outcomes = run_chunks(job.spark(), source_text, {table: schema}, batch, writer)
            by_id = {c.chunk_id: c for c in batch}
            done, rows = [], 0
            for outcome in outcomes:
                if not outcome.ok:
                    raise SnapshotChunkFailed(outcome.chunk_id, outcome.error or "unknown error")
                job.progress.mark_done(
                    by_id[outcome.chunk_id], outcome.high_watermark, outcome.row_count
                )
                rows += outcome.row_count
                done.append(outcome.chunk_id)
            snapshot_chunks_done(job.config.changefeed_id, str(table), len(done), rows)
            if job.on_batch is not None:
                job.on_batch(done, rows)
        records = job.progress.load(table)
    return handoff_gate(source, schema, records)


def handoff_gate(source: Any, schema: TableSchema, records: Sequence[ChunkRecord]) -> HandoffGate:
    """The hand-off gate of a table whose chunks are all done."""
    column = schema.column(records[0].chunk.key_column) if records else None
    order = (
        ServerTextOrder(source, column)
        if column is not None and column.data_type in TEXT_TYPES
        else None
    )
    return HandoffGate(records, schema.key_columns, order)
