"""A file-sink changefeed over several tables on a cluster of two `cdc-server` processes.

A file-sink folder has one writer (its lock), so the owner runs all of the
changefeed's tables on one capture (``FileKind.one_writer``). Tables are
snapshotted, rows follow by binlog, a DDL widens a table and a CREATE TABLE
adds one while it runs (its rows read by a catch-up reader behind the
others, under a checkpoint of its own in the folder's metadata); then the
capture holding the folder is killed in the middle of a write load and the
other one takes every table over, repairing the folder to each table's
checkpoint. The folder, replayed into an empty downstream, must equal the
source (``cdcctl diff``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import Cluster, caught_up, cli_ok
from testkit import execute, position_now

from cdc.changefeed import TaskState
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file.reader import replay_into

pytestmark = pytest.mark.integration

CF = "files-2"
CAPTURES = ("fs-1", "fs-2")
TIMEOUT = 180


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="files")
    try:
        cluster.start(*CAPTURES)
        yield cluster
    finally:
        cluster.close()


def one_capture(cluster: Cluster, tables: int) -> str:
    """Waits until ``tables`` tasks run, all on one live capture; that capture."""

    def together() -> str | None:
        tasks = cluster.tasks()
        running = {t.capture_id for t in tasks.values() if t.state is TaskState.RUN}
        if len(tasks) == tables and len(running) == 1 and running <= cluster.captures():
            return running.pop()
        return None

    found: str = cluster.wait(together, TIMEOUT, f"{tables} tables running on one capture")
    return found


def load(source_db: MariaDBServer, db: str, stop: threading.Event) -> None:
    """Updates and inserts over every table until ``stop``."""
    conn = source_db.connect()
    try:
        i = 0
        with conn.cursor() as cur:
            while not stop.is_set():
                i += 1
                cur.execute(f"UPDATE `{db}`.t{i % 4} SET v = v + 1 WHERE id % 7 = {i % 7}")
                cur.execute(f"INSERT INTO `{db}`.t{i % 4} (id, v) VALUES ({10_000 + i}, {i})")
                cur.execute(f"INSERT INTO `{db}`.added VALUES ({i}, 'n{i}')")
                conn.commit()
    finally:
        conn.close()


def test_a_file_sink_over_several_tables_runs_on_one_capture_and_survives_its_death(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    try:
        run(cluster, source_db, sink_db, db, tmp_path / "out", capsys)
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")


def run(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
    root: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    statements = [f"CREATE DATABASE IF NOT EXISTS `{db}`"]
    for t in range(4):
        statements.append(f"CREATE TABLE `{db}`.t{t} (id INT PRIMARY KEY, v INT)")
        values = ", ".join(f"({i}, {i * t})" for i in range(1, 201))
        statements.append(f"INSERT INTO `{db}`.t{t} VALUES {values}")
    execute(source_db, *statements)
    cli_ok(
        capsys,
        *("changefeed", "create", "--server", cluster.api_address(), "--changefeed-id", CF),
        *("--source-uri", source_db.uri_by_reference(root.parent, "source")),
        *("--sink-uri", f"file://{root}?flush-interval=200ms"),
        *("--filter-rule", f"{db}.*", "--chunk-size", "50", "--spark-master", "local[1]"),
    )
    one_capture(cluster, 4)
    execute(
        source_db,
        f"UPDATE `{db}`.t1 SET v = -v WHERE id < 50",
        f"ALTER TABLE `{db}`.t2 ADD COLUMN note VARCHAR(20) DEFAULT 'd'",
        f"UPDATE `{db}`.t2 SET note = CONCAT('n', id) WHERE id % 3 = 0",
        f"CREATE TABLE `{db}`.added (id INT PRIMARY KEY, s VARCHAR(20))",
        f"INSERT INTO `{db}`.added VALUES (0, 'first')",
    )
    caught_up(cluster, position_now(source_db), TIMEOUT)
    holder = one_capture(cluster, 5)

    stop = threading.Event()
    writer = threading.Thread(target=load, args=(source_db, db, stop))
    writer.start()
    try:
        cluster.wait(
            lambda: len([p for p in root.rglob("CDC*") if "added" in str(p)]) >= 2,
            TIMEOUT,
            "the added table's rows in more than one file",
        )
        cluster.servers[holder].signal(signal.SIGKILL)
        cluster.wait_gone(holder)
        survivor = next(c for c in CAPTURES if c != holder)
        assert one_capture(cluster, 5) == survivor
    finally:
        stop.set()
        writer.join()
    caught_up(cluster, position_now(source_db), TIMEOUT)

    target = sink_db.connect()
    try:
        stats = replay_into(root, target)
    finally:
        target.close()
    assert stats.rows > 800
    report = cli_ok(
        capsys,
        *("diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
        *("--filter", f"{db}.*", "--chunk-size", "100"),
    )
    assert report["equal"] is True, report
    assert len(report["tables"]) == 5
