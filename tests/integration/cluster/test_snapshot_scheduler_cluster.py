"""Many small tables on one capture: their snapshot chunks share a few Spark jobs.

40 tables of one chunk each start together on one capture (real etcd, MariaDB
source and sink, the local Spark session). Their chunks go through the
capture's snapshot scheduler: far fewer Spark jobs than tables (counted by the
scheduler and by Spark itself), the tables preparing at once hold a bounded
number of source connections (sampled from the source's process list: about
45 at the peak without the slots), and the downstream ends equal to the source.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import diff
from cluster_helpers import FAST_OWNER, Capture, changefeed_config, checksums, running_on, status
from test_cluster_inprocess import caught_up
from testkit import wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.playground.mariadb import MariaDBServer
from cdc.store import Election, EtcdStore, Fence
from owner.owner import Owner
from processor.pipeline import PipelineOptions
from processor.processor import Processor
from processor.snapshot_scheduler import SnapshotScheduler
from sparkjobs.snapshot import ChunkOutcome

pytestmark = pytest.mark.integration

TABLES = [f"t{i:02d}" for i in range(40)]
ROWS = 30
#: Tables holding a source connection for their snapshot at once on the capture.
SLOTS = 8
#: Source connections besides the tables' own: Spark's Python workers (local[2]), the
#: changefeed's binlog readers, the owner's DDL puller, short-lived queries.
OTHERS = 10


def connections(server: MariaDBServer) -> int:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST")
            return int(cur.fetchone()[0]) - 1  # not this one
    finally:
        conn.close()


class ConnectionSampler(threading.Thread):
    """The source's connection count every 50 ms; ``peak`` is the highest seen."""

    def __init__(self, server: MariaDBServer) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.halt = threading.Event()
        self.peak = 0

    def run(self) -> None:
        while not self.halt.wait(0.05):
            self.peak = max(self.peak, connections(self.server))


def downstream_tables(server: MariaDBServer, db: str) -> list[str]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s", (db,)
            )
            return [name for (name,) in cur.fetchall()]
    finally:
        conn.close()


def fill(server: MariaDBServer, db: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for table in TABLES:
                cur.execute(f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY, v VARCHAR(20))")
                values = ",".join(f"({i},'{table}-{i}')" for i in range(1, ROWS + 1))
                cur.execute(f"INSERT INTO `{db}`.{table} VALUES {values}")
    finally:
        conn.close()


def test_many_small_tables_snapshot_through_few_spark_jobs(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    downstream: str,
    elect: Callable[[str], tuple[Election, Fence]],
    spark: Any,
) -> None:
    db = downstream
    fill(source_db, db)
    config = changefeed_config(source_db.uri, sink_db.uri, [f"{db}.*"])
    tracker = spark.sparkContext.statusTracker()
    spark_jobs_before = set(tracker.getJobIdsForGroup())
    baseline = connections(source_db)
    sampler = ConnectionSampler(source_db)
    sampler.start()
    capture = Capture(store, "c1")
    options = PipelineOptions(checkpoint_interval=0.3, batch_chunks=4, snapshot_slots=SLOTS)
    processor = Processor(store, "c1", lambda _config: spark, options=options, interval=0.2)
    processor.start()
    owner = Owner(store, "c1", elect("c1")[1], FAST_OWNER)
    owner.start()
    try:
        ChangefeedStore(store).create(config)
        wait_for(lambda: len(running_on(store, "cf1")) == len(TABLES), 30, "every table to run")
        caught_up(store, source_db)
    finally:
        sampler.halt.set()
        sampler.join()
        processor.stop()
        owner.stop()
        capture.kill()
    scheduler = processor.snapshots
    assert status(store).state is ChangefeedState.NORMAL
    report = diff(source_db, sink_db, db)
    assert report.equal, report
    assert checksums(sink_db, db, TABLES) == checksums(source_db, db, TABLES)
    assert scheduler.chunks_run == len(TABLES)
    # At most SLOTS tables have chunks queued or running at once, shared by two jobs at a
    # time: about 4 chunks a job, 10 jobs, when tables prepare faster than the scheduler's
    # gather wait; slower (a loaded machine) leaves some jobs part full. One job a table
    # would be 40.
    assert scheduler.jobs <= len(TABLES) // 2, f"{scheduler.jobs} Spark jobs for 40 chunks"
    spark_jobs = set(tracker.getJobIdsForGroup()) - spark_jobs_before
    assert len(spark_jobs) == scheduler.jobs
    assert sampler.peak - baseline <= SLOTS + OTHERS, (
        f"{sampler.peak} source connections at the peak, {baseline} before"
    )
    assert scheduler.slots_held() == 0 and scheduler.queued() == 0


def test_tables_waiting_for_a_slot_end_when_the_capture_loses_them(
    store: EtcdStore,
    source_db: MariaDBServer,
    downstream: str,
    sink_db: MariaDBServer,
    elect: Callable[[str], tuple[Election, Fence]],
) -> None:
    """One slot, six tables: one holds it while its chunk runs, five wait for it.
    Losing the lease ends the five at once (they never anchor: no downstream table of
    theirs), while the one whose chunk runs waits for it, as a batch running finishes.

    Jobs go through the scheduler's own seam (``run``): a job that runs until the
    test lets it end, in place of a Spark job.
    """
    db = downstream
    conn = source_db.connect()
    try:
        with conn.cursor() as cur:
            for table in TABLES[:6]:
                cur.execute(f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY)")
                cur.execute(f"INSERT INTO `{db}`.{table} VALUES (1), (2)")
    finally:
        conn.close()
    job_ends = threading.Event()

    def held_job(
        _spark: Any, _source: str, _schemas: Any, chunks: Any, *_: Any, **__: Any
    ) -> list[ChunkOutcome]:
        job_ends.wait(60)
        return [
            ChunkOutcome(c.chunk_id, error="ended by the test", error_type="SourceError")
            for c in chunks
        ]

    capture = Capture(store, "c1")
    processor = Processor(store, "c1", lambda _config: "session", interval=0.2)
    scheduler = processor.snapshots = SnapshotScheduler(max_in_flight=4, slots=1, run=held_job)
    processor.start()
    owner = Owner(store, "c1", elect("c1")[1], FAST_OWNER)
    owner.start()
    try:
        ChangefeedStore(store).create(changefeed_config(source_db.uri, sink_db.uri, [f"{db}.*"]))
        wait_for(
            lambda: scheduler.chunks_in_flight() == 1 and scheduler.slots_awaited() == 5,
            30,
            "one table's chunk to run and five tables to wait for the slot",
        )
        processor.suspend()
        wait_for(lambda: len(processor.tables()) == 1, 5, "the five waiting tables to end")
        assert (scheduler.slots_held(), scheduler.slots_awaited()) == (1, 0)
        assert len(downstream_tables(sink_db, db)) == 1
        job_ends.set()
        wait_for(lambda: not processor.tables(), 10, "the table whose chunk ran to end")
        assert (scheduler.slots_held(), scheduler.queued(), scheduler.jobs) == (0, 0, 1)
    finally:
        job_ends.set()
        processor.stop()
        owner.stop()
        capture.kill()
