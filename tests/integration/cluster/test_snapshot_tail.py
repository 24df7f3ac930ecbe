"""The plan's tail is read first: rows inserted at the top while a snapshot runs do not
pile up in one chunk.

A table of keys 1..N is planned in chunks of CHUNK rows and a tail starting at N (real
etcd, MariaDB source and sink, the local Spark session). Before every Spark job the
test inserts BURST rows above the highest key, as an AUTO_INCREMENT workload does.
Read last, the last chunk would hold every burst of the snapshot; read first, the
tail holds the rows of one burst (and the row at N), every other chunk at most CHUNK
rows, and the rows inserted later come from the binlog: the downstream ends equal.
The second test does the same for a plan large enough to be shared out by the owner:
the shares cover the bounded chunks, the holder reads the tail at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import diff
from cluster_helpers import FAST_OWNER, Capture, changefeed_config, running_on, status
from test_cluster_inprocess import caught_up
from testkit import execute, wait_for

from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_shares import SHARE_THRESHOLD, ShareBook
from cdc.model.schema import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.mysql.chunkfence import FENCE_TABLE
from cdc.snapshot.chunk import SnapshotChunk
from cdc.store import Election, EtcdStore, Fence
from owner.chunk_shares import ShareOwner
from owner.owner import Owner
from processor.pipeline import PipelineOptions
from processor.processor import Processor
from processor.share_runner import ShareRunner
from processor.snapshot_scheduler import SnapshotScheduler
from sparkjobs.snapshot import ChunkOutcome, run_chunks

pytestmark = pytest.mark.integration

CHUNK = 20
BURST = 50


class BurstBeforeEachJob:
    """The scheduler's ``run``: BURST rows inserted above the top before each job, then
    the real job; ``jobs`` keeps each job's chunks with the rows they read."""

    def __init__(self, server: MariaDBServer, db: str, top: int) -> None:
        self.server, self.db, self.top = server, db, top
        self.jobs: list[list[tuple[SnapshotChunk, int]]] = []
        self._lock = threading.Lock()

    def __call__(
        self, spark: Any, source: str, schemas: Any, chunks: Any, *args: Any, **kwargs: Any
    ) -> list[ChunkOutcome]:
        with self._lock:
            first, self.top = self.top + 1, self.top + BURST
            insert(self.server, self.db, first, self.top)
            outcomes = run_chunks(spark, source, schemas, chunks, *args, **kwargs)
            by_id = {o.chunk_id: o for o in outcomes}
            self.jobs.append([(c, by_id[c.chunk_id].row_count) for c in chunks])
            return outcomes

    def rows_read(self) -> dict[int, int]:
        """Rows read per chunk number (the last read of a chunk read twice)."""
        return {chunk.n: rows for job in self.jobs for chunk, rows in job}


def insert(server: MariaDBServer, db: str, first: int, last: int) -> None:
    execute(
        server,
        f"INSERT INTO `{db}`.t (id, v) SELECT seq, CONCAT('v', seq) "
        f"FROM `{db}`.seq_{first}_to_{last}",
    )


def table_of(server: MariaDBServer, db: str, rows: int) -> None:
    execute(server, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
    insert(server, db, 1, rows)


def snapshot_with_bursts(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
    elect: Callable[[str], tuple[Election, Fence]],
    spark: Any,
    rows: int,
) -> BurstBeforeEachJob:
    """The table snapshotted by one capture (and its share runner) with a burst before
    each Spark job; returns once the changefeed's checkpoint passed the last burst."""
    table_of(source_db, db, rows)
    run = BurstBeforeEachJob(source_db, db, rows)
    capture = Capture(store, "c1")
    options = PipelineOptions(checkpoint_interval=0.3, batch_chunks=2)
    processor = Processor(store, "c1", lambda _config: spark, options=options, interval=0.2)
    processor.snapshots = SnapshotScheduler(max_in_flight=2, run=run)
    shares = ShareRunner(store, "c1", processor.snapshots, lambda _config: spark, batch_chunks=2)
    processor.start()
    shares.start()
    fence = elect("c1")[1]
    owner = Owner(store, "c1", fence, FAST_OWNER)
    owner.start()
    share_owner = ShareOwner(store, fence, interval=0.2).start()
    try:
        config = changefeed_config(source_db.uri, sink_db.uri, [f"{db}.t"], chunk_size=CHUNK)
        ChangefeedStore(store).create(config)
        wait_for(lambda: len(running_on(store, "cf1")) == 1, 30, "the table to run")
        progress = SnapshotProgress(store, "cf1")

        def snapshot_done() -> bool:
            plan = progress.load(TableName(db, "t"))
            return bool(plan) and all(r.done for r in plan)

        wait_for(snapshot_done, 60, "every chunk done")
        caught_up(store, source_db)  # only now: the last burst went in before the last job
    finally:
        share_owner.stop()
        owner.stop()
        shares.stop()
        processor.stop()
        capture.kill()
    assert status(store).state is ChangefeedState.NORMAL
    report = diff(source_db, sink_db, db)
    assert report.equal, report
    return run


def assert_bounded(read: dict[int, int], rows: int) -> None:
    """The chunks bounded above (``read`` without the tail) hold the table's first rows,
    none more than CHUNK: no burst reached them."""
    assert all(n <= CHUNK for n in read.values()), read
    assert sum(read.values()) == rows - 1


def test_the_tail_is_read_first_and_holds_one_burst(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    downstream: str,
    elect: Callable[[str], tuple[Election, Fence]],
    spark: Any,
) -> None:
    rows = 10 * CHUNK
    run = snapshot_with_bursts(store, source_db, sink_db, downstream, elect, spark, rows)
    read = run.rows_read()
    tail = max(read)
    assert len(run.jobs) >= 5, run.jobs  # 11 chunks, 2 a job: five bursts after the first
    assert [c.n for c, _ in run.jobs[0]][0] == tail, run.jobs[0]
    assert read.pop(tail) == 1 + BURST  # the row at the top, and the first burst
    assert_bounded(read, rows)


def test_a_shared_plan_leaves_its_tail_to_the_holder_which_reads_it_at_once(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    downstream: str,
    elect: Callable[[str], tuple[Election, Fence]],
    spark: Any,
) -> None:
    rows = (SHARE_THRESHOLD + 2) * CHUNK
    run = snapshot_with_bursts(store, source_db, sink_db, downstream, elect, spark, rows)
    read = run.rows_read()
    tail = max(read)
    assert tail > SHARE_THRESHOLD  # so the plan was shared out
    plan = ShareBook(store, "cf1").plan(TableName(downstream, "t"))
    assert plan is not None and plan.chunks == tail  # the shares cover all but the tail
    # the holder submits the tail right after publishing the shares, so it is read in
    # the first job, or in the second when the share runner's first share came first
    (at,) = [i for i, job in enumerate(run.jobs) if tail in [c.n for c, _ in job]]
    assert at <= 1, run.jobs[:2]
    assert [c.n for c, _ in run.jobs[at]] == [tail], run.jobs[at]
    assert read.pop(tail) == 1 + (at + 1) * BURST
    assert_bounded(read, rows)
    # every chunk was written under a fence token: the shares' by their capture's proof
    # of the share, the tail by the holder's proof of the table's task
    chunks = {
        r.chunk.chunk_id for r in SnapshotProgress(store, "cf1").load(TableName(downstream, "t"))
    }
    fenced = execute(
        sink_db,
        f"SELECT chunk, token FROM {FENCE_TABLE.quoted()} WHERE changefeed = 'cf1' "
        f"AND chunk LIKE '{downstream}.t:%'",
    )
    assert {chunk for chunk, _ in fenced} == chunks
    assert all(token > 0 for _, token in fenced)
