"""Snapshot rows/s into a downstream MariaDB against `mariadb-dump --single-transaction | mariadb`.

    .venv/bin/python bench/snapshot_bench.py [--rows 1000000] [--chunk-size 8096] [--no-write]

1. Private source (binlog) and downstream MariaDB and etcd; the sysbench-shaped
   table filled with --rows rows.
2. Baseline: `mariadb-dump --single-transaction sbtest sbtest1 | mariadb -D dumped`
   into the downstream, timed end to end.
3. Ours, timed as the user waits: a `cdc-server` process is running (bench/cluster.py,
   started before the clock, as a user's server would be); the clock runs from
   `cdcctl changefeed create` (a snapshot-only changefeed, the CLI's own process)
   until the changefeed is finished, i.e. every chunk of the table is in the sink.
   Inside that time: the create-time checks, the owner scheduling the table, the
   chunk split and plan in etcd, the server's SparkSession (`local[*]`, started by
   the first snapshot) and its Python workers, the chunks read lock-free and loaded
   into the downstream (LOAD DATA LOCAL INFILE ... REPLACE, one file per chunk).
   Each sink gets a fresh server, so each figure carries that start-up. After the
   clock, `cdc diff` must find the downstream table equal to the source.
4. The same into the blackhole sink (the read side alone) and into the file sink
   (canal-json chunk files); there the chunk records in etcd must hold every row.

--no-write prints the figures without rewriting docs/benchmarks.md (smoke runs).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster import Cluster, cluster, private_etcd
from bench.report import update_section
from bench.servers import mariadb
from bench.sysbench import fill
from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.diff import check
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.store.keys import CaptureKey
from cdc.uri.mysql import parse_source_uri

TABLE = TableName("sbtest", "sbtest1")
CHANGEFEED = "snap"
TIMEOUT = 3600


def count(server: MariaDBServer, db: str) -> int:
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {db}.sbtest1")
        n = cur.fetchone()[0]
    conn.close()
    return int(n)


def dump_and_load(source: MariaDBServer, target: MariaDBServer) -> float:
    conn = target.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE dumped")
    conn.close()
    dump = [
        "mariadb-dump", "--single-transaction", "-h", source.host, "-P", str(source.port),
        "-u", source.user, "sbtest", "sbtest1",
    ]  # fmt: skip
    load = ["mariadb", "-h", target.host, "-P", str(target.port), "-u", target.user, "-D", "dumped"]
    t0 = time.perf_counter()
    dumper = subprocess.Popen(
        dump, stdout=subprocess.PIPE, env={**os.environ, "MYSQL_PWD": source.password}
    )
    subprocess.run(
        load, stdin=dumper.stdout, check=True, env={**os.environ, "MYSQL_PWD": target.password}
    )
    if dumper.wait() != 0:
        raise RuntimeError("mariadb-dump failed")
    return time.perf_counter() - t0


def by_reference(server: MariaDBServer, secrets: Path, name: str) -> str:
    """``server``'s URI with the password in a file, as a user would pass it to cdcctl."""
    secret = secrets / f"{name}.password"
    secret.write_text(server.password)
    secret.chmod(0o600)
    return f"mysql://{server.user}@{server.host}:{server.port}/?password-file={secret}"


def admin_address(running: Cluster) -> str:
    """The admin address the (only) capture registered in etcd."""
    keys = running.store.keys
    (item,) = running.store.get_prefix(keys.prefix_of(CaptureKey))
    return str(item.json()["address"])


@dataclass(frozen=True)
class Run:
    """One snapshot as the user waits for it."""

    seconds: float
    first_chunks: float
    errors: int


def snapshot(etcd: EtcdServer, source_uri: str, sink_uri: str, chunk: int, rows: int) -> Run:
    """Creates the snapshot-only changefeed on a fresh one-capture cluster with `cdcctl`;
    the seconds until it is finished (the chunk records in etcd then hold all ``rows``),
    and until its first chunks were done. The cluster is stopped on return."""
    with cluster(etcd, 1) as running:
        create = [
            sys.executable, "-m", "cdc.cli.main", "changefeed", "create",
            "--server", admin_address(running), "--changefeed-id", CHANGEFEED,
            "--source-uri", source_uri, "--sink-uri", sink_uri,
            "--filter-rule", str(TABLE), "--snapshot-mode", "snapshot-only",
            "--chunk-size", str(chunk), "--spark-master", "local[*]",
        ]  # fmt: skip
        feeds = ChangefeedStore(running.store)
        progress = SnapshotProgress(running.store, CHANGEFEED)
        t0 = time.monotonic()
        subprocess.run(create, check=True, stdout=subprocess.DEVNULL)
        first = None
        while True:
            status = feeds.get(CHANGEFEED).status
            now = time.monotonic()
            if status.state is ChangefeedState.FINISHED:
                break
            if status.state is ChangefeedState.FAILED:
                raise RuntimeError(f"the changefeed failed: {status.error}")
            if now - t0 > TIMEOUT:
                raise TimeoutError(f"the snapshot did not finish in {TIMEOUT}s: {status}")
            if first is None and any(r.done for r in progress.load(TABLE)):
                first = now
            time.sleep(0.05)
        seconds = now - t0
        done = progress.table_progress(TABLE)
        if done.chunks_done != done.chunks_total or done.rows != rows:
            raise RuntimeError(f"finished with {done}, not every one of {rows} rows")
        return Run(seconds, (first or now) - t0, len(status.error_history))


def assert_equal(source: MariaDBServer, target: MariaDBServer) -> None:
    report = check(
        parse_source_uri(source.uri),
        parse_source_uri(target.uri),
        TableFilter.parse([str(TABLE)]),
        chunk_size=10_000,
        threads=2,
    )
    if not report.equal:
        raise RuntimeError(f"the downstream differs from the source: {report.summary()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--workers", type=int, default=4, help="MySQL sink worker-count")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    n, chunk = args.rows, args.chunk_size
    with (
        mariadb("snap-source", 1, True) as source,
        mariadb("snap-target", 2, False) as target,
        private_etcd() as etcd,
        tempfile.TemporaryDirectory(prefix="cdc-bench-snapshot-") as tmp,
    ):
        work = Path(tmp)
        # the password files below: the only directory the benchmark's cdc-servers read them from
        os.environ["CDC_SECRETS_DIR"] = str(work)
        conn = source.connect()
        fill(conn, n)
        conn.close()
        dump_s = dump_and_load(source, target)
        assert count(target, "dumped") == n
        source_uri = by_reference(source, work, "source")
        hole = snapshot(etcd, source_uri, "blackhole://", chunk, n)
        sink = by_reference(target, work, "target") + f"&worker-count={args.workers}"
        ours = snapshot(etcd, source_uri, sink, chunk, n)
        assert_equal(source, target)
        files = snapshot(etcd, source_uri, f"file://{work / 'files'}", chunk, n)
    base = n / dump_s

    def row(what: str, run: Run) -> str:
        return (
            f"| {what} | yes | by chunk | {run.seconds:.1f} | {run.first_chunks:.1f} |"
            f" {n / run.seconds:,.0f} | {n / run.seconds / base:.2f}x |\n"
        )

    runs = (ours, files, hole)
    retried = sum(r.errors for r in runs)
    body = (
        f"{n:,} rows, chunk size {chunk}, Spark `local[*]` on {os.cpu_count()} cores, MySQL "
        f"sink worker-count {args.workers}. Ours is timed from `cdcctl changefeed create` "
        "(snapshot-only) until the changefeed is finished, on a `cdc-server` already running "
        "(a fresh one per sink): the create-time checks, scheduling, the chunk plan and the "
        "server's SparkSession start-up are inside the time (the first-chunks column shows "
        "how long until the first chunk batch was done). Afterwards `cdc diff` found the "
        "downstream table equal to the source.\n\n"
        "| copy | lock-free | resumable | seconds | first chunks after | rows/s | ratio |\n"
        "| --- | --- | --- | ---: | ---: | ---: | ---: |\n"
        f"| `mariadb-dump --single-transaction \\| mariadb` (baseline) | yes (InnoDB) | no |"
        f" {dump_s:.1f} | - | {base:,.0f} | 1.00x |\n"
        + row("snapshot into the downstream MariaDB (MySQL sink, LOAD DATA per chunk)", ours)
        + row("snapshot into the file sink (canal-json, one file per chunk)", files)
        + row("snapshot into the blackhole sink (read side only)", hole)
        + "\nBoth copies share the machine's 2 cores with the source and downstream servers; "
        "the ratio is of the same run."
        + (f" {retried} changefeed error(s) were retried inside the times." if retried else "")
    )
    print(body)
    if not args.no_write:
        update_section(
            "snapshot",
            "Lock-free snapshot (issue #4)",
            f"python bench/snapshot_bench.py --rows {n} --chunk-size {chunk}",
            body,
        )


if __name__ == "__main__":
    main()
