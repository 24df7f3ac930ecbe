"""Many tables on one capture: snapshot time, lag under load, and what the servers see.

    .venv/bin/python bench/many_tables_bench.py [--tables 8,100,1000] [--rows 1000]
        [--rate 2000] [--seconds 60] [--worker-count 4] [--no-report]

For each table count, on fresh private servers (`bench/servers.py`: a source with
binlog and a downstream, both with a buffer pool larger than the data) and one
`cdc-server` (`bench/cluster.py`); the product is driven only through the
`cdc-server` process, `cdcctl` / the admin API, and SQL:

1. Fill: --tables sysbench tables of --rows rows (`bench/sysbench.py`) and a
   heartbeat table in one database; the source's position after the fill.
2. Snapshot: the clock starts, `cdcctl changefeed create` (snapshot mode
   `initial`, filter `<db>.*`, sink = the downstream as a dedicated user with
   an explicit worker-count); the clock stops when the changefeed's checkpoint
   (admin API) passes the fill's position. `cdc.diff.check` then confirms every
   table equal (not timed, reported).
3. Load for --seconds: oltp_write_only-shaped transactions (two updates, a
   delete and an insert of one table chosen at random among all of them) at
   --rate row changes/s, spread over --load-connections connections, while a
   heartbeat row is updated every 50 ms on the source and polled every 10 ms
   downstream; a heartbeat's lag is its commit to its first sight downstream.
   Every second: `Binlog Dump` threads on the source, connections of the
   service's source user and of its sink user, the VmRSS of the cdc-server and
   of its child processes (the Spark JVM, Spark's Python workers).
4. Settle: the checkpoint must pass the source's position at the load's end
   within --settle-timeout, or the changefeed is reported stuck; then the
   tables are compared again.

Writes one section of docs/benchmarks.md (`bench/report.py`) with one column
per table count, so the growth with the number of tables is visible.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import secrets
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc
import pymysql
from pymysql.constants import CLIENT

from bench.cluster import Cluster, cluster, position_now, private_etcd
from bench.replication_bench import percentile
from bench.report import update_section
from bench.servers import mariadb
from bench.sysbench import fill
from cdc.api.gen.cdc.v1 import admin_pb2, admin_pb2_grpc
from cdc.cli.api_client import open_api
from cdc.cli.main import main as cdcctl
from cdc.diff.checker import check as diff_check
from cdc.filter.table_filter import TableFilter
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.uri.mysql import parse_source_uri

DB = "many"
CHANGEFEED = "many-tables"
SOURCE_USER, SINK_USER = "cdcsrc", "cdcsink"
SOURCE_PASSWORD_ENV, SINK_PASSWORD_ENV = "CDC_BENCH_SOURCE_PASSWORD", "CDC_BENCH_SINK_PASSWORD"
ROW_CHANGES_PER_TXN = 4
HEARTBEAT_EVERY, POLL_EVERY, SAMPLE_EVERY = 0.05, 0.01, 1.0
#: Changefeed states from which it does not move on by itself.
FINAL_STATES = frozenset({"failed", "finished", "stopped"})
GIB = 1024**3
#: The lag of a heartbeat never seen downstream (so percentiles do not hide it).
NEVER = float("inf")


@dataclass(frozen=True)
class BenchConfig:
    tables: tuple[int, ...]
    rows: int
    rate: int
    seconds: float
    worker_count: int
    load_connections: int
    buffer_pool: str
    max_connections: int
    warmup: float
    snapshot_timeout: float
    settle_timeout: float
    write_report: bool


@dataclass
class Peaks:
    """The highest value of each sampled figure within one phase."""

    values: dict[str, int] = field(default_factory=dict)

    def see(self, name: str, value: int) -> None:
        self.values[name] = max(value, self.values.get(name, value))

    def get(self, name: str) -> int | None:
        return self.values.get(name)


@dataclass
class Result:
    """Everything measured for one table count; None where a step did not get that far."""

    tables: int
    data_bytes: int = 0
    snapshot_s: float | None = None
    create_s: float | None = None
    snapshot_equal: str | None = None
    row_changes: int = 0
    load_s: float = 0.0
    lags: list[float] = field(default_factory=list)
    settle_s: float | None = None
    settled: str | None = None
    after_equal: str | None = None
    checkpoint_moves: int = 0
    peaks: dict[str, Peaks] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# --- the servers and the data --------------------------------------------------------------


def server_options(config: BenchConfig) -> tuple[str, ...]:
    return (
        f"--innodb-buffer-pool-size={config.buffer_pool}",
        f"--max-connections={config.max_connections}",
    )


def add_user(server: MariaDBServer, user: str, password: str) -> None:
    """A user for the service alone, so its sessions can be counted (not binlogged)."""
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SET sql_log_bin = 0")
        for host in ("%", "127.0.0.1"):
            cur.execute(f"CREATE USER '{user}'@'{host}' IDENTIFIED BY '{password}'")
            cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{user}'@'{host}'")
    conn.close()


def service_uri(server: MariaDBServer, user: str, password_env: str, extra: str = "") -> str:
    return f"mysql://{quote(user)}@{server.host}:{server.port}/?password-env={password_env}{extra}"


def fill_source(source: MariaDBServer, tables: int, rows: int) -> int:
    """The sysbench tables and the heartbeat table; their tablespace files' bytes."""
    conn = source.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {DB}")
        cur.execute(f"CREATE TABLE {DB}.heartbeat (id INT PRIMARY KEY, seq BIGINT NOT NULL)")
        cur.execute(f"INSERT INTO {DB}.heartbeat VALUES (1, 0)")
    for n in range(1, tables + 1):
        fill(conn, rows, db=DB, table=f"sbtest{n}", create_db=False)
    conn.close()
    return sum(path.stat().st_size for path in (source.data_dir / DB).glob("*.ibd"))


def buffer_pool_bytes(server: MariaDBServer) -> int:
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@innodb_buffer_pool_size")
        size = int(cur.fetchone()[0])
    conn.close()
    return size


def compare(source: MariaDBServer, target: MariaDBServer) -> str:
    """`cdc.diff.check` of every table of the database: "equal" or what differs."""
    report = diff_check(
        parse_source_uri(source.uri),
        parse_source_uri(target.uri, field="target-uri"),
        TableFilter.parse([f"{DB}.*"]),
        threads=2,
    )
    summary = report.summary()
    if report.equal:
        return f"equal ({summary['tables']} tables, {report.elapsed_seconds:.0f} s to check)"
    return (
        f"DIFFERENT: {summary['tables_different']} of {summary['tables']} tables,"
        f" {summary['rows_different']} rows"
    )


# --- the changefeed, through cdcctl and the admin API --------------------------------------


@dataclass(frozen=True)
class FeedStatus:
    state: str
    checkpoint: Position | None
    error: str | None


def create_changefeed(address: str, source_uri: str, sink_uri: str) -> str | None:
    """`cdcctl changefeed create`, run in this process (no interpreter start on the clock);
    what it printed to stderr when it failed."""
    argv = [
        "changefeed", "create", "--server", address, "--changefeed-id", CHANGEFEED,
        "--source-uri", source_uri, "--sink-uri", sink_uri, "--filter-rule", f"{DB}.*",
        "--snapshot-mode", "initial",
    ]  # fmt: skip
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cdcctl(argv)
    return None if code == 0 else f"cdcctl changefeed create exited {code}: {err.getvalue()}"


def feed_status(api: admin_pb2_grpc.ChangefeedServiceStub) -> FeedStatus:
    """The changefeed's state and checkpoint (the list call: no per-table records)."""
    reply = api.ListChangefeeds(admin_pb2.ListChangefeedsRequest(), timeout=30)
    for cf in reply.changefeeds:
        if cf.changefeed_id == CHANGEFEED:
            status = cf.status
            checkpoint = Position.parse(status.checkpoint) if status.checkpoint else None
            return FeedStatus(status.state, checkpoint, status.error or None)
    raise LookupError(f"changefeed {CHANGEFEED} is not listed")


def wait_checkpoint(
    api: admin_pb2_grpc.ChangefeedServiceStub, target: Position, since: float, timeout: float
) -> tuple[float | None, FeedStatus]:
    """Seconds from ``since`` until the checkpoint is at or past ``target``; None when it
    is not within ``timeout`` or the changefeed stopped for good. A server that does not
    answer is waited for like one that makes no progress."""
    status = FeedStatus("not listed yet", None, None)
    while True:
        try:
            status = feed_status(api)
        except grpc.RpcError as exc:
            code = exc.code().name  # type: ignore[attr-defined]
            status = FeedStatus(f"unknown: the admin API answered {code}", status.checkpoint, None)
        now = time.monotonic()
        if status.checkpoint is not None and status.checkpoint.key() >= target.key():
            return now - since, status
        if status.state in FINAL_STATES or now - since > timeout:
            return None, status
        time.sleep(0.1)


# --- what the servers and the machine see --------------------------------------------------


def process_tree(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (command name, VmRSS bytes) for ``root`` and every descendant."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    tree: dict[int, tuple[str, int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        rss = fields.get("VmRSS", "0 kB").split()[0]
        tree[pid] = (fields.get("Name", "?").strip(), int(rss) * 1024)
        todo.extend(children.get(pid, []))
    return tree


class Sampler(threading.Thread):
    """Every second, the figures the issue bounds, as peaks per phase (``phase`` is set by
    the caller: snapshot, load, settle). Also counts the checkpoint's moves in each phase."""

    def __init__(
        self,
        servers: tuple[MariaDBServer, MariaDBServer],
        server_pid: int,
        status: Callable[[], FeedStatus],
    ) -> None:
        super().__init__(daemon=True)
        self.source, self.target = servers
        self.server_pid = server_pid
        self.status = status
        self.phase = "snapshot"
        self.peaks: dict[str, Peaks] = {}
        self.moves: dict[str, int] = {}
        self.halt = threading.Event()
        self.errors: list[str] = []
        self.seen_errors: set[str] = set()

    def run(self) -> None:
        source, target = self.source.connect(), self.target.connect()
        last: Position | None = None
        try:
            while not self.halt.wait(SAMPLE_EVERY):
                phase = self.phase
                peaks = self.peaks.setdefault(phase, Peaks())
                try:
                    self._sample_sql(source, target, peaks)
                    self._sample_rss(peaks)
                    status = self.status()
                except LookupError:
                    continue  # not created yet
                except (pymysql.MySQLError, grpc.RpcError, OSError) as exc:
                    self._note(f"a {phase} sample failed: {exc}")
                    continue
                if status.error and status.error not in self.seen_errors:
                    self.seen_errors.add(status.error)
                    self._note(f"changefeed error (first seen: {phase}): {status.error}")
                if status.checkpoint is not None and status.checkpoint != last:
                    self.moves[phase] = self.moves.get(phase, 0) + 1
                    last = status.checkpoint
        finally:
            source.close()
            target.close()

    def _note(self, text: str) -> None:
        if text not in self.errors:
            self.errors.append(text)

    @staticmethod
    def _count(conn: Any, where: str) -> int:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE {where}")
            return int(cur.fetchone()[0])

    def _sample_sql(self, source: Any, target: Any, peaks: Peaks) -> None:
        peaks.see("binlog_dumps", self._count(source, "COMMAND LIKE 'Binlog Dump%'"))
        peaks.see("source_conns", self._count(source, f"USER = '{SOURCE_USER}'"))
        peaks.see("sink_conns", self._count(target, f"USER = '{SINK_USER}'"))

    def _sample_rss(self, peaks: Peaks) -> None:
        tree = process_tree(self.server_pid)
        server = tree.get(self.server_pid, ("", 0))[1]
        jvm = sum(rss for pid, (name, rss) in tree.items() if name == "java")
        others = sum(tree[pid][1] for pid in tree) - server - jvm
        peaks.see("rss_server", server)
        peaks.see("rss_jvm", jvm)
        peaks.see("rss_workers", others)
        peaks.see("rss_total", server + jvm + others)
        peaks.see("processes", len(tree))


# --- the load and the heartbeat ------------------------------------------------------------


class WriteLoad(threading.Thread):
    """oltp_write_only-shaped transactions on its share of the tables, at a fixed rate.

    Each transaction (index update, non-index update, delete, insert of one
    table, as sysbench's defaults) is sent as one multi-statement round trip, so
    the generator stays cheap on a machine the service shares. Connections own
    disjoint tables, so they never wait on each other's locks. When it falls
    more than a second behind it drops the backlog rather than burst.
    """

    def __init__(self, server: MariaDBServer, tables: list[int], rows: int, per_second: float):
        super().__init__(daemon=True)
        self.server, self.tables, self.rows = server, tables, rows
        self.pause = 1.0 / per_second
        self.halt = threading.Event()
        self.row_changes = 0
        self.seed = tables[0]

    def run(self) -> None:
        rnd = random.Random(self.seed)
        conn = self.server.connect(client_flag=CLIENT.MULTI_STATEMENTS)
        with conn.cursor() as cur:
            next_at = time.monotonic()
            while not self.halt.is_set():
                table = f"{DB}.sbtest{rnd.choice(self.tables)}"
                a, b, c = (rnd.randint(1, self.rows) for _ in range(3))
                cur.execute(
                    f"BEGIN; UPDATE {table} SET k = k + 1 WHERE id = {a};"
                    f" UPDATE {table} SET c = '{rnd.getrandbits(64):020d}' WHERE id = {b};"
                    f" DELETE FROM {table} WHERE id = {c};"
                    f" INSERT INTO {table} (id, k, c, pad) VALUES"
                    f" ({c}, {rnd.randint(1, self.rows)}, '{rnd.getrandbits(64):020d}', 'pad');"
                    " COMMIT"
                )
                while cur.nextset():
                    pass
                self.row_changes += ROW_CHANGES_PER_TXN
                next_at += self.pause
                now = time.monotonic()
                if next_at - now < -1.0:
                    next_at = now
                time.sleep(max(0.0, next_at - now))
        conn.close()


class HeartbeatPoller(threading.Thread):
    """Polls the downstream heartbeat row; ``seen[seq]`` is when each seq was first visible
    (a newer seq seen first marks the older ones seen at the same time)."""

    def __init__(self, target: MariaDBServer) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.seen: dict[int, float] = {}
        self.halt = threading.Event()

    def run(self) -> None:
        conn = self.target.connect()
        highest = 0
        with conn.cursor() as cur:
            while not self.halt.is_set():
                cur.execute(f"SELECT seq FROM {DB}.heartbeat WHERE id = 1")
                row = cur.fetchone()
                now = time.monotonic()
                if row is not None and int(row[0]) > highest:
                    for seq in range(highest + 1, int(row[0]) + 1):
                        self.seen[seq] = now
                    highest = int(row[0])
                time.sleep(POLL_EVERY)
        conn.close()


def start_load(source: MariaDBServer, config: BenchConfig, tables: int) -> list[WriteLoad]:
    connections = max(1, min(config.load_connections, tables))
    per_connection = config.rate / ROW_CHANGES_PER_TXN / connections
    loads = [
        WriteLoad(source, list(range(n, tables + 1, connections)), config.rows, per_connection)
        for n in range(1, connections + 1)
    ]
    for load in loads:
        load.start()
    return loads


def run_heartbeat(source: MariaDBServer, seconds: float) -> dict[int, float]:
    """Updates the heartbeat row every 50 ms for ``seconds``; seq -> commit time."""
    written: dict[int, float] = {}
    conn = source.connect()
    deadline = time.monotonic() + seconds
    seq = 0
    next_at = time.monotonic()
    with conn.cursor() as cur:
        while next_at < deadline:
            seq += 1
            cur.execute(f"UPDATE {DB}.heartbeat SET seq = {seq} WHERE id = 1")
            written[seq] = time.monotonic()
            next_at = max(next_at + HEARTBEAT_EVERY, written[seq])
            time.sleep(max(0.0, next_at - time.monotonic()))
    conn.close()
    return written


# --- one table count -----------------------------------------------------------------------


@contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    """``name`` set for the captures started inside (they resolve ``password-env`` there)."""
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


@dataclass
class Run:
    """What the steps of one table count share."""

    source: MariaDBServer
    target: MariaDBServer
    api: admin_pb2_grpc.ChangefeedServiceStub
    sampler: Sampler
    config: BenchConfig
    result: Result


def measure_snapshot(run: Run, address: str, uris: tuple[str, str], filled: Position) -> bool:
    """Step 2 of the module doc; False when the snapshot did not finish."""
    result, config = run.result, run.config
    began = time.monotonic()
    failure = create_changefeed(address, *uris)
    if failure is not None:
        result.problems.append(failure.strip())
        return False
    result.create_s = time.monotonic() - began
    result.snapshot_s, status = wait_checkpoint(run.api, filled, began, config.snapshot_timeout)
    if result.snapshot_s is None:
        result.problems.append(
            f"snapshot not done: checkpoint {status.checkpoint} (state {status.state})"
            f" not past the fill's end {filled} after {config.snapshot_timeout:.0f} s"
        )
        return False
    result.snapshot_equal = compare(run.source, run.target)
    return True


def measure_load(run: Run) -> None:
    """Steps 3 and 4 of the module doc."""
    source, config, result = run.source, run.config, run.result
    poller = HeartbeatPoller(run.target)
    poller.start()
    run.sampler.phase = "load"
    began = time.monotonic()
    loads = start_load(source, config, result.tables)
    written = run_heartbeat(source, config.seconds)
    for load in loads:
        load.halt.set()
    for load in loads:
        load.join()
    result.load_s = time.monotonic() - began
    result.row_changes = sum(load.row_changes for load in loads)
    if result.row_changes < 0.95 * config.rate * result.load_s:
        result.problems.append(
            f"the load generator fell short: {result.row_changes / result.load_s:,.0f} row "
            f"changes/s of {config.rate:,} asked (the machine is saturated)"
        )
    run.sampler.phase = "settle"
    end = position_now(source)
    settle_from = time.monotonic()
    result.settle_s, status = wait_checkpoint(run.api, end, settle_from, config.settle_timeout)
    if result.settle_s is None:
        result.settled = (
            f"stuck: checkpoint {status.checkpoint} (state {status.state}) not past the load's "
            f"end {end} after {config.settle_timeout:.0f} s"
        )
        result.problems.append(result.settled)
    else:
        result.settled = f"passed the load's end {result.settle_s:.1f} s after it"
    last = max(written, default=0)
    while last not in poller.seen and time.monotonic() - settle_from < config.settle_timeout:
        time.sleep(0.05)
    poller.halt.set()
    poller.join()
    first_counted = began + config.warmup
    result.lags = [
        poller.seen[seq] - at if seq in poller.seen else NEVER
        for seq, at in sorted(written.items())
        if at >= first_counted
    ]
    if result.settle_s is not None:
        result.after_equal = compare(source, run.target)


def keep_log(running: Cluster, tables: int) -> Path:
    """A copy of the cdc-server's log outside the cluster's temporary directory."""
    kept = Path(tempfile.gettempdir()) / f"many_tables_bench_{tables}_capture.log"
    shutil.copyfile(running.log_dir / "capture-0.log", kept)
    return kept


def run_one(etcd: EtcdServer, config: BenchConfig, tables: int) -> Result:
    """One table count on fresh servers and a fresh cdc-server."""
    result = Result(tables)
    source_pw, sink_pw = secrets.token_urlsafe(18), secrets.token_urlsafe(18)
    options = server_options(config)
    with ExitStack() as stack:
        source = stack.enter_context(mariadb(f"many{tables}-src", 1, True, options))
        target = stack.enter_context(mariadb(f"many{tables}-dst", 2, False, options))
        add_user(source, SOURCE_USER, source_pw)
        add_user(target, SINK_USER, sink_pw)
        print(f"[{tables} tables] filling {tables} x {config.rows} rows", flush=True)
        filling = time.monotonic()
        result.data_bytes = fill_source(source, tables, config.rows)
        print(f"[{tables} tables] filled in {time.monotonic() - filling:.0f} s", flush=True)
        pool = buffer_pool_bytes(target)
        if pool <= result.data_bytes:
            result.problems.append(
                f"the buffer pool ({mib(pool)}) is not larger than the data "
                f"({mib(result.data_bytes)}): raise --buffer-pool"
            )
        filled = position_now(source)
        stack.enter_context(environment(SOURCE_PASSWORD_ENV, source_pw))
        stack.enter_context(environment(SINK_PASSWORD_ENV, sink_pw))
        running = stack.enter_context(cluster(etcd, 1))
        api = stack.enter_context(open_api(running.addresses[0]))
        sampler = Sampler((source, target), running.procs[0].pid, lambda: feed_status(api))
        run = Run(source, target, api, sampler, config, result)
        uris = (
            service_uri(source, SOURCE_USER, SOURCE_PASSWORD_ENV),
            service_uri(
                target, SINK_USER, SINK_PASSWORD_ENV, f"&worker-count={config.worker_count}"
            ),
        )
        print(f"[{tables} tables] snapshot", flush=True)
        sampler.start()
        try:
            if measure_snapshot(run, running.addresses[0], uris, filled):
                print(f"[{tables} tables] load for {config.seconds:g} s", flush=True)
                measure_load(run)
        finally:
            sampler.halt.set()
            sampler.join()
        result.peaks = sampler.peaks
        result.checkpoint_moves = sampler.moves.get("load", 0)
        result.problems += sampler.errors
        code = running.procs[0].poll()
        if code is not None:
            result.problems.append(f"the cdc-server exited with code {code}")
        if result.problems:
            kept = keep_log(running, tables)
            print(f"[{tables} tables] findings; the cdc-server's log: {kept}", flush=True)
    return result


# --- the report ----------------------------------------------------------------------------


def memory_total() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return f"{int(line.split()[1]) / 1024**2:.1f} GiB"
    return "unknown"


def mib(value: int | None) -> str:
    return "—" if value is None else f"{value / 1024**2:,.0f} MiB"


def flag(text: str, ok: bool | None) -> str:
    return text if ok is None or ok else f"{text} ✗"


def peak(result: Result, phase: str, name: str) -> int | None:
    peaks = result.peaks.get(phase)
    return None if peaks is None else peaks.get(name)


def rows_of(result: Result, config: BenchConfig) -> list[tuple[str, str, str]]:
    """(figure, goal, value) for one table count, in the order of the issue."""
    lags = result.lags
    p99 = percentile(lags, 99) if lags else None
    dumps = peak(result, "load", "binlog_dumps")
    sinks = peak(result, "load", "sink_conns")
    rss = peak(result, "load", "rss_server")
    most_sinks = config.worker_count + 2
    rate = f"{result.row_changes / result.load_s:,.0f}" if result.load_s else "—"
    return [
        ("data on the source (tablespace files)", "", mib(result.data_bytes)),
        ("snapshot: `changefeed create` → checkpoint past the fill", "", _s(result.snapshot_s)),
        ("… of which `cdcctl changefeed create` took", "", _s(result.create_s)),
        ("tables after the snapshot (`cdc.diff.check`)", "equal", result.snapshot_equal or "—"),
        ("snapshot peak: `Binlog Dump` threads", "", _n(peak(result, "snapshot", "binlog_dumps"))),
        ("snapshot peak: sink user's connections", "", _n(peak(result, "snapshot", "sink_conns"))),
        (
            "snapshot peak: RSS, cdc-server + children",
            "",
            mib(peak(result, "snapshot", "rss_total")),
        ),
        ("load: row changes/s achieved", f"{config.rate:,}", rate),
        (
            "heartbeats after the warm-up: seen downstream / written",
            "",
            f"{sum(1 for lag in lags if lag != NEVER)} / {len(lags)}",
        ),
        ("lag p50", "", _ms(statistics.median(lags) if lags else None)),
        ("lag p99", "< 1 s", flag(_ms(p99), None if p99 is None else p99 < 1.0)),
        ("lag max", "", _ms(max(lags) if lags else None)),
        ("load peak: `Binlog Dump` threads", "≤ 2", flag(_n(dumps), _at_most(dumps, 2))),
        (
            "load peak: source connections of the service",
            "",
            _n(peak(result, "load", "source_conns")),
        ),
        (
            "load peak: sink user's connections",
            f"≤ {most_sinks}",
            flag(_n(sinks), _at_most(sinks, most_sinks)),
        ),
        (
            "load peak: cdc-server RSS",
            "< 1.5 GiB",
            flag(mib(rss), _at_most(rss, int(1.5 * GIB) - 1)),
        ),
        ("load peak: Spark JVM RSS", "", mib(peak(result, "load", "rss_jvm"))),
        (
            "load peak: other children's RSS (Spark's Python workers)",
            "",
            mib(peak(result, "load", "rss_workers")),
        ),
        ("load peak: RSS, cdc-server + children", "", mib(peak(result, "load", "rss_total"))),
        (
            "load peak: processes in the cdc-server's tree",
            "",
            _n(peak(result, "load", "processes")),
        ),
        ("checkpoint moves seen in the load's 1 s samples", "", _n(result.checkpoint_moves)),
        ("checkpoint after the load", "passes its end", result.settled or "—"),
        ("tables after the load (`cdc.diff.check`)", "equal", result.after_equal or "—"),
    ]


def _at_most(value: int | None, bound: int) -> bool | None:
    return None if value is None else value <= bound


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return "never seen" if value == NEVER else f"{value * 1000:,.0f} ms"


def _s(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f} s"


def _n(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def render(results: list[Result], config: BenchConfig) -> str:
    table = [rows_of(r, config) for r in results]
    lines = [
        f"One changefeed on one cdc-server (one capture); per table count, fresh source and "
        f"downstream MariaDB on this machine ({os.cpu_count()} cores, {memory_total()} memory, "
        f"shared by both databases, etcd, the cdc-server with its Spark, and this script's load "
        f"generator). Both servers: `--innodb-buffer-pool-size={config.buffer_pool}` (larger "
        f"than the data below), `--max-connections={config.max_connections}`. Tables: sysbench "
        f"`sbtest` shape, {config.rows:,} rows each, plus one heartbeat table. Changefeed: "
        f"snapshot mode `initial` with the default chunk size and Spark master, sink = the "
        f"downstream as a dedicated user with `worker-count={config.worker_count}`; created with "
        f"`cdcctl changefeed create`, polled through the admin API. The snapshot's clock stops "
        f"when the changefeed's checkpoint passes the source's position after the fill (the "
        f"source is quiet, so every table is then complete downstream); `cdc.diff.check` then "
        f"confirms every table equal, off the clock.",
        "",
        f"Load: {config.rate:,} row changes/s asked for {config.seconds:g} s, oltp_write_only "
        f"transactions (index update, non-index update, delete, insert: "
        f"{ROW_CHANGES_PER_TXN} row changes) on a table chosen at random among all of them, "
        f"over {config.load_connections} connection(s); heartbeat row updated every "
        f"{HEARTBEAT_EVERY * 1000:.0f} ms, polled downstream every {POLL_EVERY * 1000:.0f} ms; "
        f"lag = commit on the source to first sight downstream, the first {config.warmup:g} s "
        f"not counted. Peaks are of 1 s samples; RSS is VmRSS (a child's shared pages count "
        f"in each process). ✗ marks a figure that misses the issue's goal.",
        "",
        "| figure | goal | " + " | ".join(f"{r.tables:,} tables" for r in results) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in results) + " |",
    ]
    for index, (name, goal, _) in enumerate(table[0]):
        values = " | ".join(rows[index][2] for rows in table)
        lines.append(f"| {name} | {goal} | {values} |")
    problems = [(r.tables, p) for r in results for p in r.problems]
    if problems:
        lines += ["", "Findings:", ""]
        lines += [f"- {tables:,} tables: {problem}" for tables, problem in problems]
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------------


def table_counts(text: str) -> tuple[int, ...]:
    try:
        counts = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of table counts, e.g. 8,100,1000"
        ) from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every table count must be at least 1")
    return counts


def parse_args() -> BenchConfig:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--tables",
        type=table_counts,
        default=(8, 100, 1000),
        help="table counts, comma-separated (default 8,100,1000)",
    )
    parser.add_argument("--rows", type=int, default=1000, help="rows per table")
    parser.add_argument("--rate", type=int, default=2000, help="row changes per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="load duration")
    parser.add_argument("--worker-count", type=int, default=4, help="the sink's worker-count")
    parser.add_argument("--load-connections", type=int, default=2)
    parser.add_argument("--buffer-pool", default="1G", help="innodb-buffer-pool-size, both servers")
    parser.add_argument("--max-connections", type=int, default=2000, help="both servers")
    parser.add_argument("--warmup", type=float, default=5.0, help="load seconds not counted")
    parser.add_argument("--snapshot-timeout", type=float, default=3600.0)
    parser.add_argument("--settle-timeout", type=float, default=300.0)
    parser.add_argument(
        "--no-report", action="store_true", help="print only; leave docs/benchmarks.md alone"
    )
    args = parser.parse_args()
    for name in ("rows", "rate", "seconds", "worker_count", "load_connections"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    return BenchConfig(
        args.tables, args.rows, args.rate, args.seconds, args.worker_count,
        args.load_connections, args.buffer_pool, args.max_connections, args.warmup,
        args.snapshot_timeout, args.settle_timeout, not args.no_report,
    )  # fmt: skip


def command(config: BenchConfig) -> str:
    return (
        f"python bench/many_tables_bench.py --tables {','.join(map(str, config.tables))} "
        f"--rows {config.rows} --rate {config.rate} --seconds {config.seconds:g} "
        f"--worker-count {config.worker_count} --load-connections {config.load_connections} "
        f"--buffer-pool {config.buffer_pool} --max-connections {config.max_connections} "
        f"--warmup {config.warmup:g}"
    )


def main() -> None:
    config = parse_args()
    results: list[Result] = []
    with private_etcd() as etcd:
        for tables in config.tables:
            results.append(run_one(etcd, config, tables))
    body = render(results, config)
    print(body)
    if config.write_report:
        update_section(
            "many_tables", "Many tables on one capture (issue #14)", command(config), body
        )


if __name__ == "__main__":
    main()
