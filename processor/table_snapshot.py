"""The snapshot of one table, run by its table pipeline before it joins the binlog stream.

    anchor (first run only): schema read, binlog position P0, downstream table
    created or checked, schema read again; equal shapes ──► schema of P0
    chunk plan in etcd (SnapshotProgress: a plan that exists is resumed)
    pending chunks to the capture's snapshot scheduler (snapshot_scheduler.py: one
    Spark job for the chunks of many tables, ``batch_chunks`` of this one at most),
    the plan's tail first (the chunk open above: cdc.snapshot.splitter);
    a chunk counts as done only after its rows are in the sink and its high
    watermark is in etcd, recorded here as each job's outcomes come back
    a chunk whose read met another schema (a DDL of the table ran): no more
    batches; it stays pending for the table pipeline to read again after the
    DDL (docs/ddl-during-snapshot.md)
    a plan of more than SHARE_THRESHOLD chunks (first run, a sink that takes writes from
    several captures): shared out instead,
    published in shares the owner gives to live captures (cdc.changefeed.snapshot_shares,
    processor/share_runner.py runs them), all but the tail, which runs here meanwhile;
    the table waits until every share ended
    ──► the table's hand-off gate (binlog from P0 or its lowest high watermark)

A stop withdraws the chunks still queued; the ones running finish and are
recorded; the next run (on any capture) runs only the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_shares import ShareBook, ShareState, shared
from cdc.config.changefeed import ChangefeedConfig
from cdc.filter.event_filter import EventFilter
from cdc.logs import ContextLogger, get_logger
from cdc.metrics import snapshot_chunks_done
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.loader import load_table_schema
from cdc.sink.kind import SinkURI
from cdc.sink.registry import kind_of
from cdc.snapshot.chunk import SnapshotChunk, reading_order
from cdc.snapshot.errors import SnapshotError, TableGone
from cdc.snapshot.keyorder import ServerTextOrder
from cdc.snapshot.records import ChunkRecord
from cdc.snapshot.splitter import split_table, whole_table
from cdc.source.flavor import ServerInfo, current_position, detect
from cdc.store import KeyMirror
from cdc.typeconv import TEXT_TYPES
from processor.handoff import HandoffGate
from processor.snapshot_scheduler import JobKey, SnapshotScheduler, TableChunks

log = get_logger(__name__)

__all__ = [
    "ANCHOR_ATTEMPTS",
    "Anchor",
    "SnapshotChunkFailed",
    "SnapshotJob",
    "anchor_snapshot",
    "handoff_gate",
    "snapshot_table",
]

#: Reads of a table's schema around its anchor position before giving up (DDL storm).
ANCHOR_ATTEMPTS = 5
#: How a chunk read that met another schema of its table comes back from Spark.
_SCHEMA_CHANGED = "ChunkSchemaChanged"


class SnapshotChunkFailed(RuntimeError):
    def __init__(self, chunk_id: str, error: str) -> None:
        super().__init__(f"snapshot chunk {chunk_id} failed: {error}")
        self.chunk_id = chunk_id


@dataclass
class SnapshotJob:
    """What snapshotting a table of a changefeed needs.

    ``spark`` gives the Spark session (called only when a chunk has to run);
    ``scheduler``: the capture's, which runs the chunks (``batch_chunks`` of
    this table at most in one Spark job); ``wake``: what the table sleeps on
    while its chunks run, set by the scheduler and with the ``stop`` given to
    ``snapshot_table``; ``on_batch(chunk ids, rows)`` is called after each
    batch is recorded. ``prove()``: the etcd revision at which this capture still
    holds the table, the fence token its chunks' writes carry (it raises when the
    capture no longer does; ``cdc.sink.mysql.chunkfence``); without it, unfenced.
    """

    config: ChangefeedConfig
    progress: SnapshotProgress
    spark: Callable[[], Any]
    scheduler: SnapshotScheduler
    wake: threading.Event
    batch_chunks: int = 8
    on_batch: Callable[[list[str], int], None] | None = None
    share: bool = False
    prove: Callable[[], int] | None = None


@dataclass(frozen=True)
class Anchor:
    """The schema a table's snapshot reads with, and the binlog position it is the schema of.

    The downstream table was prepared with this schema, so every DDL of the
    table at or before ``position`` is already there, and every later one is
    met by the table's binlog, which starts no later than ``position``.
    """

    schema: TableSchema
    position: Position


def anchor_snapshot(
    source: Any,
    server: ServerInfo,
    sink: SinkURI,
    table: TableName,
    *,
    replace: bool = False,
    project: Callable[[TableSchema], TableSchema] | None = None,
) -> Anchor:
    """Reads the schema, the binlog position and prepares the downstream table, consistently.

    The schema is read before and after the position and the downstream
    table's preparation (which copies ``SHOW CREATE TABLE``); equal shapes
    mean no DDL changed the table's columns or keys in between, so the schema
    is the one at the position. A DDL that changes no shape (TRUNCATE, an
    index) at or after the position is met by the binlog like any later one.
    A downstream table this function created is replaced at the next attempt.
    ``replace``: see ``SinkKind.prepare_table``. ``project``: the schema the sink gets
    of the table (the changefeed's column rules: ``cdc.filter.column_plan``), which
    the downstream table is prepared with.
    """
    for _ in range(ANCHOR_ATTEMPTS):
        before = load_table_schema(source, table)
        position = current_position(source, server)
        sent = before if project is None else project(before)
        outcome = kind_of(sink).prepare_table(
            sink, source, sent, replace=replace, source_schema=None if sent is before else before
        )
        # A table created here under a schema a DDL has since changed is made again at
        # the next attempt: nothing was written into it, and as it stands it would not
        # fit the new schema (the fuzz's seed 6106 failed closed on that).
        replace = replace or outcome == "created"
        after = load_table_schema(source, table)
        if before == after:  # both read at version 0: equal columns and keys
            log.info(
                "table %s: snapshot schema at %s, downstream table %s", table, position, outcome
            )
            return Anchor(after, position)
    raise SnapshotError(
        f"the schema of {table} changed during each of {ANCHOR_ATTEMPTS} reads; the snapshot "
        "needs it to stand still for a moment: retry when the DDL on it has finished"
    )


def snapshot_table(
    job: SnapshotJob,
    source: Any,
    schema: TableSchema,
    stop: threading.Event,
    log: ContextLogger,
    *,
    floor: Position | None = None,
) -> HandoffGate | None:
    """Runs the table's pending chunks; its gate, None if stopped first.

    The downstream table must be prepared (``anchor_snapshot``) before the
    first run. A chunk whose read met another schema of the table stays
    pending, and no later batch runs (its reads would meet the same schema):
    the gate then holds pending chunks (``HandoffGate.pending``).
    """
    table = schema.name
    records = job.progress.load(table)
    changed_by: Position | None = None
    if not records:
        chunk_key = job.config.chunk_key_columns.get(str(table))
        try:
            chunks = split_table(source, schema, job.config.chunk_size, chunk_key)
        except TableGone as gone:
            # renamed or dropped since the anchor: the DDL lies before changed_by, and the
            # table waits for its binlog to reach it as after a chunk that met it
            changed_by = current_position(source, detect(source))
            log.warning("snapshot: %s; one chunk waits for the DDL before %s", gone, changed_by)
            chunks = whole_table(schema, chunk_key)
        records = job.progress.plan(table, chunks)
    pending = [r for r in records if not r.done]
    log.info("snapshot: %d chunks, %d to run", len(records), len(pending))
    if changed_by is not None:
        return handoff_gate(source, schema, records, floor=floor, changed_by=changed_by)
    # a sink with one writer (a file sink's folder) gets every chunk from this capture
    one_writer = kind_of(job.config.sink_uri).one_writer
    if pending and job.share and not one_writer and shared(len(records)):
        ended, changed_by = _shared(job, source, schema, records, stop, log)
        if not ended:
            return None
        return handoff_gate(
            source, schema, job.progress.load(table), floor=floor, changed_by=changed_by
        )
    if pending:
        chunks = reading_order([r.chunk for r in pending])
        stopped, changed_by = _run_here(job, source, schema, chunks, stop, log)
        if stopped:
            return None
        records = job.progress.load(table)
    return handoff_gate(source, schema, records, floor=floor, changed_by=changed_by)


def _run_here(
    job: SnapshotJob,
    source: Any,
    schema: TableSchema,
    chunks: Sequence[SnapshotChunk],
    stop: threading.Event,
    log: ContextLogger,
) -> tuple[bool, Position | None]:
    """``chunks`` run on this capture's scheduler, in that order, and recorded as they
    come back: (stopped, changed_by), ``changed_by`` when one met another schema (the
    rest is withdrawn and stays pending)."""
    table = schema.name
    changed_by: Position | None = None
    token = None if job.prove is None else job.prove()
    events = EventFilter(job.config.event_filters, job.config.case_sensitive)
    request = TableChunks(
        JobKey.of(job.config),
        schema,
        tuple(chunks),
        job.spark,
        clear_ranges=not events.keeps_deleted_rows(table),
        per_job=job.batch_chunks,
        token=token,
    )
    ticket = job.scheduler.submit(request, stop, job.wake)
    for batch in ticket.batches():
        done, rows = [], 0
        for chunk, outcome in batch:
            if outcome.error_type == _SCHEMA_CHANGED:
                log.warning("snapshot %s", outcome.error)
                changed_by = changed_by or current_position(source, detect(source))
                continue
            if not outcome.ok:
                raise SnapshotChunkFailed(outcome.chunk_id, outcome.error or "unknown error")
            assert outcome.high_watermark is not None  # a task that succeeded reports it
            job.progress.mark_done(chunk, outcome.high_watermark, outcome.row_count)
            rows += outcome.row_count
            done.append(outcome.chunk_id)
        snapshot_chunks_done(job.config.changefeed_id, str(table), len(done), rows)
        if job.on_batch is not None:
            job.on_batch(done, rows)
        if changed_by is not None:
            # the scheduler withdrew the table's other chunks: no later job reads them
            log.warning(
                "snapshot: the table's schema changed (a DDL before %s); the chunks not "
                "read yet wait for the binlog to reach that DDL",
                changed_by,
            )
            break
    return ticket.stopped, changed_by


def _shared(
    job: SnapshotJob,
    source: Any,
    schema: TableSchema,
    records: Sequence[ChunkRecord],
    stop: threading.Event,
    log: ContextLogger,
) -> tuple[bool, Position | None]:
    """The plan shared out and waited for: (ended, changed_by); not ended if stopped first.

    The shares cover the chunks bounded above; the plan's tail (the chunk open above,
    the last) is read here, at once, while the captures take the shares: it holds the
    rows inserted above the plan's highest key, which are fewer the sooner it is read.
    A share that failed fails the table; one whose chunk met another schema stops the
    open ones (their captures record nothing more) and gives ``changed_by``, a position
    the DDL lies before, as a local batch's would.
    """
    table = schema.name
    book = ShareBook(job.progress.store, job.config.changefeed_id)
    bounded = sum(1 for r in records if r.chunk.upper is not None)
    covered = book.publish(table, schema, bounded)
    reopened = book.reopen(table)
    log.info(
        "snapshot: %d of %d chunks shared out over the captures (%d share(s) opened again)",
        covered,
        len(records),
        reopened,
    )
    here = [r.chunk for r in records if r.chunk.n >= covered and not r.done]
    if here:
        stopped, changed_by = _run_here(job, source, schema, here, stop, log)
        if stopped:
            return False, None
        if changed_by is not None:
            book.stop_open(table)
            return True, changed_by
    prefix = book.prefix(table)
    mirror = KeyMirror(job.progress.store, prefix, lambda _key: job.wake.set()).start()
    try:
        while True:
            job.wake.clear()
            held = [book.decode(item) for item in mirror.get_prefix(prefix)]
            failed = [h.share for h in held if h.share.state is ShareState.FAILED]
            if failed:
                first = failed[0]
                raise SnapshotChunkFailed(
                    f"{table}:{first.first}..{first.last - 1}", first.error or "unknown error"
                )
            changed = [h.share.changed_by for h in held if h.share.state is ShareState.CHANGED]
            if changed:
                book.stop_open(table)
                marks = [p for p in changed if p is not None]
                changed_by = (
                    max(marks, key=Position.key)
                    if marks
                    else current_position(source, detect(source))
                )
                log.warning(
                    "snapshot: the table's schema changed (a DDL before %s); the chunks not "
                    "read yet wait for the binlog to reach that DDL",
                    changed_by,
                )
                return True, changed_by
            if held and all(h.share.state is ShareState.DONE for h in held):
                log.info("snapshot: every share of the plan is done")
                return True, None
            if stop.is_set():
                return False, None
            job.wake.wait(1.0)
    finally:
        mirror.close()


def handoff_gate(
    source: Any,
    schema: TableSchema,
    records: Sequence[ChunkRecord],
    *,
    floor: Position | None = None,
    changed_by: Position | None = None,
) -> HandoffGate:
    """The hand-off gate of a table's chunks (see ``HandoffGate`` for the arguments)."""
    column = schema.column(records[0].chunk.key_column) if records else None
    compare = (
        ServerTextOrder(source, column).compare
        if column is not None and column.data_type in TEXT_TYPES
        else None
    )
    return HandoffGate(
        records,
        schema.key_columns,
        compare,
        floor=floor,
        changed_by=changed_by,
        replay_all=bool(schema.other_unique_keys),
    )
