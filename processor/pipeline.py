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
    2. binlog of this table only (Puller) ──► hand-off gate ──► event filter ──► sink
       every event, also a resolved mark, waits while it lies beyond the barrier:
           stalled at a DDL or target barrier: flush, report checkpoint = the limit
           (everything up to it is delivered: the held event is past it)
       a DDL of this table: its schema changes here (the owner applied it downstream
       before the barrier let the DDL through); chunks read at or after it (or never
       read) ──► report checkpoint = the DDL with ``reread_from``, back to 1
       (docs/ddl-during-snapshot.md)
       every ``checkpoint_interval``: flush, report the last resolved position
    3. stop: asked to (``stop``): flush, report stopped with the final checkpoint;
       aborted (the table went elsewhere): close, report nothing; failed: report the
       error with the last checkpoint reported (a position the sink said durable)

Reports go through ``RecordWriter``, guarded by the task revision.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.changefeed import BarrierKind, TableState, TableTask, is_permanent
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.config.masking import mask_secret
from cdc.filter.event_filter import EventFilter
from cdc.filter.table_filter import TableFilter
from cdc.logs import get_logger
from cdc.metrics import TableMetrics
from cdc.model.events import DdlEvent, RowChange
from cdc.model.gtid import Flavor
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.ddl import apply_ddl
from cdc.schema.loader import load_table_schema
from cdc.sink.base import Sink
from cdc.sink.factory import open_sink
from cdc.source.checks import check_binlog_settings
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, current_position, detect
from cdc.store import EtcdStore
from processor.barrier_view import BarrierView
from processor.downstream_tables import DownstreamTableMismatch, drop_downstream_table
from processor.handoff import HandoffGate
from processor.snapshot_progress import SnapshotProgress
from processor.table_records import RecordWriter, TableLost, TaskGuard
from processor.table_snapshot import (
    SnapshotChunkFailed,
    SnapshotJob,
    anchor_snapshot,
    handoff_gate,
    snapshot_table,
)

__all__ = ["PipelineOptions", "TablePipeline", "single_table_filter"]


@dataclass(frozen=True)
class PipelineOptions:
    checkpoint_interval: float = 1.0
    batch_chunks: int = 8
    batch_rows: int = 1000


@dataclass(frozen=True)
class PipelineContext:
    """What a table pipeline works with, besides its table and task.

    ``alive()`` says whether the capture's lease is known to be alive; the
    pipeline writes nothing (rows, checkpoints) while it is not.
    """

    store: EtcdStore
    config: ChangefeedConfig
    records: RecordWriter
    barrier: BarrierView
    spark: Callable[[], Any]
    options: PipelineOptions
    alive: Callable[[], bool]


def single_table_filter(table: TableName, case_sensitive: bool) -> TableFilter:
    """A filter accepting exactly ``table`` (both parts quoted literally)."""

    def quote(name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    return TableFilter.parse([f"{quote(table.schema)}.{quote(table.table)}"], case_sensitive)


def _later(a: Position | None, b: Position | None) -> Position | None:
    if a is None or b is None:
        return a or b
    return a if a.key() >= b.key() else b


#: ``_run``'s answer when the table's binlog stopped at a DDL to read chunks again.
_REREAD = "reread"


class TablePipeline:
    """Runs one table on its own thread until stopped, aborted, failed or finished.

    ``outcome`` says how it ended: "stopped", "aborted", "error", "finished".
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
        self.barrier = context.barrier
        self.spark = context.spark
        self.options = context.options
        self._lease_alive = context.alive
        self.log = get_logger(
            __name__, changefeed=config.changefeed_id, table=table, capture=records.capture_id
        )
        self.outcome: str | None = None
        self.rows = 0
        self.metrics = TableMetrics(config.changefeed_id, table)
        self._stop = threading.Event()
        self._abort = threading.Event()
        self._puller: Puller | None = None
        self._schema: TableSchema | None = None
        self._flavor = Flavor.MARIADB
        self._resolved: Position | None = None
        self._checkpoint: Position | None = None
        self._checkpoint_schema: TableSchema | None = None
        self._snapshot_at: Position | None = None
        self._reread_from: Position | None = None
        self._pending_until: Position | None = None
        self._last_save = time.monotonic()
        self._events = EventFilter(config.event_filters, config.case_sensitive)
        self._thread = threading.Thread(target=self._main, name=f"table-{table}", daemon=True)

    @property
    def guard(self) -> TaskGuard:
        return self.records.guard

    # --- life --------------------------------------------------------------------------------

    def start(self) -> TablePipeline:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop at the next event; the final checkpoint is reported (state stopped)."""
        self._stop.set()
        self._close_puller()

    def abort(self) -> None:
        """Stop at once and report nothing: the table is no longer this capture's."""
        self._abort.set()
        self._stop.set()
        self._close_puller()

    def _close_puller(self) -> None:
        puller = self._puller
        if puller is not None:
            puller.close()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _main(self) -> None:
        try:
            outcome = self._run()
            while outcome == _REREAD and not self._stop.is_set():
                outcome = self._run()
            self.outcome = outcome if outcome != _REREAD else self._finish(None)
        except TableLost as exc:
            self.log.info("stopped without a report: %s", exc)
            self.outcome = "aborted"
        except Exception as exc:  # noqa: BLE001 - reported to the owner through the record
            if self._abort.is_set():
                self.outcome = "aborted"
                return
            message = mask_secret(f"{type(exc).__name__}: {exc}")
            permanent = (
                is_permanent(exc)
                or isinstance(exc, DownstreamTableMismatch)
                or (isinstance(exc, SnapshotChunkFailed) and exc.chunk_id == "(all)")
            )
            self.log.exception("table pipeline failed")
            self.outcome = "error"
            try:
                self._report(
                    TableState.ERROR,
                    self._checkpoint,
                    self._checkpoint_schema,
                    error=message,
                    permanent=permanent,
                )
            except Exception as report:  # noqa: BLE001 - nothing more to do than say so
                # Unreported, the owner never learns of the failure and never reschedules
                # the table: end as aborted so that the processor starts it again.
                self.log.error("could not report the error (the table starts again): %s", report)
                self.outcome = "aborted"
        finally:
            self.metrics.close()

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
        self.records.write(
            state,
            checkpoint,
            schema,
            error=error,
            permanent=permanent,
            snapshot_at=self._snapshot_at,
            reread_from=self._reread_from,
            pending_until=self._pending_until,
        )
        if state is TableState.RUNNING or state is TableState.STOPPED:
            self._checkpoint, self._checkpoint_schema = checkpoint, schema

    def _run(self) -> str:
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
        source = connect(self.config.source_uri)
        try:
            check_binlog_settings(source)
            info = detect(source)
            self._flavor = info.flavor
            gate: HandoffGate | None = None
            if snapshots:
                gate = self._snapshot(source, info, checkpoint)
                if self._stop.is_set():
                    return self._finish(None)
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
                    return "finished"
            elif self._schema is None:
                self._schema = self.task.schema or load_table_schema(source, self.name)
            start = checkpoint or self.task.start
            if start is None:
                raise ValueError(
                    f"table {self.table} has neither a checkpoint nor a start position to read "
                    "the binlog from"
                )
            if self._stop.is_set():
                return self._finish(None)
            self._resolved = start if isinstance(start, Position) else None
            self._report(TableState.RUNNING, self._resolved, self._schema)
            # Open while the binlog runs: a gate over a text chunk key asks the source
            # for its collation's order (ServerTextOrder).
            return self._stream(info, start, gate)
        finally:
            source.close()

    def _snapshot(
        self, source: Any, info: ServerInfo, checkpoint: Position | None
    ) -> HandoffGate | None:
        """The table's hand-off gate after running what its snapshot still needs.

        First run: anchor (schema and downstream table at P0, reported before
        any chunk runs), plan, chunks. After a DDL met chunks read at or after
        it (``reread_from``): those chunks again, with the schema after the
        DDL, then ``reread_from`` is cleared. Otherwise the plan as it is (None
        for a table without one). None when stopped first.
        """
        progress = SnapshotProgress(self.store, self.config.changefeed_id)
        job = SnapshotJob(self.config, progress, self.spark, self.options.batch_chunks)
        if checkpoint is None:
            if self._schema is None or self._snapshot_at is None:
                try:
                    anchor = anchor_snapshot(
                        source,
                        info,
                        self.config.sink_uri,
                        self.name,
                        replace=self.task.replace_downstream,
                    )
                except LookupError:
                    self._gone_before_anchor(current_position(source, info))
                    return None
                self._schema, self._snapshot_at = anchor.schema, anchor.position
                self._report(TableState.RUNNING, None, self._schema)
            gate = snapshot_table(
                job, source, self._schema, self._stop, self.log, floor=self._snapshot_at
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
            gate = snapshot_table(job, source, self._schema, self._stop, self.log, floor=checkpoint)
            if gate is not None:
                self._reread_from = None
                self._pending_until = gate.changed_by
                self._report(TableState.RUNNING, checkpoint, self._schema)
        else:
            chunks = progress.load(self.name)
            if not chunks:
                return None  # a table without a snapshot (or gone before it began)
            assert self._schema is not None
            gate = handoff_gate(
                source, self._schema, chunks, floor=checkpoint, changed_by=self._pending_until
            )
        if gate is not None:
            self._pending_until = gate.changed_by
        return gate

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
            drop_downstream_table(self.config.sink_uri, self.name)
        self.log.warning(
            "the table is not on the source any more (dropped or renamed before its "
            "snapshot began, before %s): nothing to copy under this name",
            now,
        )
        self._snapshot_at = self._pending_until = now
        self._report(TableState.RUNNING, now, self._schema)

    # --- binlog ----------------------------------------------------------------------------

    def _lookup(self, table: TableName) -> TableSchema:
        if table != self.name or self._schema is None:
            raise LookupError(f"the pipeline of {self.table} has no schema for {table}")
        return self._schema

    def _stream(self, info: ServerInfo, start: Any, gate: HandoffGate | None) -> str:
        sink = open_sink(
            self.config.sink_uri,
            self._lookup,
            self.config.changefeed_id,
            writable=self._lease_alive,
        )
        puller = Puller(
            PullerConfig(
                source=self.config.source_uri,
                server=info,
                start=start,
                tables=single_table_filter(self.name, self.config.case_sensitive),
            )
        )
        self._puller = puller
        self.log.info("binlog from %s", start)
        batch: list[RowChange] = []
        try:
            if self._stop.is_set():
                return self._finish(sink)
            for event in self._read(puller):
                if self._stop.is_set():
                    break
                position = event.position
                if not self.barrier.allows(position):
                    self._write(sink, batch)
                    if not self._stall(position, sink):
                        break
                if isinstance(event, RowChange):
                    admitted = list(gate.admit(event)) if gate is not None else [event]
                    batch.extend(c for c in admitted if not self._ignored(c))
                    if len(batch) >= self.options.batch_rows:
                        self._write(sink, batch)
                elif isinstance(event, DdlEvent):
                    self._write(sink, batch)
                    if not self._own_ddl(event):
                        # Renamed or dropped: no row of the table comes under this name any
                        # more, so no chunk waits for one (the owner ends this pipeline).
                        gate = None
                    elif gate is not None and self._named(event.tables):
                        stale = gate.invalidated_by(position)
                        if stale:
                            self.log.info(
                                "%s at %s came before %d chunk(s) were read (validly): "
                                "reading them again with the new schema",
                                event.kind.value,
                                position,
                                len(stale),
                            )
                            self._resolved = self._reread_from = position
                            self._save(sink, position)
                            return _REREAD
                elif isinstance(event, Resolved):
                    self._write(sink, batch)
                    if gate is not None:
                        gate.check_pending(position)
                    self._resolved = position
                    self.metrics.resolved(event.source_time)
                    if time.monotonic() - self._last_save >= self.options.checkpoint_interval:
                        self._save(sink, position)
            return self._finish(sink)
        finally:
            try:
                puller.close()
            finally:
                # A stop closes the puller from another thread; closing it again here can
                # raise ("Already closed"), and the sink's lanes and connections must still go.
                sink.close()

    def _read(self, puller: Puller) -> Iterator[RowChange | DdlEvent | Resolved]:
        """The puller's events; a read that fails because ``stop`` closed the puller ends them."""
        try:
            yield from puller.events()
        except Exception:
            if not self._stop.is_set():
                raise

    def _ignored(self, change: RowChange) -> bool:
        return bool(self._events) and self._events.should_ignore_row(change)

    def _check_alive(self) -> None:
        if not self._lease_alive():
            raise TableLost("the capture's lease is not known to be alive: writing nothing")

    def _write(self, sink: Sink, batch: list[RowChange]) -> None:
        if batch:
            self._check_alive()
            sink.write_rows(batch)
            self.metrics.rows(batch)
            self.rows += len(batch)
            batch.clear()

    def _save(self, sink: Sink, checkpoint: Position | None) -> None:
        self._check_alive()
        with self.metrics.flush():
            sink.flush()
        self._report(TableState.RUNNING, checkpoint, self._schema)
        self.metrics.checkpoint(checkpoint)
        self._last_save = time.monotonic()

    def _stall(self, position: Position, sink: Sink) -> bool:
        """Waits until the barrier lets ``position`` through (True) or the pipeline stops.

        Everything up to the barrier's limit is delivered (the event at
        ``position`` lies beyond it), so after a flush the limit is this
        table's checkpoint; it is reported at once when the owner waits for it
        (a DDL or the target), else with the usual interval.
        """
        reported = None
        while not self._stop.is_set():
            barrier = self.barrier.barrier
            if barrier is not None and barrier.allows(position):
                return True
            limit = barrier.limit if barrier is not None else None
            waited_for = barrier is not None and barrier.kind is not BarrierKind.RESOLVED
            due = time.monotonic() - self._last_save >= self.options.checkpoint_interval
            if (waited_for and reported != limit) or due:
                self._resolved = _later(self._resolved, limit)
                self._save(sink, self._resolved)
                reported = limit
            self.barrier.wait(0.2)
        return False

    def _named(self, tables: Iterable[object]) -> bool:
        """Whether ``tables`` (a DDL's: statements naming none, such as ANALYZE,
        OPTIMIZE, GRANT or CREATE TRIGGER, change no row a chunk read) name this one."""
        names = {str(t) for t in tables}
        if self.config.case_sensitive:
            return str(self.name) in names
        return str(self.name).lower() in {n.lower() for n in names}

    def _own_ddl(self, ddl: DdlEvent) -> bool:
        """Applies a DDL of this table to its schema; False when the table is gone.

        Without a schema (the table was gone before its snapshot began) only a DDL
        that creates the table again gives it one.
        """
        known = {self.name: self._schema} if self._schema is not None else {}
        after = apply_ddl(known, ddl, flavor=self._flavor)
        schema = after.get(self.name)
        if schema is None:
            self.log.info(
                "%s at %s: the table is gone under this name", ddl.kind.value, ddl.position
            )
            return False
        if schema != self._schema:
            self.log.info("schema v%d after %s at %s", schema.version, ddl.kind.value, ddl.position)
        self._schema = schema
        return True

    def _finish(self, sink: Sink | None) -> str:
        """The end of a run that was asked to stop (or a source that ended): final report."""
        if self._abort.is_set():
            return "aborted"
        self._check_alive()
        if sink is not None:
            with self.metrics.flush():
                sink.flush()
        self._report(TableState.STOPPED, self._resolved, self._schema)
        self.log.info("stopped at checkpoint %s (%d rows written)", self._resolved, self.rows)
        return "stopped"
