"""The cluster as it runs: three `cdc-server` processes, one source, one downstream MariaDB.

Failover: sysbench-style writes across 8 tables while the owner is killed
(SIGKILL) during the snapshot, then a processor during the snapshot, then
another during streaming, then the owner again during streaming (to measure
failover: kill to the changefeed checkpoint advancing again). Every killed
capture is started again, as a supervisor would. The writes stop; all 8
tables must checksum equal, the changefeed be normal and every table run on
a live capture.

Split brain: the owner's process is frozen (SIGSTOP) until its lease expires
and another capture is owner, then thawed (SIGCONT): its writes are refused
by the fence, it steps down, and the cluster's state stays consistent.

Figures (failover time, replication lag under the write load) are printed and
written to ``cluster-figures.json`` in the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from testkit import position_now, wait_for

from cdc.api.health import is_serving
from cdc.changefeed import ChangefeedState, ChangefeedStore, TableTask, TaskState
from cdc.config import load_changefeed_config
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port
from cdc.store import EtcdConfig, EtcdStore
from cdc.store.keys import CaptureKey, TableCheckpointKey, TaskKey, cluster_prefix

# Each column with a NULL marker: CONCAT_WS skips NULLs, so without it (1, NULL, 2) and
# (1, 2, NULL) would sum alike.
NULL_SAFE_ROW = "ISNULL(id), id, ISNULL(k), k, ISNULL(c), c, ISNULL(pad), pad"

TTL = 3
TABLES = [f"sbtest{i}" for i in range(1, 9)]
ROWS = 1500


class Server:
    """One `cdc-server` process with its log file."""

    def __init__(self, name: str, etcd: str, cluster: str, log_dir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.log = log_dir / f"{name}-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "capture.main",
                    f"--etcd={etcd}",
                    f"--addr=127.0.0.1:{self.port}",
                    f"--capture-id={name}",
                    f"--cluster-id={cluster}",
                    f"--lease-ttl={TTL}",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYSPARK_PYTHON": sys.executable},
            )
        wait_for(lambda: is_serving(f"127.0.0.1:{self.port}", timeout=0.5), 60, f"{name} to serve")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait(timeout=60)


class Cluster:
    def __init__(self, etcd: EtcdServer, log_dir: Path) -> None:
        self.cluster = f"test-{uuid.uuid4().hex[:8]}"
        self.etcd = etcd
        self.log_dir = log_dir
        self.store = EtcdStore(EtcdConfig((etcd.endpoint,), prefix=cluster_prefix(self.cluster)))
        self.servers: dict[str, Server] = {}

    def start(self, name: str) -> Server:
        server = Server(name, self.etcd.endpoint, self.cluster, self.log_dir)
        self.servers[name] = server
        return server

    def owner(self) -> str | None:
        item = self.store.get(self.store.keys.owner())
        return None if item is None else item.json()["capture_id"]

    def captures(self) -> set[str]:
        keys = self.store.keys
        return {
            keys.parse(i.key).capture_id for i in self.store.get_prefix(keys.prefix_of(CaptureKey))
        }  # type: ignore[attr-defined]

    def tasks(self) -> dict[str, TableTask]:
        keys = self.store.keys
        return {
            keys.parse(i.key).table: TableTask.from_dict(i.json())  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(TaskKey, "cf1"))
        }

    def checkpoints(self) -> dict[str, Any]:
        keys = self.store.keys
        return {
            keys.parse(i.key).table: i.json().get("checkpoint")  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(TableCheckpointKey, "cf1"))
        }

    def status(self):
        return ChangefeedStore(self.store).get("cf1").status

    def kill_and_restart(self, name: str) -> None:
        """SIGKILL, wait until etcd forgets the capture (lease expiry), start it again."""
        self.servers[name].kill()
        wait_for(lambda: name not in self.captures(), 3 * TTL + 10, f"{name}'s lease to expire")
        self.start(name)

    def close(self) -> None:
        for server in self.servers.values():
            if server.proc.poll() is None:
                server.proc.send_signal(signal.SIGCONT)
                server.proc.kill()
            server.proc.wait()
        self.store.delete_prefix(cluster_prefix(self.cluster) + "/")
        self.store.close()


@pytest.fixture
def cluster(
    etcd_server: EtcdServer, tmp_path: Path, sink_db: MariaDBServer, source_database: str
) -> Iterator[Cluster]:
    """The test's cluster; afterwards its processes, keys and downstream database are gone."""
    cluster = Cluster(etcd_server, tmp_path)
    yield cluster
    cluster.close()
    conn = sink_db.connect()
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{source_database}`")
    conn.close()


class Writer(threading.Thread):
    """oltp_write_only-shaped transactions over the 8 tables, at a steady rate."""

    def __init__(self, server: MariaDBServer, db: str, per_second: float = 150) -> None:
        super().__init__(daemon=True)
        self.server, self.db, self.pause = server, db, 1.0 / per_second
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.transactions = 0

    def run(self) -> None:
        rnd = random.Random(11)
        conn = self.server.connect(autocommit=False)
        try:
            with conn.cursor() as cur:
                while not self.halt.is_set():
                    table = f"`{self.db}`.{rnd.choice(TABLES)}"
                    key = rnd.randint(1, ROWS)
                    cur.execute(f"UPDATE {table} SET k = k + 1 WHERE id = {key}")
                    other = rnd.randint(1, ROWS)
                    cur.execute(f"UPDATE {table} SET c = 'c-{rnd.random():.6f}' WHERE id = {other}")
                    gone = rnd.randint(1, ROWS)
                    cur.execute(f"DELETE FROM {table} WHERE id = {gone}")
                    cur.execute(
                        f"INSERT INTO {table} VALUES ({gone}, {rnd.randint(1, 9999)}, 'new', 'pad')"
                    )
                    conn.commit()
                    self.transactions += 1
                    time.sleep(self.pause)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            conn.close()


def fill(server: MariaDBServer, db: str, rows: int = ROWS) -> None:
    """Creates the 8 sysbench tables (and the database) with ``rows`` rows each."""
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
        for table in TABLES:
            cur.execute(
                f"CREATE TABLE `{db}`.{table} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL,"
                " c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k_1 (k))"
            )
            if rows:
                values = ",".join(f"({i},{i % 97},'c-{i}','pad-{i}')" for i in range(1, rows + 1))
                cur.execute(f"INSERT INTO `{db}`.{table} VALUES {values}")
    conn.close()


def checksums(server: MariaDBServer, db: str) -> dict[str, tuple[int, int]]:
    conn = server.connect()
    out = {}
    try:
        with conn.cursor() as cur:
            for table in TABLES:
                cur.execute(
                    f"SELECT COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', {NULL_SAFE_ROW}))), 0)"
                    f" FROM `{db}`.{table}"
                )
                count, total = cur.fetchone()
                out[table] = (int(count), int(total))
    finally:
        conn.close()
    return out


def checkpoint_reaches(cluster: Cluster, target: Position, timeout: float) -> float:
    """Seconds until the changefeed checkpoint is at or past ``target``."""
    started = time.monotonic()

    def reached() -> bool:
        checkpoint = cluster.status().checkpoint
        return checkpoint is not None and checkpoint.key() >= target.key()

    wait_for(reached, timeout, f"the changefeed checkpoint to reach {target}")
    return time.monotonic() - started


def create_changefeed(
    cluster: Cluster, source: MariaDBServer, sink: MariaDBServer, db: str, **more: Any
) -> None:
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": "cf1",
            "source_uri": source.uri,
            "sink_uri": sink.uri.rstrip("/") + "/?worker-count=2",
            "rules": [f"{db}.*"],
            "spark_master": "local[1]",
            **more,
        },
    )
    ChangefeedStore(cluster.store).create(replace(config, store_credentials=True))


def test_failover_under_writes_keeps_the_downstream_equal(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
) -> None:
    db = source_database
    fill(source_db, db)
    for name in ("capture-a", "capture-b", "capture-c"):
        cluster.start(name)
    first_owner = wait_for(cluster.owner, 15, "an owner")
    create_changefeed(cluster, source_db, sink_db, db, chunk_size=300)
    writer = Writer(source_db, db)
    writer.start()
    figures: dict[str, Any] = {}
    try:
        # 1. The owner dies while the tables are being snapshotted.
        wait_for(
            lambda: (
                len(cluster.tasks()) == 8
                and all(t.state is TaskState.RUN for t in cluster.tasks().values())
            ),
            30,
            "the tables to be scheduled",
        )
        cluster.kill_and_restart(first_owner)
        second_owner = wait_for(cluster.owner, 30, "a new owner")
        assert second_owner != first_owner

        # 2. A processor dies while some of its tables are still in their snapshot.
        def snapshotting_capture() -> str | None:
            checkpoints = cluster.checkpoints()
            owner = cluster.owner()
            for table, task in cluster.tasks().items():
                if (
                    task.state is TaskState.RUN
                    and checkpoints.get(table) is None
                    and task.capture_id != owner
                ):
                    return task.capture_id
            return None

        victim = snapshotting_capture()
        assert victim is not None, (
            "every snapshot had finished before the processor could be killed"
        )
        cluster.kill_and_restart(victim)

        # 3. Every table streams; another processor dies.
        wait_for(lambda: cluster.status().checkpoint is not None, 180, "every table to stream")
        checkpoint_reaches(cluster, position_now(source_db), 120)
        streaming = next(c for c in sorted(cluster.captures()) if c != cluster.owner())
        cluster.kill_and_restart(streaming)
        checkpoint_reaches(cluster, position_now(source_db), 120)

        # 4. Steady load: replication lag; then the owner dies while streaming (failover time).
        lags = [checkpoint_reaches(cluster, position_now(source_db), 60) for _ in range(5)]
        figures["lag_seconds"] = {"mean": sum(lags) / len(lags), "max": max(lags)}
        owner = cluster.owner()
        assert owner is not None
        before = cluster.status().checkpoint
        killed_at = time.monotonic()
        cluster.servers[owner].kill()

        def advanced() -> bool:
            checkpoint = cluster.status().checkpoint
            return checkpoint is not None and before is not None and checkpoint.key() > before.key()

        wait_for(advanced, 60, "the checkpoint to advance under a new owner")
        figures["failover_seconds"] = time.monotonic() - killed_at
        figures["lease_ttl"] = TTL
        wait_for(lambda: owner not in cluster.captures(), 3 * TTL + 10, "the dead owner's lease")
        cluster.start(owner)
    finally:
        writer.halt.set()
        writer.join()
    assert writer.error is None, writer.error
    figures["transactions"] = writer.transactions
    checkpoint_reaches(cluster, position_now(source_db), 120)
    status = cluster.status()
    assert status.state is ChangefeedState.NORMAL
    live = cluster.captures()
    assert len(live) == 3
    tasks = cluster.tasks()
    assert sorted(tasks) == [f"{db}.{t}" for t in TABLES]
    wait_for(
        lambda: all(
            t.state is TaskState.RUN and t.capture_id in cluster.captures()
            for t in cluster.tasks().values()
        ),
        30,
        "every table to run on a live capture",
    )
    assert checksums(sink_db, db) == checksums(source_db, db)
    (tmp_path / "cluster-figures.json").write_text(json.dumps(figures, indent=2))
    print(f"\ncluster figures: {json.dumps(figures)}")


def test_a_frozen_owner_is_fenced_and_steps_down(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
) -> None:
    db = source_database
    fill(source_db, db, rows=0)
    fill(sink_db, db, rows=0)
    for name in ("capture-a", "capture-b"):
        cluster.start(name)
    frozen_name = wait_for(cluster.owner, 15, "an owner")
    create_changefeed(cluster, source_db, sink_db, db, snapshot_mode="never")
    # Mode never reads the binlog from where it stood when the changefeed started.
    wait_for(lambda: cluster.status().start is not None, 15, "the changefeed's start point")
    writer = Writer(source_db, db, per_second=100)
    writer.start()
    try:
        wait_for(
            lambda: (
                len(cluster.checkpoints()) == 8
                and all(c is not None for c in cluster.checkpoints().values())
            ),
            30,
            "every table to stream",
        )
        assert frozen_name in {t.capture_id for t in cluster.tasks().values()}
        checkpoint_reaches(cluster, position_now(source_db), 30)
        frozen = cluster.servers[frozen_name]
        fence_before = cluster.store.get(cluster.store.keys.owner()).create_revision

        frozen.kill(signal.SIGSTOP)
        try:
            new_owner = wait_for(
                lambda: (o := cluster.owner()) is not None and o != frozen_name and o,
                3 * TTL + 10,
                "another capture to become owner",
            )
            wait_for(
                lambda: (
                    len(cluster.tasks()) == 8
                    and all(
                        t.capture_id == new_owner
                        for t in cluster.tasks().values()
                        if t.state is TaskState.RUN
                    )
                ),
                30,
                "the frozen capture's tables to move",
            )
            checkpoint_reaches(cluster, position_now(source_db), 30)
        finally:
            frozen.kill(signal.SIGCONT)
        wait_for(
            lambda: (
                "fenced write refused" in frozen.log.read_text()
                or "stepping down" in frozen.log.read_text()
            ),
            20,
            "the thawed owner to notice it was deposed",
        )
        time.sleep(3)
    finally:
        writer.halt.set()
        writer.join()
    assert writer.error is None, writer.error
    assert cluster.owner() == new_owner
    assert cluster.store.get(cluster.store.keys.owner()).create_revision != fence_before
    checkpoint_reaches(cluster, position_now(source_db), 60)
    assert cluster.status().state is ChangefeedState.NORMAL
    assert len(cluster.tasks()) == 8
    assert checksums(sink_db, db) == checksums(source_db, db)
