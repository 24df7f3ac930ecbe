"""The capture's snapshot scheduler: merging, bounds, fairness, stop, failures and slots.

Jobs run through the scheduler's own seam (``run``), here a plain function that
records each job and answers per chunk, so the queue's decisions can be seen
job by job; Spark and the databases are the integration test's
(tests/integration/cluster/test_snapshot_scheduler_cluster.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pytest

from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.snapshot.chunk import SnapshotChunk
from processor.snapshot_scheduler import (
    JobKey,
    SchedulerClosed,
    SnapshotScheduler,
    TableChunks,
    Ticket,
)
from sparkjobs.snapshot import ChunkOutcome, RepairWriter, SinkWriter

HIGH = Position("mysql-bin.000001", 400)
SOURCE = "mysql://repl:s3cret@127.0.0.1:3307/"
CF1 = JobKey(SOURCE, "mysql://root:x@127.0.0.1:3308/", "cf1")
CF2 = JobKey(SOURCE, "mysql://root:x@127.0.0.1:3308/", "cf2")
SESSION = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=3))
WAIT = 10.0


def schema(name: str) -> TableSchema:
    return TableSchema(TableName("db", name), (Column("id", "int", "int"),), ("id",))


def chunks(name: str, count: int) -> tuple[SnapshotChunk, ...]:
    bounds: list[int | None] = [None, *range(1, count), None]
    return tuple(
        SnapshotChunk(TableName("db", name), n, "id", bounds[n], bounds[n + 1])
        for n in range(count)
    )


def request(name: str, count: int = 1, key: JobKey = CF1, **more: Any) -> TableChunks:
    return TableChunks(key, schema(name), chunks(name, count), lambda: SESSION, **more)


class Stop:
    """A stop event shared by tables, each with its own wake event that a ``set``
    also sets, as a table pipeline's ``stop()`` sets its stop and wake events."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.wakes: list[threading.Event] = []

    def waiter(self) -> tuple[threading.Event, threading.Event]:
        """(stop, wake) for one table."""
        wake = threading.Event()
        self.wakes.append(wake)
        return self.event, wake

    def set(self) -> None:
        self.event.set()
        for wake in self.wakes:
            wake.set()


def submit(scheduler: SnapshotScheduler, chunks_of: TableChunks, stop: Stop) -> Ticket:
    return scheduler.submit(chunks_of, *stop.waiter())


def outcomes(chunk_list: Sequence[SnapshotChunk], answers: dict[str, str]) -> list[ChunkOutcome]:
    """Each chunk ok, or failed with the error type ``answers`` names for it."""
    return [
        ChunkOutcome(c.chunk_id, error="boom", error_type=answers[c.chunk_id])
        if c.chunk_id in answers
        else ChunkOutcome(c.chunk_id, 1, HIGH, HIGH)
        for c in chunk_list
    ]


@dataclass
class Job:
    chunk_ids: list[str]
    tables: list[str]
    writer: Any
    events: Any
    source: str


@dataclass
class Jobs:
    """A ``run_chunks`` stand-in: records each job, holds it while ``hold`` is clear,
    answers each chunk ok unless ``answers`` names an error type for it, or raises
    ``error``."""

    jobs: list[Job] = field(default_factory=list)
    hold: threading.Event = field(default_factory=threading.Event)
    answers: dict[str, str] = field(default_factory=dict)
    error: Exception | None = None
    started: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        self.hold.set()

    def __call__(self, spark, source, schemas, chunk_list, writer, *, events=None):
        assert spark is SESSION
        with self.started:
            self.jobs.append(
                Job(
                    [c.chunk_id for c in chunk_list],
                    sorted(str(t) for t in schemas),
                    writer,
                    events,
                    source,
                )
            )
            self.started.notify_all()
        assert self.hold.wait(WAIT), "the test never released the job"
        if self.error is not None:
            raise self.error
        return outcomes(chunk_list, self.answers)

    def wait_for(self, count: int) -> None:
        with self.started:
            assert self.started.wait_for(lambda: len(self.jobs) >= count, WAIT), self.jobs


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def collect(ticket: Ticket) -> list[list[tuple[str, bool]]]:
    """The ticket's batches as (chunk id, ok), read on a thread of its own so that a
    ticket whose outcomes never come fails the test instead of hanging it."""
    got: list[list[tuple[str, bool]]] = []
    raised: list[BaseException] = []

    def read() -> None:
        try:
            got.extend([(c.chunk_id, o.ok) for c, o in batch] for batch in ticket.batches())
        except BaseException as exc:  # raised again on the test's thread
            raised.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(WAIT)
    assert not reader.is_alive(), f"the outcomes of {ticket.table} never came"
    if raised:
        raise raised[0]
    return got


@pytest.fixture
def jobs() -> Jobs:
    return Jobs()


@pytest.fixture
def make(jobs: Jobs):
    made: list[SnapshotScheduler] = []

    def new(**options: Any) -> SnapshotScheduler:
        options.setdefault("gather", 0)
        # one job at a time unless a test says otherwise: the queue's decisions job by job
        options.setdefault("concurrent_jobs", 1)
        scheduler = SnapshotScheduler(run=jobs, **options)
        made.append(scheduler)
        return scheduler

    yield new
    for scheduler in made:
        scheduler.close(timeout=WAIT)


def test_chunks_of_many_tables_share_jobs_of_at_most_max_in_flight(jobs: Jobs, make) -> None:
    scheduler = make(max_in_flight=4)
    stop = Stop()
    jobs.hold.clear()
    first = submit(scheduler, request("t0"), stop)
    jobs.wait_for(1)  # t0 runs alone; the others queue behind it
    tickets = [first] + [submit(scheduler, request(f"t{i}"), stop) for i in range(1, 10)]
    jobs.hold.set()
    for i, ticket in enumerate(tickets):
        assert collect(ticket) == [[(f"db.t{i}:0", True)]]
    assert [job.chunk_ids for job in jobs.jobs] == [
        ["db.t0:0"],
        ["db.t1:0", "db.t2:0", "db.t3:0", "db.t4:0"],
        ["db.t5:0", "db.t6:0", "db.t7:0", "db.t8:0"],
        ["db.t9:0"],
    ]
    assert jobs.jobs[1].tables == ["db.t1", "db.t2", "db.t3", "db.t4"]
    assert (scheduler.jobs, scheduler.chunks_run) == (4, 10)
    assert scheduler.queued() == 0


class Gated:
    """A ``run_chunks`` stand-in whose jobs each wait for their own release
    (``release(n)``, n in the order the jobs started); chunks in ``answers`` fail."""

    def __init__(self) -> None:
        self.jobs: list[list[str]] = []
        self.gates: list[threading.Event] = []
        self.answers: dict[str, str] = {}
        self.started = threading.Condition()

    def __call__(self, spark, source, schemas, chunk_list, writer, *, events=None):
        gate = threading.Event()
        with self.started:
            self.jobs.append([c.chunk_id for c in chunk_list])
            self.gates.append(gate)
            self.started.notify_all()
        assert gate.wait(WAIT), "the test never released the job"
        return outcomes(chunk_list, self.answers)

    def wait_for(self, count: int) -> None:
        with self.started:
            assert self.started.wait_for(lambda: len(self.jobs) >= count, WAIT), self.jobs

    def release(self, n: int) -> None:
        self.gates[n].set()


@pytest.fixture
def gated():
    run = Gated()
    scheduler = SnapshotScheduler(run=run, gather=0, max_in_flight=2, concurrent_jobs=2)
    yield run, scheduler
    for gate in run.gates:
        gate.set()
    scheduler.close(timeout=WAIT)


def test_two_jobs_run_at_once_and_one_table_gets_the_outcomes_of_both(gated) -> None:
    """The second job is submitted while the first runs (a core freed by the first
    job's end takes its task at once); either may come back first."""
    run, scheduler = gated
    ticket = submit(scheduler, request("t", 5, per_job=2), Stop())
    run.wait_for(2)
    assert run.jobs == [["db.t:0", "db.t:1"], ["db.t:2", "db.t:3"]]
    assert scheduler.chunks_in_flight() == 4
    run.release(1)  # the second job comes back first; its thread takes db.t:4
    run.wait_for(3)
    assert run.jobs[2] == ["db.t:4"]
    run.release(0)
    run.release(2)
    got = collect(ticket)
    assert got[0] == [("db.t:2", True), ("db.t:3", True)]
    assert sorted(cid for batch in got for cid, ok in batch if ok) == [
        f"db.t:{n}" for n in range(5)
    ]


def test_a_table_leaving_its_outcomes_early_waits_for_its_chunks_still_running(gated) -> None:
    """A chunk met another schema: the table stops reading outcomes and goes on (reads
    the binlog up to the DDL, the chunks again) only once its chunks in the other job
    have come back, so none of them writes after it went on."""
    run, scheduler = gated
    run.answers["db.t:0"] = "ChunkSchemaChanged"
    ticket = submit(scheduler, request("t", 6, per_job=2), Stop())
    run.wait_for(2)
    seen: list[list[tuple[str, bool]]] = []

    def table() -> None:
        for batch in ticket.batches():
            seen.append([(c.chunk_id, o.ok) for c, o in batch])
            if not all(o.ok for _, o in batch):
                break

    reader = threading.Thread(target=table, daemon=True)
    reader.start()
    run.release(0)
    until(lambda: len(seen) == 1)
    reader.join(0.2)
    assert reader.is_alive(), "the table went on while db.t:2 and db.t:3 still ran"
    assert ticket.withdrawn == 2  # t:4 and t:5 never run
    run.release(1)
    reader.join(WAIT)
    assert not reader.is_alive()
    assert seen == [[("db.t:0", False), ("db.t:1", True)]]
    assert run.jobs == [["db.t:0", "db.t:1"], ["db.t:2", "db.t:3"]]


def test_a_big_table_takes_turns_with_small_ones(jobs: Jobs, make) -> None:
    """Round robin by table: the big table has at most ``per_job`` chunks in a job and
    goes to the back after each; the small ones behind it are not starved."""
    scheduler = make(max_in_flight=4)
    stop = Stop()
    jobs.hold.clear()
    big = submit(scheduler, request("big", 9, per_job=3), stop)
    jobs.wait_for(1)
    small = [submit(scheduler, request(f"s{i}"), stop) for i in range(4)]
    jobs.hold.set()
    assert [len(batch) for batch in collect(big)] == [3, 3, 1, 2]
    for ticket in small:
        assert len(collect(ticket)) == 1
    assert [job.chunk_ids for job in jobs.jobs] == [
        ["db.big:0", "db.big:1", "db.big:2"],
        ["db.big:3", "db.big:4", "db.big:5", "db.s0:0"],  # big was queued again before s0
        ["db.s1:0", "db.s2:0", "db.s3:0", "db.big:6"],  # served, it went to the back
        ["db.big:7", "db.big:8"],
    ]


def test_jobs_group_by_changefeed_and_carry_each_tables_range_clearing(
    jobs: Jobs,
    make,
) -> None:
    scheduler = make(max_in_flight=8)
    stop = Stop()
    jobs.hold.clear()
    submit(scheduler, request("t0"), stop)
    jobs.wait_for(1)
    tickets = [
        submit(scheduler, request("a", key=CF1), stop),
        submit(scheduler, request("b", key=CF2), stop),
        submit(scheduler, request("c", key=CF1, clear_ranges=False), stop),
        submit(scheduler, request("d", key=CF2), stop),
    ]
    jobs.hold.set()
    for ticket in tickets:
        collect(ticket)
    assert [job.tables for job in jobs.jobs[1:]] == [["db.a", "db.c"], ["db.b", "db.d"]]
    writer = jobs.jobs[1].writer
    assert isinstance(writer, SinkWriter)
    assert writer.changefeed_id == "cf1"
    assert writer.clears(TableName("db", "a")) and not writer.clears(TableName("db", "c"))
    assert jobs.jobs[2].writer.changefeed_id == "cf2"
    assert jobs.jobs[1].events is None  # no event filter rules: none shipped
    assert jobs.jobs[1].source == SOURCE


def test_one_table_is_once_in_a_job_even_when_two_tickets_hold_it(
    jobs: Jobs,
    make,
) -> None:
    """A table started again while its old pipeline's chunks still wait: the chunk ids
    and the schema of a job must be unique per table."""
    scheduler = make(max_in_flight=8)
    stop = Stop()
    jobs.hold.clear()
    submit(scheduler, request("t0"), stop)
    jobs.wait_for(1)
    old, new = submit(scheduler, request("t", 2), stop), submit(scheduler, request("t", 2), stop)
    jobs.hold.set()
    collect(old), collect(new)
    assert [job.chunk_ids for job in jobs.jobs[1:]] == [
        ["db.t:0", "db.t:1"],
        ["db.t:0", "db.t:1"],
    ]


@pytest.mark.parametrize("error_type", ["ChunkSchemaChanged", "SourceError"])
def test_a_chunk_that_did_not_finish_ends_its_table_only(
    jobs: Jobs,
    make,
    error_type: str,
) -> None:
    """No further chunk of the table runs (no further batch ran before); the chunks
    of its job and the other tables come back as usual."""
    scheduler = make(max_in_flight=4)
    stop = Stop()
    jobs.answers["db.t:1"] = error_type
    jobs.hold.clear()
    submit(scheduler, request("t0"), stop)
    jobs.wait_for(1)
    failing = submit(scheduler, request("t", 6, per_job=2), stop)
    other = submit(scheduler, request("u", 4, per_job=2), stop)
    jobs.hold.set()
    assert collect(failing) == [[("db.t:0", True), ("db.t:1", False)]]
    assert failing.withdrawn == 4 and not failing.stopped
    assert [len(batch) for batch in collect(other)] == [2, 2]
    assert not any(cid.startswith("db.t:") for job in jobs.jobs[2:] for cid in job.chunk_ids)


def test_a_stopped_table_withdraws_its_queued_chunks_and_gets_its_running_ones(
    jobs: Jobs,
    make,
) -> None:
    scheduler = make(max_in_flight=2)
    stop, other_stop = Stop(), Stop()
    jobs.hold.clear()
    ticket = submit(scheduler, request("t", 5, per_job=2), stop)
    queued_only = submit(scheduler, request("q", 2), stop)
    jobs.wait_for(1)
    stop.set()  # t:0 and t:1 are running
    assert collect(queued_only) == []
    assert queued_only.stopped and queued_only.withdrawn == 2
    other = submit(scheduler, request("u"), other_stop)
    jobs.hold.set()
    assert collect(ticket) == [[("db.t:0", True), ("db.t:1", True)]]
    assert ticket.stopped and ticket.withdrawn == 3
    assert collect(other) == [[("db.u:0", True)]]
    assert [job.chunk_ids for job in jobs.jobs] == [["db.t:0", "db.t:1"], ["db.u:0"]]


def test_a_table_stopped_before_its_turn_never_runs(jobs: Jobs, make) -> None:
    scheduler = make(max_in_flight=2)
    stop = Stop()
    stop.set()
    ticket = submit(scheduler, request("t", 3), stop)
    assert collect(ticket) == []
    assert ticket.stopped and ticket.withdrawn == 3
    assert jobs.jobs == []


def test_a_failed_job_raises_in_each_of_its_tables(jobs: Jobs, make) -> None:
    scheduler = make(max_in_flight=2)
    stop = Stop()
    jobs.hold.clear()
    submit(scheduler, request("t0"), stop)
    jobs.wait_for(1)
    jobs.error = RuntimeError("the Spark context was stopped")
    first, second = submit(scheduler, request("a", 3), stop), submit(scheduler, request("b"), stop)
    jobs.hold.set()
    for ticket in (first, second):
        with pytest.raises(RuntimeError, match="Spark context was stopped"):
            collect(ticket)
    assert first.withdrawn == 1  # a:2 never ran
    assert [job.chunk_ids for job in jobs.jobs[1:]] == [["db.a:0", "db.a:1"], ["db.b:0"]]


def test_a_spark_session_that_cannot_start_fails_the_table_that_asked(
    jobs: Jobs,
    make,
) -> None:
    scheduler = make(max_in_flight=2)

    def no_spark() -> Any:
        raise RuntimeError("this node was started without Spark")

    broken = TableChunks(CF1, schema("t"), chunks("t", 2), no_spark)
    with pytest.raises(RuntimeError, match="without Spark"):
        collect(submit(scheduler, broken, Stop()))
    assert collect(submit(scheduler, request("u"), Stop())) == [[("db.u:0", True)]]


def test_max_in_flight_defaults_to_a_few_tasks_per_spark_core(jobs: Jobs, make) -> None:
    scheduler = make()
    collect(submit(scheduler, request("t", 20, per_job=20), Stop()))
    assert scheduler.max_in_flight == 12  # 4 x defaultParallelism 3
    assert [len(job.chunk_ids) for job in jobs.jobs] == [12, 8]


def test_close_fails_the_tables_still_waiting_and_refuses_more(jobs: Jobs, make) -> None:
    scheduler = make(max_in_flight=1)
    stop, stopped = Stop(), Stop()
    jobs.hold.clear()
    running = submit(scheduler, request("t", 2), stop)
    jobs.wait_for(1)
    got: list[Any] = []

    def consume() -> None:
        try:
            for batch in running.batches():
                got.append([(c.chunk_id, o.ok) for c, o in batch])
        except SchedulerClosed as exc:
            got.append(exc)

    consumer = threading.Thread(target=consume)
    consumer.start()  # waits while t:0 runs
    waiting = submit(scheduler, request("w"), stop)
    stopped.set()
    quiet = submit(scheduler, request("q"), stopped)
    closing = threading.Thread(target=scheduler.close)
    closing.start()
    with pytest.raises(SchedulerClosed, match="closed before the chunks of db.w ran"):
        collect(waiting)
    assert collect(quiet) == []
    assert got == []  # t:0 still runs: its table waits for it
    jobs.hold.set()
    closing.join(WAIT)
    consumer.join(WAIT)
    # the job running was handed over first, then the chunk that never ran is an error
    assert got[0] == [("db.t:0", True)]
    assert isinstance(got[1], SchedulerClosed) and "db.t ran" in str(got[1])
    assert [job.chunk_ids for job in jobs.jobs] == [["db.t:0"]]
    with pytest.raises(SchedulerClosed, match="runs no chunk here"):
        submit(scheduler, request("late"), stop)


def test_gather_waits_for_tables_holding_a_slot(jobs: Jobs, make) -> None:
    """Tables that start together share a job: the first one's chunks wait (up to
    ``gather``) while other slot holders are still preparing."""
    scheduler = make(max_in_flight=8, gather=WAIT)
    stop = Stop()
    slots = [scheduler.slot() for _ in range(3)]
    assert all(slot.acquire(*stop.waiter()) for slot in slots)
    tickets = []
    for i in range(3):
        tickets.append(submit(scheduler, request(f"t{i}"), stop))
    for ticket in tickets:
        collect(ticket)
    assert [job.chunk_ids for job in jobs.jobs] == [["db.t0:0", "db.t1:0", "db.t2:0"]]
    for slot in slots:
        slot.release()


def test_slots_bound_the_tables_and_go_first_come_first_served() -> None:
    scheduler = SnapshotScheduler(slots=2)
    stop = Stop()
    held = [scheduler.slot(), scheduler.slot()]
    assert all(slot.acquire(*stop.waiter()) for slot in held)
    order: list[int] = []
    waiters = [scheduler.slot() for _ in range(3)]

    def wait(i: int) -> None:
        assert waiters[i].acquire(*stop.waiter())
        order.append(i)

    threads = []
    for i in range(3):
        thread = threading.Thread(target=wait, args=(i,))
        thread.start()
        threads.append(thread)
        until(lambda i=i: scheduler.slots_awaited() == i + 1)
    assert scheduler.slots_held() == 2 and order == []
    held[0].release()
    held[0].release()  # idempotent: one slot back, not two
    threads[0].join(WAIT)
    assert order == [0] and scheduler.slots_held() == 2
    held[1].release()
    threads[1].join(WAIT)
    waiters[0].release()
    threads[2].join(WAIT)
    assert order == [0, 1, 2]
    waiters[1].release()
    waiters[2].release()
    assert scheduler.slots_held() == 0


def test_a_table_waiting_for_a_slot_reacts_to_its_stop() -> None:
    scheduler = SnapshotScheduler(slots=1)
    holder = scheduler.slot()
    assert holder.acquire(*Stop().waiter())
    stop = Stop()
    result: list[bool] = []
    waiter = scheduler.slot()
    thread = threading.Thread(target=lambda: result.append(waiter.acquire(*stop.waiter())))
    thread.start()
    until(lambda: scheduler.slots_awaited() == 1)
    stop.set()
    thread.join(WAIT)
    assert result == [False] and not waiter.held
    holder.release()
    assert scheduler.slots_held() == 0  # the stopped waiter was not handed the slot
    assert not scheduler.slot().acquire(*stop.waiter())  # stopped before asking: no slot


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_in_flight": 0}, "max_in_flight must be at least 1"),
        ({"slots": 0}, "slots must be an int of at least 1"),
        ({"concurrent_jobs": 0}, "concurrent_jobs must be an int of at least 1"),
        ({"gather": -1}, "gather must be 0 or more seconds"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SnapshotScheduler(**options)


def test_a_request_holds_one_tables_chunks() -> None:
    with pytest.raises(ValueError, match="include chunks of db.u: submit each table"):
        TableChunks(CF1, schema("t"), chunks("t", 1) + chunks("u", 1), lambda: SESSION)
    with pytest.raises(ValueError, match="per_job must be at least 1"):
        request("t", per_job=0)


def test_job_keys_hide_passwords() -> None:
    assert "s3cret" not in repr(CF1)
    assert "127.0.0.1:3307" in repr(CF1)


def test_re_snapshot_chunks_run_in_jobs_of_their_own_with_their_predicates(
    jobs: Jobs, make
) -> None:
    """Repair chunks (``JobKey.repair``) never share a job with a table's own snapshot
    chunks, and their job writes through a ``RepairWriter`` holding each table's
    predicate (``cdcctl changefeed snapshot``)."""
    scheduler = make(max_in_flight=8)
    stop = Stop()
    jobs.hold.clear()
    first = submit(scheduler, request("t0"), stop)
    jobs.wait_for(1)
    repair = replace(CF1, repair=True)
    tickets = [
        submit(scheduler, request("t1"), stop),
        submit(scheduler, request("t2", key=repair, predicate="`id` < 5"), stop),
        submit(scheduler, request("t3", key=repair), stop),
    ]
    jobs.hold.set()
    for ticket in [first, *tickets]:
        assert all(ok for batch in collect(ticket) for _, ok in batch)
    by_tables = {tuple(job.tables): job.writer for job in jobs.jobs}
    assert isinstance(by_tables[("db.t1",)], SinkWriter)
    writer = by_tables[("db.t2", "db.t3")]
    assert isinstance(writer, RepairWriter)
    assert writer.predicates == {"db.t2": "`id` < 5", "db.t3": None}


def test_a_predicate_belongs_to_repair_chunks_only() -> None:
    with pytest.raises(ValueError, match="re-snapshot"):
        request("t0", predicate="`id` < 5")
