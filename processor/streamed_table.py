"""One table's part of its capture's shared binlog stream (``processor/shared_stream.py``).

The stream's reader thread hands the table every event that concerns it;
the table decides what of it goes to the sink:

    row change at p    p <= floor ..................... dropped (the table starts after it;
                                                        across a failover: its GTID in the
                                                        floor's set, ``Position.within``)
                       hand-off gate (snapshot) ....... dropped, a half of it, or delivered
                       event filter ................... ignored rows dropped
                       column rules ................... excluded columns dropped, masked ones
                                                        masked (cdc.filter.column_plan); the
                                                        sink writes by ``sink_schema``
    DDL at d           the table's schema changes here (the owner applied the DDL downstream
                       before the barrier let it through) and its column rules are checked
                       against it (a refused plan fails the table); chunks read at or after d (or
                       never read) ──► the table leaves the stream to read them again
                       (docs/ddl-during-snapshot.md)
    resolved at p      a chunk left pending by a DDL the binlog never showed fails closed

Its checkpoint is not kept here: every event up to the reader's boundary has
been handed to the sink, so the table's position is ``max(floor, boundary)``
and costs nothing per transaction. Nor is it written for each table at each
report: while the table streams, its record names the reader and the reader's
one progress key carries it (``cdc/changefeed/stream_progress.py``); the
``record_*`` fields say what the last record written for it holds.

The pipeline thread that joined the table waits on ``ended`` for the reader
to say how it left: a stop (``stopped``), a DDL that makes chunks to read
again (``reread_from``), or an error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from cdc.filter.column_plan import ColumnPlan, plan_columns
from cdc.filter.columns import TableColumnRules
from cdc.filter.event_filter import EventFilter
from cdc.logs import ContextLogger
from cdc.metrics import TableMetrics
from cdc.model.events import DdlEvent, RowChange
from cdc.model.gtid import Flavor
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.ddl import apply_ddl
from processor.handoff import HandoffGate
from processor.table_records import RecordWriter

__all__ = ["StreamedTable"]


class StreamedTable:
    """What the reader needs of one table, and how the table left the stream.

    ``floor``: the table's start (its checkpoint, or the snapshot's hand-off
    start); events at or before it are not the table's any more. Raised when
    the table moves from a catch-up reader to the main one.
    """

    def __init__(
        self,
        name: TableName,
        schema: TableSchema | None,
        gate: HandoffGate | None,
        *,
        floor: Position | None,
        records: RecordWriter,
        metrics: TableMetrics,
        events: EventFilter,
        flavor: Flavor,
        case_sensitive: bool,
        log: ContextLogger,
        wake: threading.Event | None = None,
        columns: TableColumnRules | None = None,
    ) -> None:
        self.name = name
        self.schema = schema
        self._columns = columns
        self.plan: ColumnPlan | None = (
            None if columns is None or schema is None else plan_columns(columns, schema)
        )
        """What the sink gets of the table's rows under its column rules (None: all)."""
        self.gate = gate
        self.floor = floor
        self.records = records
        self.metrics = metrics
        self.log = log
        self._events = events if events else None
        self._flavor = flavor
        self._case_sensitive = case_sensitive
        self.snapshot_at: Position | None = None
        self.pending_until: Position | None = None
        self.reported: Position | None = None
        self.reported_schema = schema
        """The schema at ``reported`` (a DDL followed since may have changed ``schema``)."""
        self.record_reader: str | None = None
        self.record_checkpoint: Position | None = None
        self.record_revision = -1
        self.record_due = False
        """A record must be written at the next report (a DDL gave the table a new schema)."""
        self.ended = threading.Event()
        self._wake = wake
        self.error: BaseException | None = None
        self.reread_from: Position | None = None
        self.stopped_at: Position | None = None
        self.rows = 0
        self._last_covered: tuple[Position | None, bool] = (None, False)

    # --- events (the reader's thread) ------------------------------------------------------

    def admit(self, change: RowChange, out: list[RowChange]) -> None:
        """Appends to ``out`` what of ``change`` goes to the sink."""
        floor = self.floor
        if floor is not None and (
            change.position.key() <= floor.key()
            or (change.position.gen != floor.gen and self._covered(change.position, floor))
        ):
            return
        gate = self.gate
        admitted: Iterable[RowChange] = gate.admit(change) if gate is not None else (change,)
        events, plan = self._events, self.plan
        for kept in admitted:
            if events is None or not events.should_ignore_row(kept):
                out.append(kept if plan is None else plan.change(kept))
                self.rows += 1

    def ddl(self, ddl: DdlEvent) -> bool:
        """Follows a DDL naming this table (or its schema); True when chunks must be read
        again: the table leaves the stream with ``reread_from`` set."""
        if self.floor is not None and ddl.position.within(self.floor):
            return False
        if not self._own_ddl(ddl):
            # Renamed or dropped: no row of the table comes under this name any more, so
            # no chunk waits for one (the owner ends this table).
            self.gate = None
            return False
        gate = self.gate
        if gate is None or not self.named_by(ddl.tables):
            return False
        stale = gate.invalidated_by(ddl.position)
        if not stale:
            return False
        self.log.info(
            "%s at %s came before %d chunk(s) were read (validly): reading them again with "
            "the new schema",
            ddl.kind.value,
            ddl.position,
            len(stale),
        )
        self.reread_from = ddl.position
        return True

    def resolved(self, position: Position) -> None:
        """The reader stands at ``position``; a gate past its last chunk is dropped."""
        gate = self.gate
        if gate is None:
            return
        gate.check_pending(position)
        if gate.end is not None and position.key() > gate.end.key():
            self.gate = None

    def needs_resolved(self) -> bool:
        return self.gate is not None

    @property
    def streaming(self) -> bool:
        """Whether the table only streams (no hand-off gate, no chunk waiting for a DDL): its
        record then changes only with the reader's progress, and may name the reader."""
        return self.gate is None and self.pending_until is None

    def record_stale(self, reader: str) -> bool:
        """Whether the table's record must be written at a report of ``reader``."""
        return (
            not self.streaming
            or self.record_due
            or self.record_reader != reader
            or self.record_revision != self.records.guard.revision
        )

    def position(self, boundary: Position | None) -> Position | None:
        """The table's checkpoint when every event up to ``boundary`` is in the sink.

        Across a failover (a floor read on the earlier source, ``Position.gen``) the
        GTID sets decide: while the reader re-reads transactions the floor holds, the
        floor stays the checkpoint; once the reader holds all of them (the same set
        included: one place, named on each server), the floor moves up to the boundary,
        so rows compare by position again (no GTID set per row) and the owner sees the
        table on the new server (a barrier limit read there compares with it). Sets
        neither holding the other (transactions in another order on the new server)
        keep the floor: re-read at worst, never skipped."""
        floor = self.floor
        if boundary is None or floor is None:
            return floor if boundary is None else boundary
        if floor.gen == boundary.gen:
            return floor if boundary.key() <= floor.key() else boundary
        if not floor.within(boundary):
            return floor
        self.floor = boundary
        return boundary

    def _covered(self, position: Position, floor: Position) -> bool:
        """Whether a row read on a later source than ``floor`` (after a failover) is of a
        transaction the floor holds; the rows of a transaction share their position."""
        last, covered = self._last_covered
        if position is not last:
            covered = position.within(floor)
            self._last_covered = (position, covered)
        return covered

    def named_by(self, tables: Iterable[object]) -> bool:
        """Whether ``tables`` (a DDL's: statements naming none, such as ANALYZE, OPTIMIZE,
        GRANT or CREATE TRIGGER, change no row a chunk read) name this one."""
        names = {str(t) for t in tables}
        if self._case_sensitive:
            return str(self.name) in names
        return str(self.name).lower() in {n.lower() for n in names}

    def _own_ddl(self, ddl: DdlEvent) -> bool:
        """Applies a DDL of this table to its schema; False when the table is gone.

        Without a schema (the table was gone before its snapshot began) only a DDL
        that creates the table again gives it one.
        """
        known = {self.name: self.schema} if self.schema is not None else {}
        after = apply_ddl(known, ddl, flavor=self._flavor)
        schema = after.get(self.name)
        if schema is None:
            self.log.info(
                "%s at %s: the table is gone under this name", ddl.kind.value, ddl.position
            )
            return False
        if schema != self.schema:
            self.log.info("schema v%d after %s at %s", schema.version, ddl.kind.value, ddl.position)
            if self._columns is not None:
                # raises ColumnRuleError: the table fails at the DDL, nothing after it sent
                self.plan = plan_columns(self._columns, schema, before=self.plan)
        self.schema = schema
        return True

    @property
    def sink_schema(self) -> TableSchema | None:
        """The schema the sink writes the table's rows by: without its excluded columns."""
        return self.schema if self.plan is None else self.plan.out

    # --- leaving ---------------------------------------------------------------------------

    def end(
        self, *, error: BaseException | None = None, stopped_at: Position | None = None
    ) -> None:
        """The table left the stream; its pipeline thread wakes."""
        if self.ended.is_set():
            return
        self.error = error
        self.stopped_at = stopped_at
        self.ended.set()
        if self._wake is not None:
            self._wake.set()
