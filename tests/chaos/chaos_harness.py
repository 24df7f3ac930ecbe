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
the fixtures that build these objects are in tests/chaos/conftest.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
from testkit import position_now, wait_for

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.api.health import is_serving
from cdc.changefeed import (
    ChangefeedState,
    ChangefeedStatus,
    ChangefeedStore,
    TableRecord,
    TableState,
    TableTask,
    TaskState,
)
from cdc.cli.api_client import open_api
from cdc.config import load_changefeed_config
from cdc.config.uri import parse_source_uri
from cdc.diff import DiffReport, check
from cdc.filter.table_filter import TableFilter
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.ports import free_port
from cdc.playground.procs import spawn
from cdc.store import EtcdConfig, EtcdStore, StoreError
from cdc.store.keys import CaptureKey, TableCheckpointKey, TaskKey, cluster_prefix

TTL = 3
TABLES = tuple(f"sbtest{i}" for i in range(1, 5))
ROWS = 1000
CHANGEFEED = "chaos"
CAPTURES = ("capture-a", "capture-b", "capture-c")


def start_again(server: MariaDBServer | EtcdServer) -> None:
    """Starts a stopped server again on the same data directory and port.

    Through a twin without ``die_with_parent``: that option forks with a
    pre-exec hook, and a fork of this process while its gRPC threads run (etcd
    client, admin API channels) can abort the child before it execs
    (SIGABRT, "epoll_wait error: Bad file descriptor"). The session fixture
    still stops the server at the end through its pid file.
    """
    type(server)(server.spec).start()  # type: ignore[arg-type]


# --- the cluster --------------------------------------------------------------------------------

# A killed pytest takes its cdc-servers along (the kernel's parent-death signal), set by
# setpriv rather than a pre-exec hook, for the reason start_again gives.
_DIE_WITH_PYTEST = ("setpriv", "--pdeathsig", "SIGKILL")


class Server:
    """One `cdc-server` process and its log file; ``wait_serving`` after the constructor."""

    def __init__(self, name: str, etcd: str, cluster: str, log_dir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.log = log_dir / f"{name}-{time.monotonic_ns()}.log"
        argv = [
            *_DIE_WITH_PYTEST,
            sys.executable,
            "-m",
            "capture.main",
            f"--etcd={etcd}",
            f"--addr=127.0.0.1:{self.port}",
            f"--capture-id={name}",
            f"--cluster-id={cluster}",
            f"--lease-ttl={TTL}",
        ]
        self.proc = spawn(argv, self.log, env={**os.environ, "PYSPARK_PYTHON": sys.executable})

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wait_serving(self, timeout: float = 60) -> None:
        def serving() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"{self.name} exited with code {self.proc.returncode}; see {self.log}"
                )
            return is_serving(self.address, timeout=0.5)

        wait_for(serving, timeout, f"{self.name} to serve")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait(timeout=60)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None


class Cluster:
    """The test's `cdc-server` processes and a view of their state in etcd."""

    def __init__(self, etcd_endpoint: str, log_dir: Path) -> None:
        self.cluster = f"chaos-{uuid.uuid4().hex[:8]}"
        self.etcd_endpoint = etcd_endpoint
        self.log_dir = log_dir
        self.store = EtcdStore(EtcdConfig((etcd_endpoint,), prefix=cluster_prefix(self.cluster)))
        self.feeds = ChangefeedStore(self.store)
        self.servers: dict[str, Server] = {}

    def start(self, *names: str) -> None:
        """Starts ``names`` side by side and waits until each serves its admin API."""
        started = [Server(n, self.etcd_endpoint, self.cluster, self.log_dir) for n in names]
        for server in started:
            self.servers[server.name] = server
        for server in started:
            server.wait_serving()

    # --- what etcd says ---

    def owner(self) -> str | None:
        item = self.store.get(self.store.keys.owner())
        return None if item is None else item.json()["capture_id"]

    def captures(self) -> set[str]:
        keys = self.store.keys
        return {
            keys.parse(i.key).capture_id  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(CaptureKey))
        }

    def tasks(self) -> dict[str, TableTask]:
        keys = self.store.keys
        return {
            keys.parse(i.key).table: TableTask.from_dict(i.json())  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(TaskKey, CHANGEFEED))
        }

    def records(self) -> dict[str, TableRecord]:
        keys = self.store.keys
        return {
            keys.parse(i.key).table: TableRecord.from_dict(i.json())  # type: ignore[attr-defined]
            for i in self.store.get_prefix(keys.prefix_of(TableCheckpointKey, CHANGEFEED))
        }

    def status(self) -> ChangefeedStatus:
        return self.feeds.get(CHANGEFEED).status

    def describe(self) -> str:
        """The changefeed's status and tables, for failure messages."""
        try:
            status = self.status()
            tasks, records = self.tasks(), self.records()
            captures = sorted(self.captures())
        except StoreError as exc:
            return f"(etcd unreadable: {exc})"
        lines = [
            f"state={status.state.value} checkpoint={status.checkpoint} "
            f"error={status.error.message if status.error else None} captures={captures} "
            f"owner={self.owner()}"
        ]
        for table in sorted(set(tasks) | set(records)):
            task, record = tasks.get(table), records.get(table)
            lines.append(
                f"  {table}: task={task.state.value if task else '-'}@"
                f"{task.capture_id if task else '-'} record="
                f"{record.state.value if record else '-'}@{record.capture_id if record else '-'}"
                f" checkpoint={record.checkpoint if record else '-'}"
                f" error={record.error if record else '-'}"
            )
        lines.append("logs: " + ", ".join(str(s.log) for s in self.servers.values()))
        return "\n".join(lines)

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        """``wait_for``, with the cluster's state at the time of a timeout in the message."""
        try:
            return wait_for(condition, timeout, what)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from None

    # --- the admin API ---

    def api_address(self) -> str:
        return next(s.address for s in self.servers.values() if s.alive)

    def create_changefeed(
        self, source: MariaDBServer, sink: MariaDBServer, db: str, **more: Any
    ) -> None:
        """Creates the changefeed through the admin API (CreateChangefeed), as cdcctl does;
        the passwords travel by reference (password-file), never stored in etcd."""
        config = load_changefeed_config(
            None,
            {
                "changefeed_id": CHANGEFEED,
                "source_uri": self._uri(source, "source"),
                "sink_uri": self._uri(sink, "sink") + "&worker-count=2",
                "rules": [f"{db}.*"],
                "spark_master": "local[1]",
                **more,
            },
        )
        request = admin_pb2.CreateChangefeedRequest(
            config=admin_pb2.ChangefeedConfigJson(json=json.dumps(config.to_dict(mask=False)))
        )
        with open_api(self.api_address()) as api:
            created = api.CreateChangefeed(request, timeout=30)
        assert created.changefeed_id == CHANGEFEED

    def _uri(self, server: MariaDBServer, name: str) -> str:
        secret = self.log_dir / f"{name}.password"
        secret.write_text(server.password)
        secret.chmod(0o600)
        return f"mysql://{server.user}@{server.host}:{server.port}/?password-file={secret}"

    def api_changefeed(self) -> admin_pb2.Changefeed:
        """GetChangefeed through the admin API of a live server."""
        with open_api(self.api_address()) as api:
            return api.GetChangefeed(admin_pb2.ChangefeedRef(changefeed_id=CHANGEFEED), timeout=30)

    # --- faults ---

    def kill(self, name: str) -> None:
        self.servers[name].signal(signal.SIGKILL)

    def wait_gone(self, name: str) -> None:
        wait_for(lambda: name not in self.captures(), 3 * TTL + 10, f"{name}'s lease to expire")

    def restart(self, name: str) -> None:
        """Starts ``name`` again, as a supervisor would after it died."""
        self.start(name)

    def close(self) -> None:
        for server in self.servers.values():
            if server.alive:
                server.proc.send_signal(signal.SIGCONT)
                server.proc.kill()
            server.proc.wait()
        try:
            self.store.delete_prefix(cluster_prefix(self.cluster) + "/")
        finally:
            self.store.close()


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
        except BaseException as exc:  # noqa: BLE001 - reported by the test
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


def checkpoint_reaches(cluster: Cluster, target: Position, timeout: float) -> float:
    """Seconds until the changefeed checkpoint is at or past ``target``."""
    started = time.monotonic()

    def reached() -> bool:
        checkpoint = cluster.status().checkpoint
        return checkpoint is not None and checkpoint.key() >= target.key()

    cluster.wait(reached, timeout, f"the changefeed checkpoint to reach {target}")
    return time.monotonic() - started


def diff(source: MariaDBServer, sink: MariaDBServer, db: str) -> DiffReport:
    """The consistency checker's report on ``db`` (source vs. downstream)."""
    return check(
        parse_source_uri(source.uri),
        parse_source_uri(sink.uri),
        TableFilter.parse([f"{db}.*"]),
        chunk_size=500,
        threads=2,
    )


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
