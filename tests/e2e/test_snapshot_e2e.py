"""The DBLog property end to end through `cdc-server`: snapshot under concurrent writes,
hand-off, catch-up, the downstream equal to the source.

A 200k-row sysbench-shaped table is captured by a real `cdc-server` process
(tests/cluster_harness.py: private etcd key prefix, changefeed created through
the admin API) into the downstream MariaDB while a writer inserts, updates
(also the primary key) and deletes rows across every chunk. The writer starts
when the changefeed is created and stops two seconds after every table
streams; each test first proves, from the snapshot progress the admin API
reports while it writes, that its writes landed while chunks were still being
read (small chunks: also between chunk batches). Then the changefeed's
checkpoint must pass the source's last position and `cdc diff` must find the
downstream equal. Variants:

* chunk sizes 1000 and 50,000 (many small batches; a few large chunks);
* the server SIGKILLed mid-snapshot and started again: the chunks recorded
  done before the kill are not read again (the restarted process's
  ``cdc_snapshot_chunks`` metric counts exactly the rest), and nothing is lost;
* into the file sink (a smaller table): its root, replayed into an empty
  database, must be equal to the source;
* on a standalone Spark cluster (a master and two workers on loopback, the session
  fixture ``spark_cluster``), with three captures: the plan is shared out by the
  owner (chunks recorded by more than one capture, counted from the shares in
  etcd), and a capture SIGKILLed while it runs shares has them finished elsewhere.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_harness import Cluster, checkpoint_reaches, diff
from prometheus_client.parser import text_string_to_metric_families
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_shares import HeldShare, ShareBook, ShareState
from cdc.model.schema import TableName
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.spark import SparkCluster
from cdc.sink.file.reader import replay_into

ROWS = 100_000
CAPTURE = "snap-1"
CHANGEFEED = "snap"
TIMEOUT = 600
#: Statements the writer must commit while chunks are being read.
WRITES_DURING_SNAPSHOT = 100
#: Errors of the changefeed (each retried by the owner) that end a wait at once.
RETRIES = 3
#: Seconds the writer waits after each statement.
PAUSE = 0.002


def fill(server: MariaDBServer, db: str, rows: int) -> None:
    statements = [
        f"CREATE TABLE `{db}`.sbtest (id INT NOT NULL PRIMARY KEY, k INT NOT NULL,"
        " c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k_1 (k))"
    ]
    for first in range(1, rows + 1, 5000):
        values = ",".join(
            f"({i},{i % 1000},'c-{i}','pad-{i}')" for i in range(first, min(first + 5000, rows + 1))
        )
        statements.append(f"INSERT INTO `{db}`.sbtest VALUES {values}")
    execute(server, *statements)


class Writer(threading.Thread):
    """Random inserts, updates (some of the primary key) and deletes across the key range,
    a few hundred statements a second: every chunk's read meets some, and the catch-up
    stays short on a 2-core machine (at full speed the binlog outgrows the table)."""

    def __init__(self, server: MariaDBServer, db: str, seed: int, rows: int = ROWS) -> None:
        super().__init__(daemon=True)
        self.server, self.db, self.rows = server, db, rows
        self.rnd = random.Random(seed)
        self.halt = threading.Event()
        self.statements = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        conn = self.server.connect()
        next_id = self.rows + 1
        try:
            with conn.cursor() as cur:
                while not self.halt.is_set():
                    roll = self.rnd.random()
                    key = self.rnd.randint(1, self.rows)
                    t = f"`{self.db}`.sbtest"
                    if roll < 0.3:
                        cur.execute(f"INSERT INTO {t} VALUES ({next_id}, 1, 'new', 'new')")
                        next_id += 1
                    elif roll < 0.6:
                        cur.execute(f"UPDATE {t} SET k = k + 1, c = 'upd' WHERE id = {key}")
                    elif roll < 0.75:
                        # A primary-key change, often into another chunk.
                        cur.execute(
                            f"UPDATE IGNORE {t} SET id = {next_id + 10_000_000} WHERE id = {key}"
                        )
                        next_id += 1
                    elif roll < 0.9:
                        cur.execute(f"DELETE FROM {t} WHERE id = {key}")
                    else:
                        cur.execute("BEGIN")
                        cur.execute(f"UPDATE {t} SET pad = 'txn' WHERE id = {key}")
                        cur.execute(f"DELETE FROM {t} WHERE id = {self.rnd.randint(1, self.rows)}")
                        cur.execute(f"INSERT INTO {t} VALUES ({next_id}, 2, 'txn', 'txn')")
                        next_id += 1
                        cur.execute("COMMIT")
                    self.statements += 1
                    self.halt.wait(PAUSE)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()

    def stop(self) -> None:
        self.halt.set()
        self.join()
        assert self.error is None, self.error


def row_lock_waits(server: MariaDBServer) -> int:
    return int(execute(server, "SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")[0][1])


@dataclass(frozen=True)
class Sample:
    """The writer's statement count and the snapshot's chunks at one moment."""

    statements: int
    done: int
    total: int

    @property
    def snapshotting(self) -> bool:
        return self.total > 0 and self.done < self.total


def follow_until_streaming(cluster: Cluster, writer: Writer) -> list[Sample]:
    """Samples of the writer and of the snapshot progress the admin API reports, every
    0.1 s, until every table streams (the changefeed has a checkpoint). A changefeed in
    state error is retried by the owner, as in production (a first Spark start can fail);
    failed, an error the retries did not cure, or a failed writer ends the wait at once."""
    samples: list[Sample] = []

    def streaming() -> bool:
        changefeed = cluster.api_changefeed()
        status = changefeed.status
        history = cluster.status().error_history
        assert status.state != "failed" and len(history) < RETRIES, (
            f"the changefeed is {status.state} after {len(history)} errors: {status.error}"
        )
        assert writer.error is None, writer.error
        done = sum(t.snapshot.chunks_done for t in changefeed.tables)
        total = sum(t.snapshot.chunks_total for t in changefeed.tables)
        samples.append(Sample(writer.statements, done, total))
        return bool(status.checkpoint)

    cluster.wait(streaming, TIMEOUT, "every table to stream")
    return samples


def assert_written_during_snapshot(samples: list[Sample], *, between_batches: bool) -> None:
    """The writer committed statements while chunks were still being read (a test that
    wrote only before or after the snapshot would prove nothing about it)."""
    running = [s for s in samples if s.snapshotting]
    shown = f"samples while snapshotting: {running[:3]} ... {running[-3:]}"
    assert running, f"the snapshot was never seen in progress ({len(samples)} samples)"
    assert running[-1].statements - running[0].statements >= WRITES_DURING_SNAPSHOT, shown
    if between_batches:
        # Writes after some chunk batch was done and before the last one was.
        later = [s for s in running if s.done > 0]
        assert len(later) >= 2, shown
        assert later[-1].statements - later[0].statements >= WRITES_DURING_SNAPSHOT, shown
        assert later[-1].done > later[0].done, shown


def stop_and_catch_up(cluster: Cluster, source: MariaDBServer, writer: Writer) -> None:
    """Two more seconds of writes through the binlog; then the writer stops and the
    changefeed's checkpoint must pass the source's last position."""
    time.sleep(2.0)
    writer.stop()
    assert writer.statements > 100, writer.statements
    checkpoint_reaches(cluster, position_now(source), TIMEOUT)
    assert cluster.status().state is ChangefeedState.NORMAL, cluster.describe()


def assert_equal(source: MariaDBServer, sink: MariaDBServer, db: str) -> None:
    report = diff(source, sink, db)
    shown = json.dumps(report.to_dict(), default=str)[:3000]
    assert report.equal and len(report.tables) == 1, shown


def snapshot_chunks_counted(server_metrics: str, table: TableName) -> float:
    """The ``cdc_snapshot_chunks`` counter of one process: the chunks it read and recorded."""
    with urllib.request.urlopen(server_metrics, timeout=5) as response:
        text = response.read().decode()
    labels = {"changefeed": CHANGEFEED, "table": str(table)}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "cdc_snapshot_chunks_total" and sample.labels == labels:
                return sample.value
    return 0.0


@pytest.fixture
def cluster(
    etcd_server: EtcdServer, tmp_path: Path, sink_db: MariaDBServer, source_database: str
) -> Iterator[Cluster]:
    """The test's cluster (not started); afterwards its processes, keys and the
    downstream database are gone."""
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CHANGEFEED, name="snap")
    try:
        yield cluster
    finally:
        cluster.close()
        execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")


@pytest.mark.parametrize("chunk", [1000, 50_000])
def test_snapshot_under_concurrent_writes_converges(
    chunk: int,
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
) -> None:
    db = source_database
    fill(source_db, db, ROWS)
    waits_before = row_lock_waits(source_db)
    cluster.start(CAPTURE)
    cluster.create_changefeed(source_db, sink_db, db, chunk_size=chunk, spark_master="local[2]")
    writer = Writer(source_db, db, seed=chunk)
    writer.start()
    try:
        samples = follow_until_streaming(cluster, writer)
        stop_and_catch_up(cluster, source_db, writer)
    finally:
        writer.halt.set()
    assert_written_during_snapshot(samples, between_batches=chunk == 1000)
    # The writer never waited on a lock: the snapshot took none.
    assert row_lock_waits(source_db) == waits_before
    (table,) = cluster.api_changefeed().tables
    assert table.snapshot.chunks_done == table.snapshot.chunks_total >= ROWS // chunk
    assert table.snapshot.rows >= ROWS * 0.8
    assert_equal(source_db, sink_db, db)


def test_killed_snapshot_resumes_without_rereading_finished_chunks(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
) -> None:
    db = source_database
    table = TableName(db, "sbtest")
    fill(source_db, db, ROWS)
    cluster.start(CAPTURE, metrics=True)
    cluster.create_changefeed(source_db, sink_db, db, chunk_size=2000, spark_master="local[2]")
    writer = Writer(source_db, db, seed=3)
    writer.start()
    progress = SnapshotProgress(cluster.store, CHANGEFEED)
    try:
        # SIGKILL once a batch of chunks is recorded done, while others are still to read.
        cluster.wait(
            lambda: any(r.done for r in progress.load(table)), TIMEOUT, "a chunk batch done"
        )
        cluster.kill(CAPTURE)
        before = {r.chunk.chunk_id: r for r in progress.load(table)}
        finished = {i for i, r in before.items() if r.done}
        assert 0 < len(finished) < len(before), "the kill did not land mid-snapshot"
        assert cluster.status().checkpoint is None
        statements_at_kill = writer.statements

        cluster.wait_gone(CAPTURE)
        cluster.restart(CAPTURE, metrics=True)
        samples = follow_until_streaming(cluster, writer)
        stop_and_catch_up(cluster, source_db, writer)
    finally:
        writer.halt.set()
    assert_written_during_snapshot(samples, between_batches=False)
    # Writes also landed while no server ran: the resumed snapshot and binlog must hold them.
    assert samples[0].statements > statements_at_kill
    after = {r.chunk.chunk_id: r for r in progress.load(table)}
    assert set(after) == set(before) and all(r.done for r in after.values())
    # The finished chunks kept their records, and the restarted process read exactly the rest.
    assert {i: after[i] for i in finished} == {i: before[i] for i in finished}
    counted = snapshot_chunks_counted(cluster.servers[CAPTURE].metrics_url, table)
    assert counted == len(before) - len(finished), (counted, len(before), len(finished))
    assert_equal(source_db, sink_db, db)


def test_snapshot_into_the_file_sink_replays_to_the_source(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
) -> None:
    db, rows = source_database, 40_000
    fill(source_db, db, rows)
    root = tmp_path / "files"
    cluster.start(CAPTURE)
    cluster.create_changefeed(
        source_db,
        sink_db,
        db,
        sink_uri=f"file://{root}?flush-interval=200ms",
        chunk_size=4000,
        spark_master="local[2]",
    )
    writer = Writer(source_db, db, seed=7, rows=rows)
    writer.start()
    try:
        samples = follow_until_streaming(cluster, writer)
        stop_and_catch_up(cluster, source_db, writer)
    finally:
        writer.halt.set()
    assert_written_during_snapshot(samples, between_batches=False)
    (table,) = cluster.api_changefeed().tables
    chunk_files = sorted((root / "snapshot").rglob("chunk-*.json"))
    assert len(chunk_files) == table.snapshot.chunks_total >= rows // 4000
    target = sink_db.connect()
    try:
        replay_into(root, target)
    finally:
        target.close()
    assert_equal(source_db, sink_db, db)


def shares_of(cluster: Cluster, table: TableName) -> list[HeldShare]:
    return ShareBook(cluster.store, CHANGEFEED).held(table)


def chunks_by_capture(shares: list[HeldShare]) -> dict[str, int]:
    """Chunks of the plan per capture that ran their share to its end, from etcd."""
    counted: dict[str, int] = {}
    for held in shares:
        if held.share.state is ShareState.DONE and held.share.capture is not None:
            size = held.share.last - held.share.first
            counted[held.share.capture] = counted.get(held.share.capture, 0) + size
    return counted


@pytest.mark.parametrize("kill", [False, True], ids=["three-captures", "capture-killed"])
def test_shared_snapshot_on_a_spark_cluster_converges(
    kill: bool,
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    spark_cluster: SparkCluster,
) -> None:
    db = source_database
    table = TableName(db, "sbtest")
    fill(source_db, db, ROWS)
    names = ("share-1", "share-2", "share-3")
    cluster.start(*names)
    cluster.create_changefeed(
        source_db, sink_db, db, chunk_size=2000, spark_master=spark_cluster.master_url
    )
    writer = Writer(source_db, db, seed=11)
    writer.start()
    victim, taken = None, []
    try:
        if kill:
            # a capture that runs shares, and is neither the owner nor the table's holder
            def running_elsewhere() -> list[HeldShare]:
                holder = cluster.tasks()[str(table)].capture_id if cluster.tasks() else None
                spare = set(names) - {cluster.owner(), holder}
                return [
                    h
                    for h in shares_of(cluster, table)
                    if h.share.state is ShareState.OPEN and h.share.capture in spare
                ]

            taken = cluster.wait(running_elsewhere, TIMEOUT, "a share on a spare capture")
            victim = taken[0].share.capture
            assert victim is not None
            cluster.kill(victim)
            cluster.wait_gone(victim)
        samples = follow_until_streaming(cluster, writer)
        stop_and_catch_up(cluster, source_db, writer)
    finally:
        writer.halt.set()
    assert_written_during_snapshot(samples, between_batches=False)
    shares = shares_of(cluster, table)
    (api_table,) = cluster.api_changefeed().tables
    assert api_table.snapshot.chunks_done == api_table.snapshot.chunks_total >= ROWS // 2000
    assert shares and all(h.share.state is ShareState.DONE for h in shares), shares
    counted = chunks_by_capture(shares)
    # the shares cover every chunk but the tail, which the table's holder read itself
    assert sum(counted.values()) == api_table.snapshot.chunks_total - 1
    if kill:
        assert victim not in counted, counted  # the lost capture's shares ended elsewhere
        moved = {h.share.n for h in taken}
        assert all(h.share.capture != victim for h in shares if h.share.n in moved)
    else:
        assert len(counted) >= 2, counted  # the work was split
    assert_equal(source_db, sink_db, db)
