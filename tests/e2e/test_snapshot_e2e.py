"""The DBLog property end to end: snapshot under concurrent writes, hand-off, catch-up, checksum.

A 200k-row sysbench-shaped table is snapshotted into the downstream MariaDB
through Spark while a writer inserts, updates (also the primary key) and
deletes rows across every chunk; after the writer stops and the changefeed's
checkpoint passes the source's last position, both sides must checksum equal.
The same into the file sink (a smaller table): its root, replayed into an
empty database, must checksum equal to the source.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.config.changefeed import ChangefeedConfig, load_changefeed_config
from cdc.model.schema import TableName
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file.reader import replay_into
from cdc.source.flavor import current_position, detect
from cdc.store import EtcdStore
from processor.checkpoints import TableCheckpoints
from processor.runner import ChangefeedRunner, RunnerHooks
from processor.snapshot_progress import SnapshotProgress

# Each column with a NULL marker: CONCAT_WS skips NULLs, so without it (1, NULL, 2) and
# (1, 2, NULL) would sum alike.
NULL_SAFE_ROW = "ISNULL(id), id, ISNULL(k), k, ISNULL(c), c, ISNULL(pad), pad"

ROWS = 200_000


def fill(conn: Any, db: str, rows: int) -> None:
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE `{db}`.sbtest (id INT NOT NULL PRIMARY KEY, k INT NOT NULL,"
            " c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k_1 (k))"
        )
        for first in range(1, rows + 1, 5000):
            values = ",".join(
                f"({i},{i % 1000},'c-{i}','pad-{i}')"
                for i in range(first, min(first + 5000, rows + 1))
            )
            cur.execute(f"INSERT INTO `{db}`.sbtest VALUES {values}")


class Writer(threading.Thread):
    """Random inserts, updates (some of the primary key) and deletes across the key range."""

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
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            conn.close()


def checksum(server: MariaDBServer, db: str) -> tuple[int, int, int]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                f"SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', {NULL_SAFE_ROW}))), 0),"
                f" COALESCE(BIT_XOR(CRC32(CONCAT_WS('|', {NULL_SAFE_ROW}))), 0) FROM `{db}`.sbtest"
            )
            count, total, xor = cur.fetchone()
    finally:
        conn.close()
    return int(count), int(total), int(xor)


def row_lock_waits(server: MariaDBServer) -> int:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_waits'")
            return int(cur.fetchone()[1])
    finally:
        conn.close()


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with etcd_server.store(etcd_prefix) as store:
        yield store


def config(
    source_db: MariaDBServer, sink_db: MariaDBServer, db: str, chunk: int
) -> ChangefeedConfig:
    return load_changefeed_config(
        None,
        {
            "changefeed_id": f"e2e-{chunk}",
            "source_uri": source_db.uri,
            "sink_uri": sink_db.uri.rstrip("/") + "/?worker-count=4",
            "rules": [f"{db}.*"],
            "chunk_size": chunk,
        },
    )


def run_until_caught_up(
    runner: ChangefeedRunner, source_db: MariaDBServer, writer: Writer, write_after: float
) -> None:
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            runner.run(stop)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 600
    while runner.stats.binlog_rows == 0 and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(write_after)
    writer.halt.set()
    writer.join()
    assert writer.error is None, writer.error
    conn = source_db.connect()
    end = current_position(conn, detect(conn))
    conn.close()
    while thread.is_alive() and time.monotonic() < deadline:
        reached = runner.stats.checkpoint
        if reached is not None and reached.key() >= end.key():
            break
        time.sleep(0.2)
    stop.set()
    thread.join(timeout=60)
    assert not failure, failure
    assert runner.stats.checkpoint is not None and runner.stats.checkpoint.key() >= end.key()


@pytest.mark.parametrize("chunk", [1000, 50_000])
def test_snapshot_under_concurrent_writes_converges(
    chunk: int,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    store: EtcdStore,
    spark: Any,
) -> None:
    db = source_database
    conn = source_db.connect()
    fill(conn, db, ROWS)
    conn.close()
    waits_before = row_lock_waits(source_db)
    writer = Writer(source_db, db, seed=chunk)
    writer.start()
    runner = ChangefeedRunner(config(source_db, sink_db, db, chunk), store, spark)
    try:
        run_until_caught_up(runner, source_db, writer, write_after=2.0)
        assert writer.statements > 100
        # The writer never waited on a lock: the snapshot took none.
        assert row_lock_waits(source_db) == waits_before
        assert runner.stats.snapshot_rows >= ROWS * 0.8
        assert len(runner.stats.chunks_run) >= ROWS // chunk
        assert checksum(source_db, db) == checksum(sink_db, db)
    finally:
        _drop(sink_db, db)


def test_killed_snapshot_resumes_without_rereading_finished_chunks(
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    store: EtcdStore,
    spark: Any,
) -> None:
    db = source_database
    conn = source_db.connect()
    fill(conn, db, ROWS)
    conn.close()
    writer = Writer(source_db, db, seed=3)
    writer.start()
    cfg = config(source_db, sink_db, db, 2000)

    class Crash(Exception):
        pass

    batches: list[list[str]] = []

    def crash_after_three(done: list[str]) -> None:
        batches.append(done)
        if len(batches) == 3:
            raise Crash

    first = ChangefeedRunner(
        cfg, store, spark, hooks=RunnerHooks(after_chunk_batch=crash_after_three)
    )
    try:
        with pytest.raises(Crash):
            first.run(threading.Event())
        finished = set(first.stats.chunks_run)
        progress = SnapshotProgress(store, cfg.changefeed_id)
        table = TableName(db, "sbtest")
        assert {r.chunk.chunk_id for r in progress.load(table) if r.done} == finished
        assert TableCheckpoints(store, cfg.changefeed_id).changefeed_checkpoint() is None

        second = ChangefeedRunner(cfg, store, spark)
        run_until_caught_up(second, source_db, writer, write_after=2.0)
        again = set(second.stats.chunks_run)
        assert finished and not finished & again
        assert len(finished | again) == len(progress.load(table))
        assert checksum(source_db, db) == checksum(sink_db, db)
    finally:
        writer.halt.set()
        _drop(sink_db, db)


def test_snapshot_into_the_file_sink_replays_to_the_source(
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    store: EtcdStore,
    spark: Any,
    tmp_path: Path,
) -> None:
    db, rows = source_database, 40_000
    conn = source_db.connect()
    fill(conn, db, rows)
    conn.close()
    writer = Writer(source_db, db, seed=7, rows=rows)
    writer.start()
    root = tmp_path / "files"
    cfg = load_changefeed_config(
        None,
        {
            "changefeed_id": "e2e-files",
            "source_uri": source_db.uri,
            "sink_uri": f"file://{root}?flush-interval=200ms",
            "rules": [f"{db}.*"],
            "chunk_size": 4000,
        },
    )
    runner = ChangefeedRunner(cfg, store, spark)
    try:
        run_until_caught_up(runner, source_db, writer, write_after=2.0)
        assert writer.statements > 100
        chunk_files = sorted((root / "snapshot").rglob("chunk-*.json"))
        assert len(chunk_files) == len(runner.stats.chunks_run) >= rows // 4000
        target = sink_db.connect()
        try:
            replay_into(root, target)
        finally:
            target.close()
        assert checksum(source_db, db) == checksum(sink_db, db)
    finally:
        writer.halt.set()
        _drop(sink_db, db)


def _drop(server: MariaDBServer, db: str) -> None:
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
    conn.close()
