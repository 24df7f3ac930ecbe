"""One changefeed's binlog on one capture: one reader, one sink, every table it holds.

    source ══ Binlog Dump ══► main reader ──┐ rows of held tables only (the table map of
                                            │ any other table is refused undecoded)
    source ══ Binlog Dump ══► catch-up ─────┤ tables that joined behind the main reader
              (at most one)    reader       │
                                            ▼
                      StreamedTable per table: floor, hand-off gate, event filter, schema
                                            │ rows, in binlog order, batched across tables
                                            ▼
                 one sink (worker-count lanes + 1 DDL connection), shared by both readers
                                            │ every checkpoint-interval, at a transaction
                                            ▼ boundary: a boundary b whose rows are durable,
                 then the records that changed (BATCH per etcd transaction), then the
                 reader's progress key: a streaming table's checkpoint = max(its
                 record's, b) (stream_progress)

Joining. A table joins at its start position s (its checkpoint, or its
snapshot's hand-off start). If the main reader has not passed s, the main
reader takes it at its next transaction boundary and drops the table's events
up to s (its ``floor``). Otherwise it goes to the catch-up reader (started at
s, or taken by a running one that has not passed s; else it waits for the next
one). The others never read the stream again for it.

Merging. A catch-up reader that reaches the main reader's boundary asks it to
pause; the main reader stops at its next boundary b (not reading, so its
position stands still), the catch-up reads on to a boundary c >= b, hands its
tables over with floor c and ends. Between b and c the main reader's events of
those tables are dropped by the floor, after c they are delivered: nothing is
missed or delivered twice. Flink CDC instead stops its one reader to backfill
newly added tables, so every table waits; TiCDC before its new architecture
gave each table its own puller, which is what this replaces (a dump thread
and a decode per table).

Transaction boundaries. A reader holds ``busy`` from the first event of a
transaction to its commit (rows come out of the puller at commit, so this is
a short, in-memory hold). Everything that changes a table's membership or
reads its position happens under ``busy`` at a boundary: a table that stops
flushes the sink and reports exactly the position up to which its rows are
durable, and no row of it is handed in after it left.

Reports without a stall. The reader notes, at each boundary, the sink's mark of
what it has handed in (``Sink.written_mark``). A report due by the interval names
the newest boundary whose mark the sink has written (``durable_mark``), without
waiting: flushing at every report stopped the reader while the downstream emptied
its queue, about a tenth of a 1M-row catch-up (docs/data-path.md). It falls back
to a flush and the current boundary whenever a record must change (a table joined,
followed a DDL, is in its hand-off, moved), at the barrier, when the sink cannot
tell, and when nothing noted is durable yet; a table leaving, a caught-up reader
and a hand-back flush as before.

Barrier. Every event waits while it lies beyond the changefeed's barrier; a
reader stalled there flushes and reports its tables at the barrier's limit
(everything up to it is delivered: the held event is beyond it).

Failures. A table's own failure (a hand-off gate, a DDL it cannot follow)
ends that table only, after a flush. A reader's failure (the source, a purged
start) ends its tables. A sink failure ends every table of the stream, which
is then discarded: the processor opens a new one for the tables it restarts.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from cdc.binlog.decode_pool import DecodePool
from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.changefeed import BarrierKind, TableState
from cdc.changefeed.stream_progress import StreamProgress
from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import get_logger
from cdc.model.events import DdlEvent, RowChange
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import Sink, SinkError
from cdc.sink.factory import open_sink
from cdc.source.flavor import ServerInfo
from cdc.store import EtcdStore, StoreError
from processor.barrier_view import BarrierView
from processor.streamed_table import StreamedTable
from processor.table_records import TableLost, TaskMovedOn, write_running

__all__ = ["MERGE_WAIT", "Noted", "SharedStream", "StreamOptions"]

#: Boundaries a reader keeps noted between reports (the oldest go first: a report
#: names the newest durable one).
NOTED = 65_536
#: Seconds the main reader waits, paused, for a catch-up reader to reach it.
MERGE_WAIT = 2.0
#: Seconds a write waits for the capture's lease to be known alive again.
LEASE_WAIT = 5.0
#: Seconds a check of the source made as a table started answers for the tables
#: starting after it.
SOURCE_CHECK_FRESH = 1.0
#: Seconds a reader starting at a GTID set waits for the tables starting with it.
GATHER = 0.5


class Noted(NamedTuple):
    """A reader's boundary, the sink's mark once every row before it was handed in, and
    the source's time there (one per transaction: a tuple is cheaper to build than a
    frozen dataclass)."""

    mark: int | None
    boundary: Position
    source_time: float | None


@dataclass(frozen=True)
class StreamOptions:
    """How often tables report. A streaming table's checkpoint travels in its reader's
    progress key every ``checkpoint_interval``; its own record is written again at least
    every ``record_refresh`` seconds (spread evenly), so that a table restarted after a
    capture's death re-reads at most that much of the binlog."""

    checkpoint_interval: float = 1.0
    record_refresh: float = 30.0


class _Held:
    """The tables a reader holds, keyed as the changefeed compares names; also the
    puller's ``TableMatcher``: a table map of any other table is not even decoded."""

    def __init__(self, case_sensitive: bool) -> None:
        self._fold = (lambda s: s) if case_sensitive else str.lower
        self.tables: dict[tuple[str, str], StreamedTable] = {}
        self.exact: dict[TableName, StreamedTable] = {}
        """The same tables by the names rows carry, filled as rows come: the lookup every
        row makes, without folding."""
        self.gated: dict[tuple[str, str], StreamedTable] = {}
        """The tables whose hand-off gate still looks at each resolved position."""
        self._last: tuple[TableName | None, StreamedTable | None] = (None, None)
        """The last name looked up and its table: the rows of a transaction share their
        name object, and hashing a name is a Python call per row."""

    def key(self, name: TableName) -> tuple[str, str]:
        return (self._fold(name.schema), self._fold(name.table))

    def get(self, name: TableName) -> StreamedTable | None:
        last, found = self._last
        if name is last:
            return found
        state = self.exact.get(name)
        if state is None:
            state = self.tables.get((self._fold(name.schema), self._fold(name.table)))
            if state is not None:
                self.exact[name] = state
        self._last = (name, state)
        return state

    def add(self, state: StreamedTable) -> None:
        self._last = (None, None)
        key = self.key(state.name)
        self.tables[key] = state
        if state.needs_resolved():
            self.gated[key] = state

    def remove(self, state: StreamedTable) -> None:
        self._last = (None, None)
        key = self.key(state.name)
        if self.tables.get(key) is state:
            del self.tables[key]
            self.gated.pop(key, None)
            self.exact = {n: s for n, s in self.exact.items() if s is not state}

    def clear(self) -> list[StreamedTable]:
        self._last = (None, None)
        states = list(self.tables.values())
        self.tables.clear()
        self.gated.clear()
        self.exact = {}
        return states

    def in_schema(self, schema: str) -> list[StreamedTable]:
        folded = self._fold(schema)
        return [s for (sch, _), s in self.tables.items() if sch == folded]

    def matches(self, schema: str, table: str) -> bool:
        return (self._fold(schema), self._fold(table)) in self.tables

    def matches_schema(self, schema: str) -> bool:
        folded = self._fold(schema)
        return any(sch == folded for sch, _ in list(self.tables))


def _behind(state: StreamedTable, boundary: Position | None) -> bool:
    """Whether the table's last record lies before its position at ``boundary``."""
    position = state.position(boundary)
    recorded = state.record_checkpoint
    return position is not None and (recorded is None or recorded.key() < position.key())


def _start_key(start: Position | GtidSet) -> tuple[int, tuple[object, ...]]:
    """Sorts positions by their place in the binlog, GTID sets (no place) after them."""
    return (0, start.key()) if isinstance(start, Position) else (1, ())


def _position(point: Position | GtidSet) -> Position | None:
    return point if isinstance(point, Position) else None


def _later(a: Position | None, b: Position | None) -> Position | None:
    if a is None or b is None:
        return a or b
    return a if a.key() >= b.key() else b


class SharedStream:
    """See the module docstring. ``join`` and ``leave`` are called from the tables'
    pipeline threads; everything else runs on the readers' threads."""

    def __init__(
        self,
        store: EtcdStore,
        config: ChangefeedConfig,
        barrier: BarrierView,
        alive: Callable[[], bool],
        options: StreamOptions | None = None,
        *,
        capture_id: str,
    ) -> None:
        self.store = store
        self.capture_id = capture_id
        self.config = config
        self.barrier = barrier
        self.alive = alive
        self.options = options or StreamOptions()
        self.log = get_logger(__name__, changefeed=config.changefeed_id)
        self.cond = threading.Condition()
        self.main: _Reader | None = None
        self.catchup: _Reader | None = None
        self.waiting: list[tuple[StreamedTable, Position | GtidSet]] = []
        self.where: dict[StreamedTable, _Reader] = {}
        self.failure: BaseException | None = None
        self.readers_opened = 0
        self._check_lock = threading.Lock()
        #: When the last check of the source began, and its answer.
        self._checked: tuple[float, ServerInfo] | None = None
        self.incarnation = uuid.uuid4().hex[:8]
        """Names this stream's readers apart from those of earlier streams and processes."""
        self.merges = 0
        self._sink: Sink | None = None
        self._sink_lock = threading.Lock()
        self._pool: DecodePool | None = None
        self._closed = False

    # --- the sink --------------------------------------------------------------------------

    def _schema_of(self, table: TableName) -> TableSchema:
        for reader in (self.main, self.catchup):
            state = reader.held.get(table) if reader is not None else None
            if state is not None and state.sink_schema is not None:
                return state.sink_schema
        raise LookupError(f"no table {table} is held by the changefeed's stream on this capture")

    def _open_sink(self) -> None:
        with self._sink_lock:
            if self._sink is None:
                self._sink = open_sink(
                    self.config.sink_uri,
                    self._schema_of,
                    self.config.changefeed_id,
                    writable=self.alive,
                )

    def checked_source(self, check: Callable[[], ServerInfo]) -> ServerInfo:
        """The source's settings and identity for a table starting now: ``check()``'s
        answer, or the one a table starting less than ``SOURCE_CHECK_FRESH`` seconds
        before got (timed from before its check began).

        Each of 10,000 tables starting on three captures checked the binlog settings
        and which server the URI reaches (its own connection, half a dozen queries,
        two etcd reads): what the source saw followed the number of tables. An answer
        a second old is no staler than the one the tables started a second ago stream
        on; a source that changes since is for the stream's readers and the owner's
        failover to meet, as it is for those.
        """
        with self._check_lock:
            fresh = self._checked
        if fresh is not None and time.monotonic() - fresh[0] < SOURCE_CHECK_FRESH:
            return fresh[1]
        asked = time.monotonic()
        info = check()
        with self._check_lock:
            if self._checked is None or self._checked[0] < asked:
                self._checked = (asked, info)
        return info

    def _proven(self) -> None:
        """Returns once the capture's lease is known alive; ``TableLost`` if it is not
        within ``LEASE_WAIT`` seconds.

        Under load the answer to the lease clock's last question can be late, and the
        proof lapses for a moment while the lease lives on: failing the reader then
        (every table it holds starting again) added load where there was too much
        already. Nothing is written meanwhile; a lease truly lost suspends the
        processor, which aborts the tables.
        """
        deadline = time.monotonic() + LEASE_WAIT
        while not self.alive():
            if time.monotonic() >= deadline:
                raise TableLost("the capture's lease is not known to be alive: writing nothing")
            time.sleep(0.05)

    def write(self, rows: list[RowChange]) -> int | None:
        """Hands ``rows`` to the sink; the sink's mark after them (``Sink.written_mark``)."""
        self._proven()
        with self._sink_lock:
            assert self._sink is not None
            self._sink.write_rows(rows)
            return self._sink.written_mark()

    def durable_mark(self) -> int | None:
        """The sink's newest durable mark; read without the sink lock, which a reader
        waiting for room in the sink's queue holds."""
        sink = self._sink
        return None if sink is None else sink.durable_mark()

    def flush(self) -> None:
        self._proven()
        with self._sink_lock:
            assert self._sink is not None
            self._sink.flush()

    def decode_pool(self) -> DecodePool | None:
        """The stream's decode processes, shared by its readers (started with the first);
        None when the changefeed decodes in the reader's thread (``mounter.worker-num`` 0 or
        unset, the default: docs/data-path.md, "When workers pay")."""
        with self._sink_lock:
            if self._pool is None:
                workers = self.config.decode_workers or 0
                if workers > 0:
                    self._pool = DecodePool(workers)
            return self._pool

    # --- joining and leaving (pipeline threads) ---------------------------------------------

    @property
    def usable(self) -> bool:
        """False once the stream failed or closed: the processor opens a new one."""
        return self.failure is None and not self._closed

    def join(self, state: StreamedTable, start: Position | GtidSet, server: ServerInfo) -> None:
        """Hands ``state`` to a reader (see the module docstring); returns at once.

        Opens the sink on the first join (a ``SinkError`` comes back to the caller)."""
        self._open_sink()
        with self.cond:
            if self.failure is not None:
                raise self.failure
            self._route(state, start, server)

    def _route(self, state: StreamedTable, start: Position | GtidSet, server: ServerInfo) -> None:
        """Under ``cond``: the reader that takes ``state`` from ``start``."""
        for reader in (self.main, self.catchup):
            if reader is not None and reader.can_take(start):
                reader.joining.append(state)
                self.where[state] = reader
                return
        if self.main is None:
            self.main = self._new_reader("main", start, server, [state])
        elif self.catchup is None:
            self.catchup = self._new_reader("catch-up", start, server, [state])
        else:
            self.waiting.append((state, start))
            # The catch-up reader has passed the table's start: it hands its tables
            # back at its next boundary, and they and the waiting ones go to a new
            # catch-up reader from the lowest start (see ``_Reader._hand_back``).
            if isinstance(start, Position):
                self.catchup.restart_wanted = True

    def _new_reader(
        self, role: str, start: Position | GtidSet, server: ServerInfo, states: list[StreamedTable]
    ) -> _Reader:
        reader = _Reader(self, role, start, server)
        for state in states:
            reader.joining.append(state)
            self.where[state] = reader
        self.readers_opened += 1
        self.log.info(
            "opening %s reader %s from %s for %s",
            role,
            reader.id,
            start,
            ", ".join(str(s.name) for s in states),
        )
        reader.start()
        return reader

    def leave(self, state: StreamedTable, *, report: bool) -> None:
        """Takes ``state`` out at a transaction boundary; with ``report`` after a flush, so
        that ``state.stopped_at`` is a position up to which its rows are durable."""
        while True:
            with self.cond:
                if state.ended.is_set():
                    return
                reader = self.where.get(state)
                if reader is None:
                    self.waiting = [(s, p) for s, p in self.waiting if s is not state]
                    state.end(stopped_at=state.floor)
                    return
                if state in reader.joining:
                    reader.joining.remove(state)
                    del self.where[state]
                    state.end(stopped_at=state.floor)
                    return
            with reader.busy:
                with self.cond:
                    if self.where.get(state) is not reader:
                        continue
                    reader.held.remove(state)
                    del self.where[state]
                try:
                    if report:
                        self.flush()
                    self.detach(reader, state)
                except BaseException as exc:  # the table reports it
                    state.end(error=exc)
                    return
                state.end(stopped_at=state.position(reader.boundary))
                return

    # --- readers (their threads) ------------------------------------------------------------

    def reader_done(self, reader: _Reader) -> bool:
        """Under ``cond``: whether an empty reader may end; if so the stream forgets it and
        starts the next catch-up reader for the tables waiting."""
        if reader.held.tables or reader.joining:
            return False
        if self.main is reader:
            self.main, self.catchup = self.catchup, None
            if self.main is not None:
                self.main.role = "main"
        elif self.catchup is reader:
            self.catchup = None
        self._start_waiting(reader.server)
        return True

    def _start_waiting(self, server: ServerInfo) -> None:
        """Under ``cond``: the waiting tables to readers, lowest start first (so that a new
        catch-up reader starts where every one of them can join it)."""
        if not self.waiting or self._closed:
            return
        waiting, self.waiting = self.waiting, []
        waiting.sort(key=lambda item: _start_key(item[1]))
        for state, start in waiting:
            self._route(state, start, server)

    def _detach_all(self) -> tuple[list[_Reader], list[StreamedTable]]:
        """Under ``cond``: every reader ends; them, and every table they held or were to
        take, or that waited."""
        readers = [r for r in (self.main, self.catchup) if r is not None]
        states = [s for s, _ in self.waiting]
        self.waiting = []
        for reader in readers:
            states += reader.detach()
        self.main = self.catchup = None
        self.cond.notify_all()
        return readers, states

    def fail(self, error: BaseException) -> None:
        """The sink failed: every table of the stream ends with ``error``."""
        with self.cond:
            if self.failure is None:
                self.failure = error
                self.log.error("stream failed, its tables end: %s", error)
            readers, states = self._detach_all()
        for reader in readers:
            reader.close()
        for state in states:
            state.end(error=error)

    def close(self) -> None:
        """Ends the readers and closes the sink. The processor stops or aborts the tables
        first; one still here (its pipeline did not end in time) ends with an error."""
        with self.cond:
            self._closed = True
            readers, states = self._detach_all()
        for state in states:
            state.end(error=RuntimeError("the changefeed's stream on this capture was closed"))
        for reader in readers:
            reader.close()
        for reader in readers:
            reader.join(30)
        with self._sink_lock:
            if self._sink is not None:
                self._sink.close()
                self._sink = None
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def report(self, reader: _Reader, durable: Noted | None = None) -> bool:
        """Under the reader's ``busy``: flushes; writes the records that must change (a
        table that joined this reader, followed a DDL, is in its snapshot's hand-off, or
        whose task revision moved; and a few stale ones); then, once they are written,
        the reader's progress key at its boundary, which carries every other table. A
        table whose task moved on leaves (``TaskMovedOn``).

        ``durable``: a boundary whose rows the sink has written; reported without a
        flush, and only when no record must change and the reader is not at the
        barrier (False: nothing was written, flush and report instead)."""
        states = list(reader.held.tables.values())
        if not states:
            return True
        if durable is None:
            with states[0].metrics.flush():
                self.flush()
        stale = [s for s in states if s.record_stale(reader.id)]
        if durable is None:
            boundary, source_time = reader.boundary, reader.source_time
        else:
            if stale or self._at_barrier(reader.boundary):
                return False
            self._proven()
            boundary, source_time = durable.boundary, durable.source_time
        chosen = {id(s) for s in stale}
        if self._at_barrier(boundary):
            # The owner applies a DDL (or finishes) only once the tables' records, not
            # only this progress, reach its limit: a table restarted from a record before
            # a DDL already downstream would write rows of the old shape after it.
            write = [s for s in states if id(s) in chosen or _behind(s, boundary)]
            chosen = {id(s) for s in write}
        else:
            write = stale
        write += reader.to_refresh([s for s in states if id(s) not in chosen], self.options)
        reports = []
        for state in write:
            revision, record = state.records.record(
                TableState.RUNNING,
                state.position(boundary),
                state.schema,
                snapshot_at=state.snapshot_at,
                pending_until=state.pending_until,
                reader=reader.id if state.streaming else None,
            )
            reports.append((state.records, revision, record))
        lost_writers, last = write_running(self.store, reports)
        refused = {id(w) for w in lost_writers}
        #: each refused table's writer: the task revision etcd refused its record at
        lost = {id(w): revision for w, revision, _ in reports if id(w) in refused}
        reader.records_through = max(reader.records_through, last)
        for state, (_, revision, record) in zip(write, reports, strict=True):
            if id(state.records) not in lost:
                state.record_reader = record.reader
                state.record_checkpoint = record.checkpoint
                state.record_revision = revision
                state.record_due = False
        carried = False
        for state in states:
            if id(state.records) in lost:
                reader.held.remove(state)
                with self.cond:
                    self.where.pop(state, None)
                state.end(error=TaskMovedOn(state.records.task_key, lost[id(state.records)]))
                continue
            position = state.position(boundary)
            state.reported = position
            state.reported_schema = state.schema
            carried = carried or state.record_reader == reader.id
            state.metrics.resolved(source_time)
            state.metrics.checkpoint(position)
        for state in list(reader.undetached):
            self.detach(reader, state)  # raises while it cannot: no progress without it
        if carried and boundary is not None and boundary != reader.progress_written:
            progress = StreamProgress(boundary, reader.records_through)
            self.store.put(reader.progress_key, progress.to_dict())
            reader.progress_written = boundary
        return True

    def _at_barrier(self, boundary: Position | None) -> bool:
        """Whether ``boundary`` stands at a DDL's (or the target's) limit or past it."""
        barrier = self.barrier.barrier
        return (
            barrier is not None
            and barrier.kind is not BarrierKind.RESOLVED
            and boundary is not None
            and boundary.key() >= barrier.limit.key()
        )

    def detach(self, reader: _Reader, state: StreamedTable) -> None:
        """Under the reader's ``busy``, as ``state`` leaves it: a record naming the reader is
        written again without it (at the last reported position), before the reader's
        progress moves on without the table. A write that fails (or may have landed
        unseen) is kept: the reader writes no progress until it is written again
        (``report``), since that progress would carry the table where it never went."""
        if state.record_reader is None or state.reported is None:
            return
        revision, record = state.records.record(
            TableState.RUNNING,
            state.reported,
            state.reported_schema,
            snapshot_at=state.snapshot_at,
            pending_until=state.pending_until,
        )
        try:
            written = state.records.put(revision, record)
        except TableLost:
            # The owner moved the task: it no longer carries the table with this reader.
            state.record_reader = None
            return
        except BaseException:
            if state not in reader.undetached:
                reader.undetached.append(state)
            raise
        reader.records_through = max(reader.records_through, written)
        state.record_reader = None
        if state in reader.undetached:
            reader.undetached.remove(state)


class _Reader:
    """One binlog dump of the stream and the tables it holds (see the module docstring)."""

    def __init__(
        self, stream: SharedStream, role: str, start: Position | GtidSet, server: ServerInfo
    ) -> None:
        self.stream = stream
        self.role = role
        self.server = server
        self.id = f"{stream.incarnation}.{stream.readers_opened + 1}"
        self.progress_key = stream.store.keys.stream_progress(
            stream.config.changefeed_id, stream.capture_id, self.id
        )
        self.progress_written: Position | None = None
        self.records_through = 0
        self.undetached: list[StreamedTable] = []
        """Tables that left with a record still naming this reader (its write failed)."""
        self.started_at = start
        self.reading = False
        """Set (under the stream's ``cond``) once the reader may read: from then on only
        tables starting at a position it has not passed join it."""
        self._refresh_next = 0
        self.held = _Held(stream.config.case_sensitive)
        self.joining: list[StreamedTable] = []
        self.boundary: Position | None = start if isinstance(start, Position) else None
        self.busy = threading.Lock()
        self.batch: list[RowChange] = []
        self.paused_at: Position | None = None
        self.merge_wanted = False
        self.restart_wanted = False
        """Set (under the stream's ``cond``) when a table waits that this catch-up reader
        has passed: it hands its tables back at its next boundary and ends."""
        self.log = stream.log.bind(reader=role)
        self.source_time: float | None = None
        self._closing = False
        self._last_report = time.monotonic()
        self._reported: Position | None = None
        """The boundary of the last report."""
        self._mark: int | None = 0
        """The sink's mark after this reader's last write (0: nothing written yet)."""
        self._noted: deque[Noted] = deque(maxlen=NOTED)
        """Boundaries since the last report, oldest first, each with the mark it needs."""
        self.puller = Puller(
            PullerConfig(
                source=stream.config.source_uri,
                server=server,
                start=start,
                tables=self.held,
                decode=stream.decode_pool(),
            )
        )
        self._thread = threading.Thread(target=self._main, name=f"binlog-{role}", daemon=True)

    def start(self) -> None:
        self.log.info("binlog reader starts at %s", self.puller.committed)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def close(self) -> None:
        self._closing = True
        try:
            self.puller.close()
        except Exception as exc:  # a broken stream may fail to close
            self.log.debug("closing the puller: %s", exc)

    def can_take(self, start: Position | GtidSet) -> bool:
        """Whether a table starting at ``start`` can join here: this reader has not passed
        it, nor has its reading thread (read-ahead: a table joins where that stands).

        A GTID set has no place to compare with: a table starting at one joins only a
        reader that starts at the same set and reads nothing before it took it."""
        if self._closing:
            return False
        if isinstance(start, GtidSet):
            return not self.reading and self.started_at == start
        boundary = _later(self.boundary, _position(self.puller.read_position))
        return boundary is not None and start.key() >= boundary.key()

    # --- the loop ---------------------------------------------------------------------------

    def _gather(self) -> None:
        """Before the first event: a reader that starts at a GTID set gives the tables
        starting there with it (a changefeed's tables start at once) a moment to join,
        then reads; any joining later goes elsewhere (``can_take``)."""
        stream = self.stream
        deadline = time.monotonic() + (GATHER if isinstance(self.started_at, GtidSet) else 0.0)
        with stream.cond:
            while not self._closing and (left := deadline - time.monotonic()) > 0:
                stream.cond.wait(left)
            self.reading = True

    def _main(self) -> None:
        holding = False
        batch = self.batch
        try:
            self._gather()
            if self._at_boundary():
                return
            for event in self._read():
                if not holding:
                    allowed = self.stream.barrier.allows(event.position)
                    if not allowed and not self._stall(event.position):
                        return
                    self.busy.acquire()
                    holding = True
                if type(event) is RowChange:
                    state = self.held.get(event.table)
                    if state is not None:
                        try:
                            state.admit(event, batch)
                        except Exception as exc:  # the table reports it
                            self._fail_table(state, exc)
                    continue
                self._write()
                if isinstance(event, DdlEvent):
                    self._ddl(event)
                else:
                    self.source_time = event.source_time
                    for key, state in list(self.held.gated.items()):
                        self._guarded(state, state.resolved, event.position)
                        if not state.needs_resolved():
                            self.held.gated.pop(key, None)
                self.boundary = event.position
                self._note(event.position)
                holding = False
                self.busy.release()
                if self._at_boundary(report=self._caught_up(event)):
                    return
        except BaseException as exc:  # every table of the reader reports it
            self._fail(exc)
        finally:
            if holding:
                self.busy.release()
            self.close()
            self._forget_progress()

    def _forget_progress(self) -> None:
        """The reader's progress key goes with it: the tables it carried keep their
        records' checkpoints (written again where they went)."""
        if self.progress_written is None:
            return
        try:
            self.stream.store.delete(self.progress_key)
        except StoreError as exc:
            self.log.warning("could not remove %s: %s", self.progress_key, exc)

    def to_refresh(self, fresh: list[StreamedTable], options: StreamOptions) -> list[StreamedTable]:
        """The next of ``fresh`` (tables whose records need no change) to write again, round
        robin, so that each one's record is rewritten about every ``record_refresh``."""
        if not fresh:
            return []
        count = min(
            len(fresh),
            math.ceil(len(fresh) * options.checkpoint_interval / options.record_refresh),
        )
        first = self._refresh_next % len(fresh)
        self._refresh_next = first + count
        chosen = fresh[first : first + count]
        return chosen + fresh[: count - len(chosen)]

    def _read(self) -> Iterator[RowChange | DdlEvent | Resolved]:
        """The puller's events; a read that fails because the reader was closed ends them."""
        try:
            yield from self.puller.events()
        except Exception:
            if not self._closing:
                raise

    def _guarded(self, state: StreamedTable, call: Callable[..., Any], *args: Any) -> Any:
        """Runs a table's own step; its failure ends that table only (after a flush)."""
        try:
            return call(*args)
        except Exception as exc:  # the table reports it
            self._fail_table(state, exc)
            return None

    def _fail_table(self, state: StreamedTable, error: Exception) -> None:
        self.log.error("table %s leaves the stream: %s", state.name, error)
        self._leave(state, error=error)

    def _leave(self, state: StreamedTable, *, error: BaseException | None = None) -> None:
        """Under ``busy``: ``state`` leaves after a flush (its rows handed in are durable).

        A table failing inside a transaction leaves its rows of that transaction
        out (it restarts from its last report, before them); the other tables'
        rows stay in the batch, written whole at the commit.
        """
        self.held.remove(state)
        with self.stream.cond:
            self.stream.where.pop(state, None)
        self.batch[:] = [change for change in self.batch if change.table != state.name]
        self.stream.flush()
        self.stream.detach(self, state)
        state.end(error=error)

    def _write(self) -> None:
        """Hands the batch to the sink: at a transaction boundary, so one call holds whole
        transactions (a sink may take a table's position as complete once its rows are
        handed in: the file sink's per-table checkpoints)."""
        batch = self.batch
        if not batch:
            return
        self._mark = self.stream.write(batch)
        # by name object (a transaction's rows share one): hashing names is a call per row
        by_table: dict[int, list[RowChange]] = {}
        for change in batch:
            by_table.setdefault(id(change.table), []).append(change)
        for rows in by_table.values():
            state = self.held.get(rows[0].table)
            if state is not None:
                state.metrics.rows(rows)
        batch.clear()

    def _ddl(self, ddl: DdlEvent) -> None:
        if ddl.tables:
            named = {id(s): s for t in ddl.tables if (s := self.held.get(t)) is not None}
            states = list(named.values())
        else:
            states = self.held.in_schema(ddl.schema)
        for state in states:
            followed = self._guarded(state, state.ddl, ddl)
            if followed:
                self._leave(state)
            elif followed is False:
                # a new schema from here on: the record carries it (and the position)
                state.record_due = True

    # --- boundaries -------------------------------------------------------------------------

    def _caught_up(self, event: DdlEvent | Resolved) -> bool:
        """A heartbeat past the last report: the reader has read all the source has, so
        its checkpoint is reported now rather than up to a checkpoint interval later (what
        a user waits for after a backlog, or after one write to a quiet source). At most
        once per heartbeat period, and only while the binlog moves."""
        if not isinstance(event, Resolved) or not event.idle:
            return False
        return self._reported is None or event.position.key() > self._reported.key()

    def _at_boundary(self, *, report: bool = False, stalled: bool = False) -> bool:
        """Between transactions: takes joiners, reports when due, merges; True to end.

        ``stalled``: at the barrier, the puller has already read the held
        transaction (rows come out at commit), with the table maps of the tables
        held then; a table taken now would miss its rows in it. So a stalled
        reader only reports, passes on the joiners it can no longer take, and
        takes or hands over tables once it moved on.
        """
        with self.busy:
            self._adopt(stalled=stalled)
            due = time.monotonic() - self._last_report >= self.stream.options.checkpoint_interval
            if report or self.restart_wanted or (due and (stalled or not self._report_durable())):
                self.stream.report(self)
                self._last_report = time.monotonic()
                self._reported = self.boundary
                self._noted.clear()
            if self.restart_wanted and self._hand_back():
                return True
            if not stalled and self._merge():
                return True
        if not stalled:
            self._pause_for_merge()
        with self.stream.cond:
            if self._closing or self.stream.reader_done(self):
                self._closing = True
                return True
        return False

    def _note(self, boundary: Position) -> None:
        """Notes ``boundary`` with the mark it needs; boundaries without a write between
        them need the same mark, so the newer replaces the older."""
        noted = self._noted
        mark = self._mark
        if noted and noted[-1].mark == mark:
            noted.pop()
        noted.append(Noted(mark, boundary, self.source_time))

    def _report_durable(self) -> bool:
        """Under ``busy``: reports the newest noted boundary the sink has written, without
        a flush (see the module docstring); False when it cannot."""
        durable = self.stream.durable_mark()
        noted = self._noted
        newest: Noted | None = None
        while noted and durable is not None and noted[0].mark is not None:
            if noted[0].mark > durable:
                break
            newest = noted.popleft()
        if newest is None or not self.stream.report(self, newest):
            return False
        self._last_report = time.monotonic()
        self._reported = newest.boundary
        return True

    def _adopt(self, *, stalled: bool = False) -> None:
        """Under ``busy``: takes the joiners whose start this reader has not passed; the
        others go to the catch-up reader at once.

        Which tables are decoded is decided as the reading thread reads their table
        maps, ahead of this boundary when it reads ahead; so tables join only once it
        stands here (``Puller.drained``), else it is asked to stop at its next boundary
        and the joiners wait for that one. A joiner whose start the reading thread
        has passed meanwhile can never join here: it goes on at once, stalled or not
        (a reader stalled at the barrier before taking it would otherwise keep it from
        reporting, and the barrier would wait for it forever)."""
        if not self.joining:
            return
        drained = not stalled and self.puller.drained()
        frontier = _later(self.boundary, _position(self.puller.read_position))
        stream = self.stream
        with stream.cond:
            joining, self.joining = self.joining, []
            for state in joining:
                floor = state.floor
                if floor is not None and frontier is not None and floor.key() < frontier.key():
                    del stream.where[state]
                    stream._route(state, floor, self.server)
                elif drained:
                    self.held.add(state)
                else:
                    self.joining.append(state)
        if self.joining and not stalled:
            self.puller.hold()
        self.log.debug("holding %d table(s)", len(self.held.tables))

    def _hand_back(self) -> bool:
        """Catch-up reader, under ``busy``, right after a report: ends, its tables (from
        where they were reported) and its joiners going back to the stream with those
        waiting, to a new catch-up reader from the lowest start. Without this a table
        that joined behind a catch-up reader stalled at the barrier would wait for it to
        merge, and it waits for the barrier, which waits for that table."""
        stream = self.stream
        with stream.cond:
            if stream.catchup is not self or self._closing:
                self.restart_wanted = False
                return False
            boundary = self.boundary
            for state in self.held.clear():
                state.floor = state.position(boundary)
                stream.where.pop(state, None)
                stream.waiting.append((state, state.floor or boundary or self.puller.committed))
            for state in self.joining:
                stream.where.pop(state, None)
                stream.waiting.append((state, state.floor or self.puller.committed))
            moved = len(stream.waiting)
            self.joining = []
            self._closing = True
            stream.catchup = None
            stream._start_waiting(self.server)
            stream.cond.notify_all()
        self.log.info("handed %d table(s) back for a catch-up reader from further back", moved)
        return True

    def _merge(self) -> bool:
        """Catch-up reader, under ``busy``: hands its tables to a main reader paused at or
        before this boundary (True: this reader ends); asks it to pause when it is near."""
        stream = self.stream
        with stream.cond:
            main = stream.main
            if main is None or main is self or self.boundary is None:
                return False
            # A joiner still waiting here (for this reader's reading thread to stop)
            # would be left behind by the merge: it is taken or passed on first.
            if (
                main.paused_at is not None
                and self.boundary.key() >= main.paused_at.key()
                and not self.joining
            ):
                for state in list(self.held.tables.values()):
                    state.floor = _later(state.floor, self.boundary)
                    main.held.add(state)
                    stream.where[state] = main
                moved = len(self.held.clear())
                stream.merges += 1
                main.paused_at = None
                main.merge_wanted = False
                stream.catchup = None
                self._closing = True
                stream._start_waiting(self.server)
                stream.cond.notify_all()
                self.log.info(
                    "caught up at %s: %d table(s) handed to the main reader", self.boundary, moved
                )
                return True
            if main.boundary is not None and self.boundary.key() >= main.boundary.key():
                main.merge_wanted = True
        return False

    def _pause_for_merge(self) -> None:
        """Main reader, not holding ``busy``: stands still at its boundary while a catch-up
        reader that asked reads up to it, at most ``MERGE_WAIT`` seconds."""
        stream = self.stream
        with stream.cond:
            if not self.merge_wanted or stream.main is not self or stream.catchup is None:
                return
            if not self.puller.drained():
                # The tables handed over are decoded from the pause on: the reading
                # thread must stand there too (see ``_adopt``).
                self.puller.hold()
                return
            self.paused_at = self.boundary
            deadline = time.monotonic() + MERGE_WAIT
            while self.paused_at is not None and stream.catchup is not None:
                left = deadline - time.monotonic()
                if left <= 0 or self._closing:
                    break
                stream.cond.wait(left)
            self.paused_at = None
            self.merge_wanted = False

    def _stall(self, position: Position) -> bool:
        """Waits until the barrier lets ``position`` through (True) or the reader ends.

        Everything up to the barrier's limit is delivered (the event at
        ``position`` lies beyond it), so the limit is every held table's position;
        it is reported at once when the owner waits for it (a DDL or the target),
        else with the usual interval.
        """
        reported = None
        view = self.stream.barrier
        while not self._closing:
            barrier = view.barrier
            if barrier is not None and barrier.allows(position):
                return True
            limit = barrier.limit if barrier is not None else None
            waited_for = barrier is not None and barrier.kind is not BarrierKind.RESOLVED
            self.boundary = _later(self.boundary, limit)
            if self._at_boundary(report=waited_for and reported != limit, stalled=True):
                return False
            reported = limit if waited_for else reported
            view.wait(0.2)
        return False

    def detach(self) -> list[StreamedTable]:
        """Under ``cond``: the reader ends; the tables it held or was to take."""
        self._closing = True
        states = [*self.held.clear(), *self.joining]
        self.joining = []
        for state in states:
            self.stream.where.pop(state, None)
        return states

    def _fail(self, error: BaseException) -> None:
        stream = self.stream
        if isinstance(error, SinkError):
            stream.fail(error)
            return
        if not self._closing:
            self.log.error("binlog reader failed: %s", error)
        with stream.cond:
            states = self.detach()
            if stream.main is self:
                # as when a main reader ends (reader_done): the catch-up reader is the
                # main one now; a new main reader behind it would have it merge at once
                stream.main, stream.catchup = stream.catchup, None
                if stream.main is not None:
                    stream.main.role = "main"
            elif stream.catchup is self:
                stream.catchup = None
            stream._start_waiting(self.server)
            stream.cond.notify_all()
        for state in states:
            state.end(error=error)
