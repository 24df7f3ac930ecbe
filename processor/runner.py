"""One changefeed run end to end on one capture: snapshot, hand-off, binlog, checkpoints.

    1. check the source (ROW / FULL / FULL), list the filtered tables, load their schemas
    2. snapshot (mode initial / snapshot-only), per table:
         downstream table created or checked
         chunk plan in etcd (SnapshotProgress: resumes a plan that exists)
         pending chunks on Spark, a batch at a time; each chunk counts as done
         only after its rows are in the sink and its high watermark is in etcd
    3. hand-off: binlog from the lowest high watermark of all tables (or from the
       checkpoint after a restart); HandoffGate drops what a chunk already holds
    4. binlog: puller -> event filter -> sink; DDL applied through the sink after a
       flush, then recorded in the schema history; every `checkpoint_interval`
       the sink is flushed and the resolved position saved as table checkpoints

The cluster (issue #6) splits this across captures; the steps stay the same.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.filter.ddl_support import IGNORED_BY_EVENT_FILTER, skip_reason
from cdc.filter.event_filter import EventFilter
from cdc.filter.table_filter import TableFilter
from cdc.logs import get_logger
from cdc.model.events import DdlEvent, RowChange
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.history import SchemaHistory
from cdc.schema.loader import list_tables, load_schemas
from cdc.sink.base import Sink
from cdc.sink.factory import open_sink
from cdc.source.checks import check_binlog_settings
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, current_position, detect
from cdc.store import EtcdStore
from processor.checkpoints import TableCheckpoints
from processor.downstream_tables import prepare_downstream_table
from processor.handoff import HandoffGate
from processor.snapshot_progress import SnapshotProgress
from processor.table_snapshot import (
    SnapshotChunkFailed,
    SnapshotJob,
    snapshot_table,
)


@dataclass
class RunnerHooks:
    """Test seams: called after each snapshot batch is recorded, and per binlog event."""

    after_chunk_batch: Callable[[list[str]], None] | None = None


@dataclass
class RunStats:
    chunks_run: list[str] = field(default_factory=list)
    snapshot_rows: int = 0
    binlog_rows: int = 0
    dropped_by_handoff: int = 0
    ignored_by_filter: int = 0
    ddl_applied: int = 0
    ddl_skipped: int = 0
    checkpoint: Position | None = None


class ChangefeedRunner:
    """Runs `config` until `stop` is set (or the snapshot ends, in snapshot-only mode)."""

    def __init__(
        self,
        config: ChangefeedConfig,
        store: EtcdStore,
        spark: Any,
        *,
        batch_chunks: int = 8,
        checkpoint_interval: float = 1.0,
        hooks: RunnerHooks | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.spark = spark
        self.batch_chunks = batch_chunks
        self.checkpoint_interval = checkpoint_interval
        self.hooks = hooks or RunnerHooks()
        self.stats = RunStats()
        self.log = get_logger(__name__, changefeed=config.changefeed_id)
        self.progress = SnapshotProgress(store, config.changefeed_id)
        self.checkpoints = TableCheckpoints(store, config.changefeed_id)
        self.filter = TableFilter.parse(config.rules, config.case_sensitive)
        self.events = EventFilter(config.event_filters, config.case_sensitive)
        self._history: SchemaHistory | None = None

    # --- set-up ------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> RunStats:
        source = connect(self.config.source_uri)
        try:
            check_binlog_settings(source)
            info = detect(source)
            tables = list_tables(source, self.filter.matches)
            schemas = load_schemas(source, tables)
            start = current_position(source, info)
            self._history = SchemaHistory.initial(schemas, start, flavor=info.flavor)
            gates: dict[TableName, HandoffGate] = {}
            if self.config.snapshot_mode is not SnapshotMode.NEVER:
                for table in tables:
                    gate = self._snapshot_table(source, schemas[table], stop)
                    if gate is None or stop.is_set():
                        return self.stats
                    gates[table] = gate
            if self.config.snapshot_mode is SnapshotMode.SNAPSHOT_ONLY:
                self.log.info("snapshot-only changefeed finished: %d tables", len(tables))
                return self.stats
            begin = self._binlog_start(gates, start, info)
            self._stream(info, list(schemas), begin, gates, stop)
        finally:
            source.close()
        return self.stats

    def _lookup(self, table: TableName) -> TableSchema:
        assert self._history is not None
        schema = self._history.current(table)
        if schema is None:
            raise KeyError(f"no schema known for {table}")
        return schema

    # --- snapshot ----------------------------------------------------------------------

    def _snapshot_table(
        self, source: Any, schema: TableSchema, stop: threading.Event
    ) -> HandoffGate | None:
        job = SnapshotJob(
            self.config,
            self.progress,
            lambda: self.spark,
            self.batch_chunks,
            on_batch=self._after_batch,
        )
        log = self.log.bind(table=str(schema.name))
        if not self.progress.load(schema.name):
            outcome = prepare_downstream_table(source, self.config.sink_uri, schema)
            log.info("downstream table: %s", outcome)
        gate = snapshot_table(job, source, schema, stop, log)
        if gate is not None and gate.pending:
            # This runner follows no DDL during a snapshot (the cluster's table pipeline does).
            raise SnapshotChunkFailed(
                "(all)", f"a DDL changed {schema.name} while its snapshot ran; run it again"
            )
        return gate

    def _after_batch(self, done: list[str], rows: int) -> None:
        self.stats.snapshot_rows += rows
        self.stats.chunks_run += done
        if self.hooks.after_chunk_batch is not None:
            self.hooks.after_chunk_batch(done)

    # --- binlog ------------------------------------------------------------------------

    def _binlog_start(
        self, gates: dict[TableName, HandoffGate], now: Position, info: ServerInfo
    ) -> Position | GtidSet:
        """The checkpoint after a restart; else the snapshot's lowest watermark; else the
        configured start (FILE:OFFSET or GTID set); else the source's position now."""
        saved = self.checkpoints.changefeed_checkpoint()
        if saved is not None:
            return saved
        if gates:
            return min(g.start for g in gates.values())
        if self.config.start_position:
            return Position.parse(self.config.start_position)
        if self.config.start_gtid:
            return GtidSet.parse(self.config.start_gtid, info.flavor)
        return now

    def _stream(
        self,
        info: ServerInfo,
        tables: list[TableName],
        begin: Position | GtidSet,
        gates: dict[TableName, HandoffGate],
        stop: threading.Event,
    ) -> None:
        sink = open_sink(self.config.sink_uri, self._lookup, self.config.changefeed_id)
        source = self.config.source_uri
        puller = Puller(PullerConfig(source=source, server=info, start=begin, tables=self.filter))
        self.log.info("binlog from %s (%d tables)", begin, len(tables))
        watchdog = threading.Thread(target=self._close_on_stop, args=(stop, puller), daemon=True)
        watchdog.start()
        resolved: Position | None = None
        last_checkpoint = time.monotonic()
        try:
            for event in puller.events():
                if isinstance(event, RowChange):
                    self._row(event, gates, sink)
                elif isinstance(event, DdlEvent):
                    self._ddl(event, sink)
                    tables = self._tables_after(tables, event)
                elif isinstance(event, Resolved):
                    resolved = event.position
                    if time.monotonic() - last_checkpoint >= self.checkpoint_interval:
                        self._checkpoint(sink, tables, resolved)
                        last_checkpoint = time.monotonic()
                if stop.is_set():
                    break
            if resolved is not None:
                self._checkpoint(sink, tables, resolved)
        finally:
            puller.close()
            sink.close()

    @staticmethod
    def _close_on_stop(stop: threading.Event, puller: Puller) -> None:
        stop.wait()
        puller.close()

    def _row(self, change: RowChange, gates: dict[TableName, HandoffGate], sink: Sink) -> None:
        gate = gates.get(change.table)
        admitted = list(gate.admit(change)) if gate is not None else [change]
        if not admitted:
            self.stats.dropped_by_handoff += 1
            return
        kept = [c for c in admitted if not (self.events and self.events.should_ignore_row(c))]
        self.stats.ignored_by_filter += len(admitted) - len(kept)
        if kept:
            sink.write_rows(kept)
            self.stats.binlog_rows += len(kept)

    def _ddl(self, ddl: DdlEvent, sink: Sink) -> None:
        assert self._history is not None
        reason = skip_reason(ddl, self.events, self.config.supported_ddl)
        if reason is not None:
            if reason != IGNORED_BY_EVENT_FILTER:
                self.log.warning(reason)
            self.stats.ddl_skipped += 1
        else:
            sink.apply_ddl(ddl)
            self.stats.ddl_applied += 1
        self._history.apply(ddl)

    def _tables_after(self, tables: list[TableName], ddl: DdlEvent) -> list[TableName]:
        assert self._history is not None
        current = set(self._history.tables_at(ddl.position))
        return [t for t in current if self.filter.matches(t.schema, t.table)] or tables

    def _checkpoint(self, sink: Sink, tables: list[TableName], resolved: Position) -> None:
        """Everything handed to the sink before `resolved` is durable once flush returns."""
        sink.flush()
        self.checkpoints.save(tables, resolved)
        self.stats.checkpoint = resolved
