"""Snapshot as the user times it, against `mariadb-dump | mariadb` and `mydumper | myloader`.

    .venv/bin/python bench/snapshot_bench.py [--rows 1000000] [--chunk-size 8096]
        [--buffer-pool 2G] [--threads N] [--sinks mysql,blackhole,file]
        [--spark-cluster] [--scale-captures 3] [--no-write]

1. Private source (binlog) and downstream MariaDB, both with an InnoDB buffer pool
   larger than the data (``--buffer-pool``, as a production server's), and etcd; the
   sysbench-shaped table filled with --rows rows.
2. Baselines, timed end to end into the downstream: `mariadb-dump --single-transaction
   | mariadb` (one thread: the dump is one stream), and `mydumper --threads N --rows ...
   --trx-consistency-only` then `myloader --threads N` (Debian's `mydumper`, installed
   here if missing), N = ``--threads``, the cores Spark's `local[*]` uses.
3. Ours, timed as the user waits: `cdc-server` processes are running (bench/cluster.py,
   started before the clock with `--spark-master`, so their Spark session is warm, as a
   server that has been up would be: the time that took is reported); the clock runs
   from `cdcctl changefeed create` (a snapshot-only changefeed, the CLI's own process)
   until the changefeed is finished, i.e. every chunk of the table is in the sink:
   create-time checks, the owner scheduling the table, the anchor and the downstream
   table, the chunk plan in etcd, shares given out by the owner (a plan of more than
   32 chunks), the chunks read lock-free and loaded. After the clock, `cdc diff` must
   find the downstream table equal to the source.
4. ``--sinks`` adds the blackhole (read side alone) and file sinks (canal-json files).
5. ``--scale-captures N``: the MySQL-sink copy again on N captures: seconds, and the
   chunks each capture ran, read from the shares in etcd.
6. ``--spark-cluster``: the captures' sessions run on a standalone Spark cluster on
   loopback (cdc.playground.spark: a master and two workers) instead of `local[*]`.

``--rounds N`` (default 3) runs the three copies of steps 2 and 3 N times in turn, so a
slow phase of the machine hits each copy alike (on the 2-core machine of session 23 one
copy's time varied by a fifth from run to run, and single runs of the same code gave
0.61x to 0.79x of mydumper); the tables give each copy's median run, and every round's
times and same-round ratio are listed below them.

--no-write prints the figures without rewriting docs/benchmarks.md (smoke runs).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster import Cluster, cluster, private_etcd, wait_for
from bench.cpu import Cpu, CpuMeter
from bench.report import update_section
from bench.servers import execute_sql, mariadb
from bench.sysbench import fill
from cdc.changefeed import ChangefeedState, ChangefeedStore
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_shares import ShareBook, ShareState
from cdc.diff import check
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.playground.packages import ensure_packages
from cdc.playground.spark import SparkCluster, SparkClusterSpec
from cdc.uri.mysql import parse_source_uri

T = TypeVar("T")
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


MYDUMPER_PACKAGES = {"mydumper": "mydumper", "myloader": "mydumper"}


def mydumper_and_myloader(
    source: MariaDBServer, target: MariaDBServer, threads: int, rows: int, work: Path
) -> float:
    """`mydumper` of the table in ``threads`` threads (split by ``rows``-row ranges, a
    consistent snapshot), then `myloader` in as many threads into database ``loaded``
    (installed by ``main`` beforehand, outside the clock and the CPU meter)."""
    out = work / "mydumper"

    def credentials(server: MariaDBServer) -> list[str]:
        return ["-h", server.host, "-P", str(server.port), "-u", server.user,
                "-p", server.password]  # fmt: skip

    dump = [
        "mydumper", *credentials(source), "-B", "sbtest", "-T", "sbtest1",
        "-t", str(threads), "-r", str(rows), "--trx-consistency-only", "-o", str(out),
    ]  # fmt: skip
    load = [
        "myloader", *credentials(target), "-d", str(out), "-B", "loaded",
        "-t", str(threads),
    ]  # fmt: skip
    # myloader 0.10 gives up on the deadlocks its threads meet inserting into one table
    # under REPEATABLE READ (rows go missing); READ COMMITTED takes no gap locks
    execute_sql(target, "SET GLOBAL tx_isolation = 'READ-COMMITTED'")
    try:
        t0 = time.perf_counter()
        subprocess.run(dump, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(load, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0
    finally:
        execute_sql(target, "SET GLOBAL tx_isolation = 'REPEATABLE-READ'")


@dataclass(frozen=True)
class Run:
    """One snapshot as the user waits for it; ``warm``: seconds the captures took to
    start and warm their Spark session, before the clock; ``by_capture``: chunks each
    capture ran (from the shares in etcd; empty when the plan was not shared)."""

    seconds: float
    first_chunks: float
    errors: int
    warm: float
    by_capture: dict[str, int]
    cpu: Cpu


def warm_captures(running: Cluster, count: int, master: str) -> float:
    """Starts ``count`` captures whose Spark session starts with them; seconds until
    each says it is warm."""
    t0 = time.monotonic()
    running.start_captures(count, (f"--spark-master={master}", "--log-level=INFO"))
    logs = [running.log_dir / f"capture-{n}.log" for n in range(count)]
    wait_for(
        lambda: all("warm after" in log.read_text(errors="replace") for log in logs),
        600,
        "the captures' Spark sessions to be warm",
        every=0.2,
    )
    return time.monotonic() - t0


def shared_chunks(running: Cluster) -> dict[str, int]:
    by_capture: dict[str, int] = {}
    for held in ShareBook(running.store, CHANGEFEED).held(TABLE):
        if held.share.state is ShareState.DONE and held.share.capture is not None:
            size = held.share.last - held.share.first
            by_capture[held.share.capture] = by_capture.get(held.share.capture, 0) + size
    return by_capture


def snapshot(
    etcd: EtcdServer,
    source_uri: str,
    sink_uri: str,
    chunk: int,
    rows: int,
    *,
    master: str,
    servers: tuple[int, int],
    captures: int = 1,
) -> Run:
    """Creates the snapshot-only changefeed on a fresh cluster of warm captures with
    `cdcctl`; the seconds until it is finished (the chunk records in etcd then hold all
    ``rows``), and until its first chunks were done. The cluster is stopped on return."""
    with cluster(etcd, 0) as running:
        warm = warm_captures(running, captures, master)
        create = [
            sys.executable, "-m", "cdc.cli.main", "changefeed", "create",
            "--server", running.addresses[0], "--changefeed-id", CHANGEFEED,
            "--source-uri", source_uri, "--sink-uri", sink_uri,
            "--filter-rule", str(TABLE), "--snapshot-mode", "snapshot-only",
            "--chunk-size", str(chunk), "--spark-master", master,
        ]  # fmt: skip
        feeds = ChangefeedStore(running.store)
        progress = SnapshotProgress(running.store, CHANGEFEED)
        meter = CpuMeter(*servers, [proc.pid for proc in running.procs]).start()
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
        cpu = meter.stop()
        done = progress.table_progress(TABLE)
        if done.chunks_done != done.chunks_total or done.rows != rows:
            raise RuntimeError(f"finished with {done}, not every one of {rows} rows")
        return Run(
            seconds,
            (first or now) - t0,
            len(status.error_history),
            warm,
            shared_chunks(running),
            cpu,
        )


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
    parser.add_argument("--buffer-pool", default="2G", help="both servers' InnoDB buffer pool")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--sinks", default="mysql", help="mysql,blackhole,file")
    parser.add_argument("--scale-captures", type=int, default=0)
    parser.add_argument("--spark-cluster", action="store_true")
    parser.add_argument("--rounds", type=int, default=3, help="each copy this many times, in turn")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--section", default="snapshot", help="the docs/benchmarks.md section to write"
    )
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    n, chunk = args.rows, args.chunk_size
    sinks = args.sinks.split(",")
    ensure_packages(MYDUMPER_PACKAGES)
    load = os.getloadavg()[0]
    options = (f"--innodb-buffer-pool-size={args.buffer_pool}", "--max-connections=500")
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(mariadb("snap-source", 1, True, options))
        target = stack.enter_context(mariadb("snap-target", 2, False, options))
        etcd = stack.enter_context(private_etcd())
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="cdc-bench-snap-")))
        master = f"local[{args.threads}]"
        if args.spark_cluster:
            spec = SparkClusterSpec(
                "bench", work / "spark", workers=2, cores=args.threads, memory="2g", app_cores=1
            )
            spark = SparkCluster(spec, die_with_parent=True)
            spark.start()
            stack.callback(spark.stop)
            master = spark.master_url
        # the password files below: the only directory the benchmark's cdc-servers read them from
        os.environ["CDC_SECRETS_DIR"] = str(work)
        conn = source.connect()
        fill(conn, n)
        conn.close()
        assert source.pid is not None and target.pid is not None
        servers = (source.pid, target.pid)
        source_uri = source.uri_by_reference(work, "source")
        sink_uri = target.uri_by_reference(work, "target") + f"&worker-count={args.workers}"
        ours = functools.partial(snapshot, etcd, source_uri, master=master, servers=servers)
        rounds: list[Round] = []
        for number in range(args.rounds):
            if number:
                execute_sql(target, f"DROP TABLE {TABLE.quoted()}")
            meter = CpuMeter(*servers).start()
            dump_s = dump_and_load(source, target)
            dump_cpu = meter.stop()
            assert count(target, "dumped") == n
            # each copy after it starts with the downstream's buffer pool as free as this one's
            execute_sql(target, "DROP DATABASE dumped")
            meter = CpuMeter(*servers).start()
            mydumper_s = mydumper_and_myloader(source, target, args.threads, 100_000, work)
            mydumper_cpu = meter.stop()
            assert count(target, "loaded") == n
            execute_sql(target, "DROP DATABASE loaded")
            mine = ours(sink_uri, chunk, n)
            assert_equal(source, target)
            rounds.append(Round(dump_s, dump_cpu, mydumper_s, mydumper_cpu, mine))
            print(f"round {number + 1}: {rounds[-1]}", flush=True)
        dump_s, dump_cpu = _median([(r.dump_s, r.dump_cpu) for r in rounds])
        mydumper_s, mydumper_cpu = _median([(r.mydumper_s, r.mydumper_cpu) for r in rounds])
        baseline_cpu = {"dump": dump_cpu, "mydumper": mydumper_cpu}
        runs: dict[str, Run] = {"mysql": _median([(r.ours.seconds, r.ours) for r in rounds])[1]}
        if "blackhole" in sinks:
            runs["blackhole"] = ours("blackhole://", chunk, n)
        if "file" in sinks:
            files = f"file://{work / 'files'}"
            runs["file"] = ours(files, chunk, n)
        scaled = None
        if args.scale_captures > 1:
            execute_sql(target, f"DROP TABLE {TABLE.quoted()}")
            scaled = ours(sink_uri, chunk, n, captures=args.scale_captures)
            assert_equal(source, target)
    body = report(args, master, dump_s, mydumper_s, runs, scaled, load, baseline_cpu, rounds)
    print(body)
    if not args.no_write:
        command = (
            f".venv/bin/python bench/snapshot_bench.py --rows {n} --chunk-size {chunk} "
            f"--buffer-pool {args.buffer_pool} --threads {args.threads} --sinks {args.sinks}"
            + (f" --scale-captures {args.scale_captures}" if args.scale_captures else "")
            + (f" --rounds {args.rounds}" if args.rounds != 3 else "")
            + (" --spark-cluster" if args.spark_cluster else "")
            + (f" --section {args.section}" if args.section != "snapshot" else "")
        )
        title = "Lock-free snapshot as the user times it (issues #4, #16)"
        if args.section != "snapshot":
            title += f": {n:,} rows"
        update_section(args.section, title, command, body)


WHAT = {
    "mysql": "snapshot into the downstream MariaDB (MySQL sink: lines, LOAD DATA)",
    "blackhole": "snapshot into the blackhole sink (read side only)",
    "file": "snapshot into the file sink (canal-json, one file per chunk)",
}


def report(
    args: argparse.Namespace,
    master: str,
    dump_s: float,
    mydumper_s: float,
    runs: dict[str, Run],
    scaled: Run | None,
    load: float,
    baseline_cpu: dict[str, Cpu],
    rounds: list[Round],
) -> str:
    n = args.rows

    def row(what: str, run: Run) -> str:
        return (
            f"| {what} | yes | by chunk | {run.seconds:.1f} | {run.first_chunks:.1f} |"
            f" {n / run.seconds:,.0f} | {dump_s / run.seconds:.2f}x |"
            f" {mydumper_s / run.seconds:.2f}x |\n"
        )

    ours = runs["mysql"]
    retried = sum(r.errors for r in runs.values())
    body = (
        f"{n:,} rows (sysbench shape), chunk size {args.chunk_size}, both servers with a "
        f"{args.buffer_pool} InnoDB buffer pool (larger than the data), Spark `{master}` "
        f"on {os.cpu_count()} cores, {args.threads} threads for mydumper/myloader, MySQL "
        f"sink worker-count {args.workers}. Ours is timed from `cdcctl changefeed create` "
        "(snapshot-only) until the changefeed is finished, through a running `cdc-server` "
        "(a fresh one per run, started with `--spark-master` before the clock: its Spark "
        f"session was warm after {ours.warm:.1f} s, as a server that has been up is): the "
        "create-time checks, scheduling, the anchor and downstream table, the chunk plan "
        "in etcd and its shares, every chunk read and loaded are inside the time (the "
        "first-chunks column: until the first chunk was recorded). Afterwards `cdc diff` "
        "found the downstream table equal to the source.\n\n"
        f"The copies ran {len(rounds)} time(s) in turn (dump and load, mydumper and "
        "myloader, ours); each row is the copy's median run.\n\n"
        "| copy | lock-free | resumable | seconds | first chunks after | rows/s "
        "| vs dump \\| load | vs mydumper \\| myloader |\n"
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n"
        f"| `mariadb-dump --single-transaction \\| mariadb` | yes (InnoDB) | no |"
        f" {dump_s:.1f} | - | {n / dump_s:,.0f} | 1.00x | {mydumper_s / dump_s:.2f}x |\n"
        f"| `mydumper -t {args.threads} -r 100000 --trx-consistency-only`, then "
        f"`myloader -t {args.threads}` | yes (InnoDB) | no | {mydumper_s:.1f} | - |"
        f" {n / mydumper_s:,.0f} | {dump_s / mydumper_s:.2f}x | 1.00x |\n"
        + "".join(row(WHAT[name], run) for name, run in runs.items())
    )
    body += (
        "\nEvery round, in seconds (dump and load / mydumper and myloader / ours), and ours "
        "against mydumper and myloader in that round: "
        + "; ".join(
            f"{r.dump_s:.1f} / {r.mydumper_s:.1f} / {r.ours.seconds:.1f}, "
            f"{r.mydumper_s / r.ours.seconds:.2f}x"
            for r in rounds
        )
        + ".\n"
    )
    if ours.by_capture:
        body += (
            f"\nThe plan was shared out by the owner: chunks per capture (from the shares "
            f"in etcd): {_by_capture(ours.by_capture)}; the plan's tail, its last chunk, "
            "was read by the table's holder at once.\n"
        )
    if scaled is not None:
        body += (
            f"\nThe same copy on {args.scale_captures} captures (each `{master}`, all on "
            f"this machine's {os.cpu_count()} cores): {scaled.seconds:.1f} s "
            f"({n / scaled.seconds:,.0f} rows/s, {ours.seconds / scaled.seconds:.2f}x one "
            f"capture); chunks per capture from the shares in etcd: "
            f"{_by_capture(scaled.by_capture)}. The captures share the same 2 cores with "
            "both servers, so this shows the split, not a speed-up; with a core per "
            "capture the shares run side by side.\n"
        )
    mine = ours.cpu
    body += (
        "\nCPU seconds during each copy (`bench/cpu.py`, from /proc): the source's server, "
        "the downstream's, and the copying side (the tools; for ours cdcctl and the "
        "cdc-server with its Spark JVM and Python workers):\n\n"
        "| copy | source | downstream | copying side |\n| --- | ---: | ---: | ---: |\n"
        + "".join(
            f"| {what} | {cpu.source:.1f} | {cpu.downstream:.1f} | {cpu.copying:.1f} |\n"
            for what, cpu in (
                ("`mariadb-dump \\| mariadb`", baseline_cpu["dump"]),
                ("`mydumper`, then `myloader`", baseline_cpu["mydumper"]),
                ("snapshot into the downstream MariaDB", mine),
            )
        )
    )
    body += (
        "\nEvery copy shares the machine's cores with the source and downstream servers; "
        f"the 1-minute load average was {load:.1f} when the run began, before its servers "
        "started; the ratios are of the same run."
        + (f" {retried} changefeed error(s) were retried inside the times." if retried else "")
    )
    return body


@dataclass(frozen=True)
class Round:
    """The three copies once, in turn: seconds and CPU of each baseline, and our run."""

    dump_s: float
    dump_cpu: Cpu
    mydumper_s: float
    mydumper_cpu: Cpu
    ours: Run

    def __str__(self) -> str:
        return (
            f"dump | load {self.dump_s:.1f} s, mydumper | myloader {self.mydumper_s:.1f} s, "
            f"ours {self.ours.seconds:.1f} s ({self.mydumper_s / self.ours.seconds:.2f}x)"
        )


def _median(runs: list[tuple[float, T]]) -> tuple[float, T]:
    """The median of ``(seconds, what)`` pairs by seconds (the lower middle one of an even
    count: a run that happened, not an average of two)."""
    return sorted(runs, key=lambda run: run[0])[(len(runs) - 1) // 2]


def _by_capture(counts: dict[str, int]) -> str:
    return ", ".join(f"{capture} {chunks}" for capture, chunks in sorted(counts.items()))


if __name__ == "__main__":
    main()
