"""One table of one changefeed, run on this capture: snapshot, then binlog up to the barrier.

    1. start point
       record with a checkpoint ........ resume there (the snapshot's gate rebuilt if any;
                                         chunks to read again after a DDL read first)
       task with a start ............... begin there with the task's schema
                                         (a table created by DDL, or mode never)
       else (mode initial/snapshot-only) anchor the snapshot (schema and downstream table
                                         at position P0, reported), snapshot the table
                                         (table_snapshot.py), begin at P0; snapshot-only:
                                         report finished and end
    2. binlog: the table joins its changefeed's shared stream on this capture
       (processor/shared_stream.py: one reader and one sink for all the tables held
       here; the table is a ``StreamedTable`` with its gate, filter and schema); the
       stream reports its checkpoint every ``checkpoint_interval`` and at barriers.
       It leaves the stream when a DDL of the table meets chunks read at or after
       it (or never read) ──► report checkpoint = the DDL with ``reread_from``,
       back to 1 (docs/ddl-during-snapshot.md)
    3. stop: asked to (``stop``): leave the stream after a flush, report stopped with
       the final checkpoint (asked while waiting for its start slot: nothing ran,
       nothing is reported; the processor answers a stop task itself); aborted
       (the table went elsewhere, or its sink was closed under it as the capture
       stops: ``SinkClosed``): leave, report nothing; failed: report the error
       with the last checkpoint reported (a position the sink said durable)

Reports go through ``RecordWriter``, guarded by the task revision.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cdc.changefeed import TableState, TableTask, is_permanent
from cdc.changefeed.failover import follow_source
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.filter.column_plan import plan_columns
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.masking import mask_secret
from cdc.metrics import TableMetrics
from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.loader import load_table_schema
from cdc.sink.base import SinkClosed
from cdc.sink.kind import DownstreamTableMismatch
from cdc.sink.registry import kind_of
from cdc.source.checks import check_binlog_settings
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, current_position
from cdc.store import EtcdStore
from cdc.uri.mysql import MySQLURI
from processor.handoff import HandoffGate
from processor.shared_stream import SharedStream
from processor.snapshot_scheduler import DEFAULT_SLOTS, SnapshotScheduler
from processor.source_switch import check_resumable, check_snapshot_allowed
from processor.start_slots import StartSlots
from processor.streamed_table import StreamedTable
from processor.table_records import RecordWriter, TableLost, TaskGuard, TaskMovedOn
from processor.table_snapshot import (
    SnapshotChunkFailed,
    SnapshotJob,
    anchor_snapshot,
    handoff_gate,
    snapshot_table,
)

__all__ = ["PipelineContext", "PipelineOptions", "TablePipeline"]


@dataclass(frozen=True)
class PipelineOptions:
    """The settings of a capture's table pipelines; ``snapshot_slots`` and
    ``snapshot_in_flight`` are its snapshot scheduler's ``slots`` and ``max_in_flight``."""

    checkpoint_interval: float = 1.0
    batch_chunks: int = 8
    snapshot_slots: int = DEFAULT_SLOTS
    snapshot_in_flight: int | None = None


@dataclass(frozen=True)
class PipelineContext:
    """What a table pipeline works with, besides its table and task.

    ``alive()`` says whether the capture's lease is known to be alive; the
    pipeline writes nothing (rows, checkpoints) while it is not. ``snapshots``:
    the capture's snapshot scheduler (its chunks and slots); ``starts``: its start
    slots (a source connection while a table starts); ``on_end()`` is called as the
    pipeline's thread ends (its processor looks at the table again).
    """

    store: EtcdStore
    config: ChangefeedConfig
    records: RecordWriter
    stream: SharedStream
    spark: Callable[[], Any]
    options: PipelineOptions
    alive: Callable[[], bool]
    snapshots: SnapshotScheduler
    starts: StartSlots
    on_end: Callable[[], None] = lambda: None


class Outcome(enum.Enum):
    """How a table pipeline's run ended; the processor restarts only STOPPED/ABORTED ones
    when the task says so, and leaves ERROR/FINISHED to the owner."""

    STOPPED = "stopped"
    ABORTED = "aborted"
    ERROR = "error"
    FINISHED = "finished"
    #: Only between runs: the table's binlog stopped at a DDL to read chunks again.
    REREAD = "reread"


class TablePipeline:
    """Runs one table on its own thread until stopped, aborted, failed or finished.

    ``outcome`` says how it ended (``Outcome``, never REREAD); ``moved_on_from``, the
    task revision etcd refused its report at, when it ended on that (``TaskMovedOn``).
    ``_checkpoint`` and ``_checkpoint_schema`` are the last reported checkpoint
    (durable in the sink: reported only after a flush) and the schema at it;
    ``_resolved`` runs ahead of it (handed to the sink, maybe not durable) and
    is never reported on its own.
    """

    def __init__(self, context: PipelineContext, table: str, task: TableTask) -> None:
        self.store = context.store
        self.config = config = context.config
        self.table = table
        self.name = TableName.parse(table)
        self.task = task
        self.records = records = context.records
        self.stream = context.stream
        self.spark = context.spark
        self.options = context.options
        self._lease_alive = context.alive
        self.snapshots = context.snapshots
        self._on_end = context.on_end
        self._slot = context.snapshots.slot()
        self._start_slot = context.starts.slot()
        self.log = get_logger(
            __name__, changefeed=config.changefeed_id, table=table, capture=records.capture_id
        )
        self.outcome: Outcome | None = None
        self.moved_on_from: int | None = None
        self.rows = 0
        self.metrics = TableMetrics(config.changefeed_id, table)
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._wake = threading.Event()
        self._ended = False
        self._schema: TableSchema | None = None
        self._flavor = Flavor.MARIADB
        self._resolved: Position | None = None
        self._checkpoint: Position | None = None
        self._checkpoint_schema: TableSchema | None = None
        self._snapshot_at: Position | None = None
        self._reread_from: Position | None = None
        self._pending_until: Position | None = None
        self._events = EventFilter(config.event_filters, config.case_sensitive)
        self._thread = threading.Thread(target=self._main, name=f"table-{table}", daemon=True)

    @property
    def guard(self) -> TaskGuard:
        return self.records.guard

    @property
    def may_snapshot(self) -> bool:
        """Whether this table may run snapshot chunks (its changefeed snapshots and its
        task gives no start of its own): its capture's Spark session should be warm."""
        return self.config.snapshot_mode is not SnapshotMode.NEVER and self.task.start is None

    # --- life --------------------------------------------------------------------------------

    def start(self) -> TablePipeline:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop at the next event; the final checkpoint is reported (state stopped)."""
        self._stop.set()
        self._wake.set()

    def abort(self) -> None:
        """Stop at once and report nothing: the table is no longer this capture's."""
        self._abort.set()
        self._stop.set()
        self._wake.set()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Running: started, and not past its end (its processor is told of the end from
        the thread's last lines, and must then find it ended)."""
        return not self._ended and self._thread.is_alive()

    def _main(self) -> None:
        try:
            outcome = self._run()
            while outcome is Outcome.REREAD and not self._stop.is_set():
                outcome = self._run()
            self.outcome = outcome if outcome is not Outcome.REREAD else self._finish()
        except (TableLost, SinkClosed) as exc:
            self.log.info("stopped without a report: %s", exc)
            if isinstance(exc, TaskMovedOn):
                self.moved_on_from = exc.revision
            self.outcome = Outcome.ABORTED
        except Exception as exc:  # reported to the owner through the record
            if self._abort.is_set():
                self.outcome = Outcome.ABORTED
                return
            message = mask_secret(f"{type(exc).__name__}: {exc}")
            permanent = (
                is_permanent(exc)
                or isinstance(exc, DownstreamTableMismatch)
                or (isinstance(exc, SnapshotChunkFailed) and exc.chunk_id == "(all)")
            )
            self.log.exception("table pipeline failed")
            self.outcome = Outcome.ERROR
            try:
                self._report(
                    TableState.ERROR,
                    self._checkpoint,
                    self._checkpoint_schema,
                    error=message,
                    permanent=permanent,
                )
            except Exception as report:  # nothing more to do than say so
                # Unreported, the owner never learns of the failure and never reschedules
                # the table: end as aborted so that the processor starts it again.
                self.log.error("could not report the error (the table starts again): %s", report)
                self.outcome = Outcome.ABORTED
        finally:
            self._slot.release()
            self._start_slot.release()
            self.metrics.close()
            self._ended = True
            self._on_end()

    # --- start point ---------------------------------------------------------------------------

    def _report(
        self,
        state: TableState,
        checkpoint: Position | None,
        schema: TableSchema | None,
        *,
        error: str | None = None,
        permanent: bool = False,
    ) -> None:
        self.records.put(
            *self.records.record(
                state,
                checkpoint,
                schema,
                error=error,
                permanent=permanent,
                snapshot_at=self._snapshot_at,
                reread_from=self._reread_from,
                pending_until=self._pending_until,
            )
        )
        if state is TableState.RUNNING or state is TableState.STOPPED:
            self._checkpoint, self._checkpoint_schema = checkpoint, schema

    def _run(self) -> Outcome:
        # Every start reads the table's record and connects to the source: one of the
        # capture's start slots first (processor/start_slots.py), so that a capture
        # given thousands of tables sends etcd and the source a few requests at a
        # time (each read at once kept its lease's keep-alive waiting past its TTL).
        # Stopped before it: nothing ran and nothing is reported (the processor
        # answers the stop of a table with no pipeline itself).
        if not self._start_slot.acquire(self._stop, self._wake):
            return Outcome.ABORTED if self._abort.is_set() else Outcome.STOPPED
        record = self.records.read()
        if record is not None:
            self._schema = record.schema or self._schema
            self._snapshot_at = record.snapshot_at
            self._reread_from = record.reread_from
            self._pending_until = record.pending_until
        checkpoint = record.checkpoint if record is not None else None
        self._checkpoint, self._checkpoint_schema = checkpoint, self._schema
        self._resolved = checkpoint
        snapshots = self.config.snapshot_mode is not SnapshotMode.NEVER and self.task.start is None
        # Chunks to read (first run, or again after a DDL) hold a source connection until
        # they are done: the start slot is exchanged for one of the capture's snapshot
        # slots (released before the binlog; ``_main`` releases it on any error before
        # that). Any other start holds its start slot until it joins the binlog.
        reads = snapshots and (checkpoint is None or self._reread_from is not None)
        if reads:
            self._start_slot.release()
            if not self._slot.acquire(self._stop, self._wake):
                return self._finish()
        source = _Connection(self.config.source_uri)
        try:
            info = self.stream.checked_source(lambda: self._check_source(source()))
            self._flavor = info.flavor
            gate: HandoffGate | None = None
            if snapshots:
                try:
                    if reads:
                        check_snapshot_allowed(self.table, info)
                    gate = self._snapshot(source, info, checkpoint)
                finally:
                    self._slot.release()
                if self._stop.is_set():
                    return self._finish()
                unsettled = self._pending_until is not None or self._reread_from is not None
                check_resumable(self.table, checkpoint, info, gate, unsettled=unsettled)
                if checkpoint is None:
                    checkpoint = gate.start if gate is not None else self._checkpoint
                if self.config.snapshot_mode is SnapshotMode.SNAPSHOT_ONLY:
                    if gate is not None and gate.pending:
                        raise SnapshotChunkFailed(
                            "(all)",
                            f"a DDL changed {self.table} while its snapshot-only run read it "
                            f"(chunks {', '.join(gate.pending[:5])}); run the changefeed again",
                        )
                    self._report(TableState.FINISHED, gate.end if gate else None, self._schema)
                    return Outcome.FINISHED
            elif self._schema is None:
                self._schema = self.task.schema or load_table_schema(source(), self.name)
            start = checkpoint or self.task.start
            if start is None:
                raise ValueError(
                    f"table {self.table} has neither a checkpoint nor a start position to read "
                    "the binlog from"
                )
            if self._stop.is_set():
                return self._finish()
            self._resolved = start if isinstance(start, Position) else None
            self._report(TableState.RUNNING, self._resolved, self._schema)
            if gate is not None and gate.asks_server:
                # Only a gate over a text chunk key asks the source (its collation's
                # order) while the binlog runs; a held connection per table would make
                # the source's connections follow the number of tables.
                source.keep()
            source.close()
            self._start_slot.release()
            return self._stream(info, start, gate)
        finally:
            source.close()

    def _check_source(self, source: Any) -> ServerInfo:
        check_binlog_settings(source)
        # which server this is for the changefeed (its failover guard), and the
        # generation its positions are stamped with
        return follow_source(self.store, self.config.changefeed_id, source)

    def _snapshot(
        self, source: _Connection, info: ServerInfo, checkpoint: Position | None
    ) -> HandoffGate | None:
        """The table's hand-off gate after running what its snapshot still needs.

        First run: anchor (schema and downstream table at P0, reported before
        any chunk runs), plan, chunks. After a DDL met chunks read at or after
        it (``reread_from``): those chunks again, with the schema after the
        DDL, then ``reread_from`` is cleared. Otherwise the plan as it is (None
        for a table without one). None when stopped first.
        """
        progress = SnapshotProgress(self.store, self.config.changefeed_id)
        job = SnapshotJob(
            self.config,
            progress,
            self.spark,
            scheduler=self.snapshots,
            wake=self._wake,
            batch_chunks=self.options.batch_chunks,
            prove=self.records.proof,
        )
        if checkpoint is None:
            if self._schema is None or self._snapshot_at is None:
                try:
                    anchor = anchor_snapshot(
                        source(),
                        info,
                        self.config.sink_uri,
                        self.name,
                        replace=self.task.replace_downstream,
                        project=self._sent,
                    )
                except LookupError:
                    self._gone_before_anchor(current_position(source(), info))
                    return None
                self._schema, self._snapshot_at = anchor.schema, anchor.position
                self._report(TableState.RUNNING, None, self._schema)
            job.share = True  # the first read of a large plan is shared out
            gate = snapshot_table(
                job, source(), self._schema, self._stop, self.log, floor=self._snapshot_at
            )
        elif self._reread_from is not None:
            assert self._schema is not None
            after = self._reread_from.key()
            stale = [
                r.chunk.chunk_id
                for r in progress.load(self.name)
                if not r.done or r.high_watermark is None or r.high_watermark.key() >= after
            ]
            self.log.info(
                "snapshot: reading %d chunk(s) again after the DDL at %s",
                len(stale),
                self._reread_from,
            )
            progress.reopen(self.name, stale)
            gate = snapshot_table(
                job, source(), self._schema, self._stop, self.log, floor=checkpoint
            )
            if gate is not None:
                self._reread_from = None
                self._pending_until = gate.changed_by
                self._report(TableState.RUNNING, checkpoint, self._schema)
        else:
            chunks = progress.load(self.name)
            if not chunks or any(r.request is not None for r in chunks):
                # a table without a snapshot (or gone before it began), or whose records
                # are an operator's re-snapshot: planned only once its own snapshot was
                # over (its checkpoint past every high watermark), so no gate is needed
                return None
            assert self._schema is not None
            gate = handoff_gate(
                source(), self._schema, chunks, floor=checkpoint, changed_by=self._pending_until
            )
        if gate is not None:
            self._pending_until = gate.changed_by
        return gate

    def _sent(self, schema: TableSchema) -> TableSchema:
        """What the sink gets of ``schema`` under the changefeed's column rules (raises
        ``ColumnRuleError`` when they cannot apply: the table fails before any chunk)."""
        rules = self.config.columns.for_table(self.name)
        return schema if rules is None else plan_columns(rules, schema).out

    def _gone_before_anchor(self, now: Position) -> None:
        """The table was dropped or renamed after the changefeed listed it, before its
        snapshot began: nothing to copy under this name, and the DDL that took it lies
        before ``now``.

        Reported as a snapshot anchored at ``now`` (so the owner does not apply that
        DDL to a downstream table that never existed) and unsettled (so a rename
        target is snapshotted in full), with checkpoint ``now``: the changefeed's
        checkpoint can reach the DDL and the owner can act on it. A downstream table
        this task was to replace (a partial snapshot renamed to this name) is dropped:
        the source has no table of this name any more.
        """
        if self.task.replace_downstream:
            kind_of(self.config.sink_uri).drop_table(self.config.sink_uri, self.name)
        self.log.warning(
            "the table is not on the source any more (dropped or renamed before its "
            "snapshot began, before %s): nothing to copy under this name",
            now,
        )
        self._snapshot_at = self._pending_until = now
        self._report(TableState.RUNNING, now, self._schema)

    # --- binlog ----------------------------------------------------------------------------

    def _stream(
        self, info: ServerInfo, start: Position | GtidSet, gate: HandoffGate | None
    ) -> Outcome:
        """Joins the changefeed's shared stream (``processor/shared_stream.py``) and waits
        until the table leaves it: stopped, aborted, failed, or to read chunks again."""
        if self._stop.is_set():
            return self._finish()
        state = StreamedTable(
            self.name,
            self._schema,
            gate,
            floor=start if isinstance(start, Position) else None,
            records=self.records,
            metrics=self.metrics,
            events=self._events,
            flavor=self._flavor,
            case_sensitive=self.config.case_sensitive,
            log=self.log,
            wake=self._wake,
            columns=self.config.columns.for_table(self.name),
        )
        state.snapshot_at, state.pending_until = self._snapshot_at, self._pending_until
        state.reported = self._checkpoint
        self.stream.join(state, start, info)
        self.log.info("binlog from %s", start)
        left = False
        while not state.ended.is_set():
            # Woken by the stream (the table left it) or by stop/abort: a thousand
            # idle tables must not poll.
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set() and not left and not state.ended.is_set():
                self.stream.leave(state, report=not self._abort.is_set())
                left = True
        self._schema = state.schema
        self.rows += state.rows
        if state.reported is not None:
            # the schema at that checkpoint: a DDL followed since the last report gave
            # ``state.schema`` a shape the rows before it do not have
            self._checkpoint, self._checkpoint_schema = state.reported, state.reported_schema
        if state.error is not None:
            raise state.error
        if state.reread_from is not None:
            self._check_alive()
            self._resolved = self._reread_from = state.reread_from
            self._report(TableState.RUNNING, self._resolved, self._schema)
            return Outcome.REREAD
        self._resolved = state.stopped_at
        return self._finish()

    def _check_alive(self) -> None:
        if not self._lease_alive():
            raise TableLost("the capture's lease is not known to be alive: writing nothing")

    def _finish(self) -> Outcome:
        """The end of a run that was asked to stop: the final report (what it names is
        durable: the stream flushed before the table left it)."""
        if self._abort.is_set():
            return Outcome.ABORTED
        self._check_alive()
        self._report(TableState.STOPPED, self._resolved, self._schema)
        self.log.info("stopped at checkpoint %s (%d rows written)", self._resolved, self.rows)
        return Outcome.STOPPED


class _Connection:
    """The source connection of one start of a table, opened at its first use: a table
    that resumes from its record (schema in it, no chunks) while another table's check
    of the source is fresh needs none. Closed at the end of the start unless ``keep``
    (a hand-off gate that asks the source while the binlog runs holds it)."""

    def __init__(self, uri: MySQLURI) -> None:
        self.uri = uri
        self._conn: Any = None
        self._kept = False

    def __call__(self) -> Any:
        if self._conn is None:
            self._conn = connect(self.uri)
        return self._conn

    def keep(self) -> None:
        self._kept = True

    def close(self) -> None:
        if self._conn is not None and not self._kept:
            self._conn.close()
            self._conn = None
