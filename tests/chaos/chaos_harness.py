"""The fault-injection harness: a cluster of real `cdc-server` processes, a paced writer
that rides out faults, and the end-of-test verdict (issue #9).

    Cluster ─ N cdc-server processes (capture.main) on one etcd key prefix, TTL 3 s
    Writer  ─ oltp_write_only-shaped transactions over the tables at a steady rate;
              a statement that fails because the source is away is retried on a
              fresh connection until the source is back (the writer never gives up)
    settle  ─ writer stopped ─► changefeed checkpoint >= the source's last position
              ─► state normal (admin API and etcd) ─► every table running on a live
              capture ─► cdc.diff.check finds zero differences

A test module imports this file directly (pytest puts tests/chaos on sys.path);
the fixtures that build these objects are in tests/chaos/conftest.py. The cluster of
`cdc-server` processes is tests/cluster_harness.py, shared with tests/fuzz.
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
from dataclasses import dataclass, field

import pymysql
from cluster_harness import (
    CAPTURES,
    CHANGEFEED,
    TTL,
    Cluster,
    Server,
    checkpoint_reaches,
    diff,
    start_again,
)
from testkit import position_now, wait_for

from cdc.changefeed import ChangefeedState, TableState, TaskState
from cdc.diff import DiffReport
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

__all__ = [
    "CAPTURES",
    "CHANGEFEED",
    "ROWS",
    "TABLES",
    "TTL",
    "Cluster",
    "Scene",
    "Server",
    "Writer",
    "checkpoint_reaches",
    "diff",
    "fill",
    "position_now",
    "settle_and_verify",
    "start_again",
    "wait_for",
]

TABLES = tuple(f"sbtest{i}" for i in range(1, 5))
ROWS = 1000


# --- the source's tables and the writer ----------------------------------------------------------


def fill(server: MariaDBServer, db: str, rows: int = ROWS) -> None:
    """Creates ``db`` and its sysbench tables, ``rows`` rows each."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
            for table in TABLES:
                cur.execute(
                    f"CREATE TABLE `{db}`.{table} (id INT NOT NULL PRIMARY KEY, k INT NOT NULL,"
                    " c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k_1 (k))"
                )
                values = ",".join(f"({i},{i % 97},'c-{i}','pad-{i}')" for i in range(1, rows + 1))
                cur.execute(f"INSERT INTO `{db}`.{table} VALUES {values}")
    finally:
        conn.close()


class Writer(threading.Thread):
    """oltp_write_only-shaped transactions over ``TABLES`` at ``per_second``, through faults.

    A transaction that fails on a connection-level error (the source shutting
    down, restarting, unreachable) is dropped with its connection and tried
    again, with fresh random values, on a new connection every 0.2 s: the
    writer keeps writing through every fault. Whether a transaction whose
    COMMIT was cut off took effect does not matter: the verdict compares the
    source with the downstream, not with a model of the writes. Any other
    error ends the writer and is reported in ``error``.
    """

    def __init__(self, server: MariaDBServer, db: str, per_second: float = 60) -> None:
        super().__init__(daemon=True, name="chaos-writer")
        self.server, self.db, self.pause = server, db, 1.0 / per_second
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.transactions = 0
        self.retries = 0

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)
        assert not self.is_alive(), "the writer did not stop"
        assert self.error is None, f"the writer failed: {self.error!r}"

    def run(self) -> None:
        rnd = random.Random(11)
        conn: pymysql.connections.Connection | None = None
        try:
            while not self.halt.is_set():
                try:
                    if conn is None:
                        conn = self.server.connect(
                            autocommit=False, connect_timeout=2, read_timeout=10, write_timeout=10
                        )
                    self._transaction(conn, rnd)
                    self.transactions += 1
                except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                    self.retries += 1
                    if conn is not None:
                        _close_quietly(conn)
                        conn = None
                    self.halt.wait(0.2)
                    continue
                self.halt.wait(self.pause)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            if conn is not None:
                _close_quietly(conn)

    def _transaction(self, conn: pymysql.connections.Connection, rnd: random.Random) -> None:
        table = f"`{self.db}`.{rnd.choice(TABLES)}"
        with conn.cursor() as cur:
            cur.execute(f"UPDATE {table} SET k = k + 1 WHERE id = {rnd.randint(1, ROWS)}")
            cur.execute(
                f"UPDATE {table} SET c = 'c-{rnd.random():.6f}' WHERE id = {rnd.randint(1, ROWS)}"
            )
            gone = rnd.randint(1, ROWS)
            cur.execute(f"DELETE FROM {table} WHERE id = {gone}")
            cur.execute(
                f"INSERT INTO {table} VALUES ({gone}, {rnd.randint(1, 9999)}, 'new', 'pad')"
            )
        conn.commit()

    def wait_transactions(self, more: int, timeout: float = 30) -> None:
        """Waits until the writer has committed ``more`` transactions beyond now."""
        target = self.transactions + more
        wait_for(lambda: self.transactions >= target, timeout, f"{more} more transactions")


def _close_quietly(conn: pymysql.connections.Connection) -> None:
    with contextlib.suppress(Exception):
        conn.close()


# --- the verdict --------------------------------------------------------------------------------


def settle_and_verify(
    cluster: Cluster,
    writer: Writer,
    source: MariaDBServer,
    sink: MariaDBServer,
    db: str,
    *,
    timeout: float = 90,
) -> DiffReport:
    """The end of every fault test (see the module doc); returns the equal report."""
    writer.stop()
    assert writer.transactions > 0
    target = position_now(source)
    catch_up = checkpoint_reaches(cluster, target, timeout)
    status = cluster.status()
    assert status.state is ChangefeedState.NORMAL, cluster.describe()
    api = cluster.api_changefeed()
    assert api.status.state == ChangefeedState.NORMAL.value, api.status
    expected = sorted(f"{db}.{t}" for t in TABLES)
    assert sorted(t.table for t in api.tables) == expected, api.tables

    def on_live_captures() -> bool:
        live = cluster.captures()
        tasks = cluster.tasks()
        records = cluster.records()
        return live == {n for n, s in cluster.servers.items() if s.alive} and (
            sorted(tasks) == expected
            and all(
                task.state is TaskState.RUN
                and task.capture_id in live
                and table in records
                and records[table].capture_id == task.capture_id
                and records[table].state is TableState.RUNNING
                for table, task in tasks.items()
            )
        )

    cluster.wait(on_live_captures, 30, "every table to run on a live capture")
    report = diff(source, sink, db)
    if not report.equal:
        details = json.dumps(report.to_dict(), default=str)[:4000]
        raise AssertionError(
            f"the downstream differs from the source: {report.summary()}\n{details}\n"
            f"{cluster.describe()}"
        )
    assert report.summary()["tables_equal"] == len(TABLES)
    assert report.summary()["rows_checked"] > 0
    print(
        f"\n{db}: {writer.transactions} transactions ({writer.retries} retried), "
        f"caught up in {catch_up:.1f}s, changefeed errors {len(status.error_history)}, "
        f"{report.summary()['rows_checked']} rows equal"
    )
    return report


# --- one test's world ----------------------------------------------------------------------


@dataclass
class Scene:
    """One test's world: its database on both servers, its cluster, its writer."""

    db: str
    source: MariaDBServer
    sink: MariaDBServer
    etcd: EtcdServer
    cluster: Cluster
    writer: Writer | None = field(default=None)

    def start_writer(self, per_second: float = 60) -> Writer:
        self.writer = Writer(self.source, self.db, per_second)
        self.writer.start()
        return self.writer

    def streaming(self) -> Writer:
        """Three captures streaming every table under the write load (no snapshot).

        The tables are filled alike on both sides and the changefeed reads the
        binlog from where it stands (snapshot mode never), so a streaming fault
        costs no Spark start; the snapshot faults use :meth:`snapshotting`.
        """
        fill(self.source, self.db)
        fill(self.sink, self.db)
        self.cluster.start(*CAPTURES)
        wait_for(self.cluster.owner, 20, "an owner")
        self.cluster.create_changefeed(self.source, self.sink, self.db, snapshot_mode="never")
        wait_for(lambda: self.cluster.status().start is not None, 20, "the changefeed's start")
        writer = self.start_writer()
        writer.wait_transactions(20)
        target = position_now(self.source)
        self.cluster.wait(
            lambda: (
                len(self.cluster.records()) == len(TABLES)
                and (c := self.cluster.status().checkpoint) is not None
                and c.key() >= target.key()
            ),
            60,
            f"every table to stream past {target}",
        )
        return writer

    def snapshotting(self, chunk_size: int = 250) -> Writer:
        """Three captures, the writer running, a changefeed snapshotting the tables."""
        fill(self.source, self.db)
        self.cluster.start(*CAPTURES)
        wait_for(self.cluster.owner, 20, "an owner")
        writer = self.start_writer()
        self.cluster.create_changefeed(self.source, self.sink, self.db, chunk_size=chunk_size)
        return writer
