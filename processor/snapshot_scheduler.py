"""One queue of snapshot chunks per capture: few Spark jobs, bounded work on the source.

    table pipelines (one thread each)             the scheduler's thread(s)
    ─────────────────────────────────             ─────────────────────────
    slot.acquire(stop, wake) ─ FIFO: at most ``slots`` tables hold one (anchor, split,
      │                  chunks: each holds a source connection until its chunks are done)
    submit(TableChunks) ──► queue of tickets ──► a job: tickets in queue order that share
      │                     (FIFO, round robin)   the head's JobKey, one per table, at most
      │                                           ``per_job`` chunks of each and
      │                                           ``max_in_flight`` in all ──► run_chunks
    ticket.batches() ◄──── each table's (chunk, outcome) pairs ◄──────────┘ (two jobs at
      record done chunks, metrics, on_batch                              a time; a served
    slot.release() before the table streams its binlog                   ticket goes to
                                                                         the back)

The chunks of one job share the source, the sink, the changefeed and its event
filter (``JobKey``, what ``run_chunks`` takes once); each table's own range
clearing travels in the writer (``SinkWriter.keep_ranges``). A table has at
most ``per_job`` chunks (its ``batch_chunks``) in a job.

Two jobs at a time (``CONCURRENT_JOBS``): a job ends when its slowest task does,
and the driver then hands the outcomes over and submits the next job, so with one
job at a time every core idled at every job's end. A second job, submitted while the
first runs, waits in Spark's FIFO queue and takes each core as the first job's task
on it ends. In 1M-row snapshots on 2 cores (timed inside the workers,
docs/snapshot-copy.md) the chunk tasks were busy 80-84% of the copy with one job at a
time and 93-95% with two. A table's chunks may so be in two jobs at once and come
back in either order; each is recorded on its own. A table that stops reading its
outcomes (``Ticket.batches`` left early: a chunk met another schema, the pipeline
failed) waits until its chunks still running have come back, so none of them writes
after the table went on (``SnapshotScheduler._drain``). Jobs still run in the order
they were submitted: a task waiting on a downstream lock keeps its core, and the next
job's tasks wait for a free one, with one job at a time as with two.

The scheduler only runs chunks; the table records them (``table_snapshot.py``):
a chunk counts as done only after the table marked it done in etcd. A ticket
ends when every chunk came back, or when its chunks still queued are
withdrawn: its table was stopped (a job already running finishes and is
handed over), one of its chunks failed or met another schema (no further
chunk of that table runs, as no further batch ran), the job failed as a whole
(its tables get the exception), or the scheduler closed.

A job that is not full waits up to ``gather`` seconds while tables holding a
slot have not submitted yet: tables that start together share jobs.

Nothing polls: a table waiting (for a slot or for outcomes) sleeps on its
``wake`` event, which the scheduler sets when there is news for it and the
table's pipeline sets with ``stop``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.config.changefeed import ChangefeedConfig, EventFilterRule
from cdc.filter.columns import ColumnRules
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.masking import mask_secret
from cdc.model.schema import TableName, TableSchema
from cdc.snapshot.chunk import SnapshotChunk
from processor.fair_slots import FairSlots, Slot
from sparkjobs.snapshot import ChunkOutcome, ChunkWriter, RepairWriter, SinkWriter, run_chunks

__all__ = [
    "CONCURRENT_JOBS",
    "DEFAULT_SLOTS",
    "TASKS_PER_CORE",
    "JobKey",
    "SchedulerClosed",
    "SnapshotScheduler",
    "TableChunks",
    "Ticket",
]

log = get_logger(__name__)

#: Tables preparing or waiting for their snapshot at once on a capture (a source
#: connection each): more than one job's chunks, so tables prepare while a job runs,
#: far fewer than a server's connections (MariaDB's max_connections is 151).
DEFAULT_SLOTS = 16
#: Chunks per job per core of Spark (``defaultParallelism``) when not set.
TASKS_PER_CORE = 4
#: Spark jobs submitted at once (see the module docstring: two keep the cores busier).
CONCURRENT_JOBS = 2
#: The pause after an unexpected error of the scheduler's thread, before it goes on.
_PAUSE = 0.5

#: ``run_chunks``'s signature, the seam the scheduler runs its jobs through.
RunChunks = Callable[..., list[ChunkOutcome]]
Batch = list[tuple[SnapshotChunk, ChunkOutcome]]


class SchedulerClosed(RuntimeError):
    """The capture's snapshot scheduler closed (its processor is stopping)."""


@dataclass(frozen=True, repr=False)
class JobKey:
    """What every chunk of one Spark job shares: ``run_chunks`` takes one of each."""

    source_uri_text: str
    sink_uri_text: str
    changefeed_id: str
    event_filters: tuple[EventFilterRule, ...] = ()
    case_sensitive: bool = False
    columns: ColumnRules = ColumnRules()
    #: The chunks re-snapshot tables whose streams keep running (``RepairWriter``), never
    #: in a job with a table's own snapshot chunks.
    repair: bool = False

    @classmethod
    def of(cls, config: ChangefeedConfig) -> JobKey:
        return cls(
            config.source_uri.unmasked(),
            config.sink_uri.unmasked(),
            config.changefeed_id,
            tuple(config.event_filters),
            config.case_sensitive,
            config.columns,
        )

    def __repr__(self) -> str:
        return (
            f"JobKey({mask_secret(self.source_uri_text)!r} -> "
            f"{mask_secret(self.sink_uri_text)!r}, {self.changefeed_id!r})"
        )


@dataclass(frozen=True)
class TableChunks:
    """One table's pending chunks, as its pipeline hands them to the scheduler.

    ``spark()`` gives the Spark session; ``clear_ranges``: see ``SinkWriter``;
    ``per_job``: at most this many of the table's chunks run in one job; ``predicate``:
    a re-snapshot's rendered ``--where`` (``key.repair`` only; None: every row);
    ``token``: the etcd revision at which the capture proved it holds these chunks,
    which every write of them carries (``SinkWriter.tokens``; None: unfenced).
    """

    key: JobKey
    schema: TableSchema
    chunks: tuple[SnapshotChunk, ...]
    spark: Callable[[], Any]
    clear_ranges: bool = True
    per_job: int = 8
    predicate: str | None = None
    token: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.per_job, bool) or not isinstance(self.per_job, int):
            raise TypeError(f"per_job must be an int, not {self.per_job!r}")
        if self.per_job < 1:
            raise ValueError(f"per_job must be at least 1 chunk, not {self.per_job}")
        if self.predicate is not None and not self.key.repair:
            raise ValueError("a predicate belongs to a re-snapshot's chunks (JobKey.repair)")
        others = sorted({str(c.table) for c in self.chunks if c.table != self.schema.name})
        if others:
            raise ValueError(
                f"the chunks handed in for {self.schema.name} include chunks of "
                f"{', '.join(others)}: submit each table on its own"
            )


class Ticket:
    """A table's chunks in the scheduler; its pipeline reads the outcomes with ``batches``.

    ``withdrawn``: chunks that never ran; ``stopped``: some were withdrawn because
    the table was stopped.
    """

    def __init__(
        self,
        scheduler: SnapshotScheduler,
        request: TableChunks,
        stop: threading.Event,
        wake: threading.Event,
    ) -> None:
        self.request = request
        self.stop = stop
        self.withdrawn = 0
        self.stopped = False
        self._scheduler = scheduler
        self._queued: deque[SnapshotChunk] = deque(request.chunks)
        self._in_flight = 0
        self._inbox: deque[Batch] = deque()
        self._error: BaseException | None = None
        self._wake = wake

    @property
    def table(self) -> TableName:
        return self.request.schema.name

    @property
    def ended(self) -> bool:
        return not self._queued and not self._in_flight

    def batches(self) -> Iterator[Batch]:
        """The table's outcomes, one batch per job, until none is queued or in flight.

        When ``stop`` is set the chunks still queued are withdrawn and the ones in
        flight still come back. Raises the exception a job of the table failed with
        (or ``SchedulerClosed``) after the batches before it. Left early, it withdraws
        the chunks still queued and returns once those in flight came back (their
        outcomes dropped: not recorded, they are read again).
        """
        try:
            while True:
                batch = self._scheduler._next(self)
                if batch is None:
                    return
                yield batch
        finally:
            self._scheduler._withdraw(self)
            self._scheduler._drain(self)


class SnapshotScheduler:
    """See the module docstring. One per capture process, shared by all its changefeeds.

    ``max_in_flight``: chunks per job (None: ``TASKS_PER_CORE`` × Spark's default
    parallelism, read at the first job); ``concurrent_jobs``: jobs submitted at once;
    ``slots``: tables holding a slot at once; ``run``: the function jobs run through
    (``run_chunks``). ``jobs`` and ``chunks_run`` count what ran.
    """

    def __init__(
        self,
        *,
        max_in_flight: int | None = None,
        concurrent_jobs: int = CONCURRENT_JOBS,
        slots: int = DEFAULT_SLOTS,
        gather: float = 0.5,
        run: RunChunks = run_chunks,
    ) -> None:
        if max_in_flight is not None and (
            isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int)
        ):
            raise TypeError(f"max_in_flight must be an int or None, not {max_in_flight!r}")
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1 chunk, not {max_in_flight}")
        if (
            isinstance(concurrent_jobs, bool)
            or not isinstance(concurrent_jobs, int)
            or concurrent_jobs < 1
        ):
            raise ValueError(
                f"concurrent_jobs must be an int of at least 1 job, not {concurrent_jobs!r}"
            )
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be an int of at least 1 table, not {slots!r}")
        if gather < 0:
            raise ValueError(f"gather must be 0 or more seconds, not {gather!r}")
        self.max_in_flight = max_in_flight
        self.concurrent_jobs = concurrent_jobs
        self.slots = slots
        self.gather = gather
        self.jobs = 0
        self.chunks_run = 0
        self._run = run
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._queue: deque[Ticket] = deque()
        self._live: set[Ticket] = set()
        self._slots = FairSlots(slots, on_release=self._released)
        self._closed = False
        self._threads: list[threading.Thread] = []

    # --- the table pipelines' side -----------------------------------------------------------

    def slot(self) -> Slot:
        """A slot handle for one table pipeline (not held until ``acquire``; its ``wake``
        is the one the pipeline gives ``submit``)."""
        return self._slots.slot()

    def submit(self, request: TableChunks, stop: threading.Event, wake: threading.Event) -> Ticket:
        """Queues the table's chunks behind those submitted before; read them with
        ``Ticket.batches``. ``stop`` withdraws the ones still queued; ``wake`` is set
        by the caller with ``stop``, and by the scheduler when there is news."""
        ticket = Ticket(self, request, stop, wake)
        with self._lock:
            if self._closed:
                raise SchedulerClosed(
                    f"the capture's snapshot scheduler is closed: {request.schema.name} "
                    "runs no chunk here"
                )
            if ticket.ended:
                return ticket
            self._queue.append(ticket)
            self._live.add(ticket)
            if not self._threads:
                self._threads = [
                    threading.Thread(target=self._loop, name=f"snapshot-jobs-{n}", daemon=True)
                    for n in range(self.concurrent_jobs)
                ]
                for thread in self._threads:
                    thread.start()
            self._work.notify()
        return ticket

    def close(self, timeout: float = 30.0) -> None:
        """Withdraws every queued chunk (a table not stopped gets ``SchedulerClosed``)
        and waits up to ``timeout`` s for the jobs running to be handed over."""
        with self._lock:
            self._closed = True
            for ticket in list(self._queue):
                stopped = ticket.stop.is_set()
                self._withdraw_locked(ticket, stopped=stopped)
                if not stopped and ticket._error is None:
                    ticket._error = SchedulerClosed(
                        f"the capture's snapshot scheduler closed before the chunks of "
                        f"{ticket.table} ran"
                    )
                    ticket._wake.set()
            self._work.notify_all()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            log.warning("snapshot scheduler: a job still runs after %.0f s", timeout)

    def _next(self, ticket: Ticket) -> Batch | None:
        while True:
            ticket._wake.clear()
            with self._lock:
                if ticket._inbox:
                    return ticket._inbox.popleft()
                if ticket._error is not None and not ticket._in_flight:
                    raise ticket._error
                if ticket._queued and ticket.stop.is_set():
                    self._withdraw_locked(ticket, stopped=True)
                if ticket.ended:
                    return None
            ticket._wake.wait()

    def _withdraw(self, ticket: Ticket) -> None:
        with self._lock:
            self._withdraw_locked(ticket, stopped=ticket.stop.is_set())

    def _drain(self, ticket: Ticket) -> None:
        """Returns once none of the ticket's chunks is in a job any more."""
        while True:
            ticket._wake.clear()
            with self._lock:
                if not ticket._in_flight:
                    return
            ticket._wake.wait()

    def _withdraw_locked(self, ticket: Ticket, *, stopped: bool) -> None:
        if ticket._queued:
            ticket.withdrawn += len(ticket._queued)
            ticket.stopped = ticket.stopped or stopped
            ticket._queued.clear()
        if ticket in self._queue:
            self._queue.remove(ticket)
        if ticket.ended:
            self._live.discard(ticket)
        ticket._wake.set()
        self._work.notify()

    def _released(self) -> None:
        with self._lock:
            self._work.notify()  # a table holding a slot left: _gather need not wait for it

    # --- the scheduler's thread ------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._queue:
                    self._work.wait()
                if self._closed:
                    return
                head = self._queue[0]
            try:
                self._once(head)
            except Exception:
                log.exception("snapshot scheduler: a job could not be handed over, going on")
                time.sleep(_PAUSE)

    def _once(self, head: Ticket) -> None:
        try:
            session = head.request.spark()
            capacity = self._capacity(session)
        except Exception as exc:  # the table that asked gets the error
            with self._lock:
                head._error = exc
                self._withdraw_locked(head, stopped=head.stop.is_set())
            return
        with self._lock:
            self._gather(capacity)
            job = self._take(capacity)
        if job:
            self._run_job(session, job)

    def _capacity(self, session: Any) -> int:
        if self.max_in_flight is None:
            cores = int(session.sparkContext.defaultParallelism)
            self.max_in_flight = max(2, TASKS_PER_CORE * cores)
            log.info("snapshot scheduler: at most %d chunks in flight", self.max_in_flight)
        return self.max_in_flight

    def _gather(self, capacity: int) -> None:
        """Waits (lock held) up to ``gather`` s while the job is not full and tables
        holding a slot have not submitted their chunks yet."""
        deadline = time.monotonic() + self.gather
        while not self._closed:
            ready = sum(min(len(t._queued), t.request.per_job) for t in self._queue)
            preparing = self._slots.held - len(self._live)
            left = deadline - time.monotonic()
            if ready >= capacity or preparing <= 0 or left <= 0:
                return
            self._work.wait(left)

    def _take(self, capacity: int) -> list[tuple[Ticket, list[SnapshotChunk]]]:
        """The next job (lock held): tickets in queue order sharing the first one's key,
        one per table; the served ones move to the back of the queue."""
        job: list[tuple[Ticket, list[SnapshotChunk]]] = []
        key: JobKey | None = None
        tables: set[TableName] = set()
        room = capacity
        waiting: list[Ticket] = []
        for ticket in list(self._queue):
            if ticket.stop.is_set():
                self._withdraw_locked(ticket, stopped=True)
                continue
            if room == 0 or ticket.table in tables or key not in (None, ticket.request.key):
                waiting.append(ticket)
                continue
            key = ticket.request.key
            count = min(room, ticket.request.per_job, len(ticket._queued))
            chunks = [ticket._queued.popleft() for _ in range(count)]
            ticket._in_flight += count
            room -= count
            tables.add(ticket.table)
            job.append((ticket, chunks))
        served = [ticket for ticket, _ in job if ticket._queued]
        self._queue = deque(waiting + served)
        return job

    def _run_job(self, session: Any, job: list[tuple[Ticket, list[SnapshotChunk]]]) -> None:
        key = job[0][0].request.key
        chunks = [chunk for _, taken in job for chunk in taken]
        schemas: Mapping[TableName, TableSchema] = {t.table: t.request.schema for t, _ in job}
        kept = frozenset(t.table for t, _ in job if not t.request.clear_ranges)
        tokens = {t.table: t.request.token for t, _ in job if t.request.token is not None}
        outcomes: Sequence[ChunkOutcome] = []
        error: BaseException | None = None
        try:
            writer: ChunkWriter | RepairWriter = (
                RepairWriter(
                    key.sink_uri_text,
                    key.changefeed_id,
                    {str(t.table): t.request.predicate for t, _ in job},
                )
                if key.repair
                else SinkWriter(
                    key.sink_uri_text, key.changefeed_id, keep_ranges=kept, tokens=tokens
                )
            )
            events = EventFilter(key.event_filters, key.case_sensitive)
            columns = {"columns": key.columns} if key.columns else {}
            outcomes = self._run(
                session,
                key.source_uri_text,
                schemas,
                chunks,
                writer,
                events=events or None,
                **columns,
            )
        except Exception as exc:  # handed to the job's tables
            error = exc
        by_id = {outcome.chunk_id: outcome for outcome in outcomes}
        with self._lock:
            self.jobs += 1
            self.chunks_run += len(chunks)
            for ticket, taken in job:
                ticket._in_flight -= len(taken)
                if error is None:
                    batch = [(chunk, _outcome_of(chunk, by_id)) for chunk in taken]
                    ticket._inbox.append(batch)
                    failed = any(not outcome.ok for _, outcome in batch)
                else:
                    ticket._error, failed = error, True
                if failed:  # no further chunk of the table runs, as no further batch ran
                    self._withdraw_locked(ticket, stopped=False)
                if ticket.ended:
                    self._live.discard(ticket)
                ticket._wake.set()
            self._work.notify()

    # --- what tests and status lines read -------------------------------------------------

    def queued(self) -> int:
        """Chunks waiting for a job."""
        with self._lock:
            return sum(len(t._queued) for t in self._queue)

    def chunks_in_flight(self) -> int:
        """Chunks in the jobs running."""
        with self._lock:
            return sum(t._in_flight for t in self._live)

    def slots_held(self) -> int:
        return self._slots.held

    def slots_awaited(self) -> int:
        """Tables waiting for a slot."""
        return self._slots.awaited


def _outcome_of(chunk: SnapshotChunk, by_id: Mapping[str, ChunkOutcome]) -> ChunkOutcome:
    found = by_id.get(chunk.chunk_id)
    if found is not None:
        return found
    return ChunkOutcome(chunk.chunk_id, error="no outcome came back", error_type="SparkError")
