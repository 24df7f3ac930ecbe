"""Snapshot rows/s into a downstream MariaDB against `mariadb-dump --single-transaction | mariadb`.

    .venv/bin/python bench/snapshot_bench.py [--rows 1000000] [--chunk-size 8096]

1. Private source (binlog) and downstream MariaDB and etcd; the sysbench-shaped
   table filled with --rows rows.
2. Baseline: `mariadb-dump --single-transaction sbtest sbtest1 | mariadb -D dumped`
   into the downstream, timed end to end.
3. Ours: a snapshot-only changefeed (ChangefeedRunner): chunk split, Spark
   `local[*]` tasks reading chunks lock-free and loading each into the
   downstream (LOAD DATA LOCAL INFILE ... REPLACE, one file per chunk), chunk
   progress in etcd. The SparkSession is started before the clock (a running
   cdc-server keeps one); its start-up time is reported apart.
4. The same into the blackhole sink (the read side alone; run first, so it
   also carries the start of Spark's Python workers) and into the file sink
   (canal-json chunk files).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import update_section  # noqa: E402
from bench.servers import mariadb  # noqa: E402
from bench.sysbench import fill  # noqa: E402
from cdc.config.changefeed import load_changefeed_config  # noqa: E402
from cdc.playground.etcd import EtcdServer, EtcdSpec  # noqa: E402
from cdc.playground.mariadb import MariaDBServer  # noqa: E402
from cdc.playground.ports import free_port  # noqa: E402
from processor.runner import ChangefeedRunner  # noqa: E402
from sparkjobs.snapshot import spark_session  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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


def snapshot(
    source: MariaDBServer,
    sink_uri: str,
    etcd: EtcdServer,
    spark: SparkSession,
    chunk: int,
    name: str,
) -> float:
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": name,
            "source_uri": source.uri,
            "sink_uri": sink_uri,
            "rules": ["sbtest.sbtest1"],
            "chunk_size": chunk,
            "snapshot_mode": "snapshot-only",
        },
    )
    with etcd.store(f"/bench-{name}") as store:
        runner = ChangefeedRunner(config, store, spark)
        t0 = time.perf_counter()
        runner.run(threading.Event())
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk-size", type=int, default=8096)
    parser.add_argument("--workers", type=int, default=4, help="MySQL sink worker-count")
    args = parser.parse_args()
    with (
        mariadb("snap-source", 1, True) as source,
        mariadb("snap-target", 2, False) as target,
        tempfile.TemporaryDirectory(prefix="cdc-bench-etcd-") as tmp,
    ):
        etcd = EtcdServer(EtcdSpec("bench", Path(tmp), free_port(), free_port()))
        etcd.start()
        try:
            conn = source.connect()
            fill(conn, args.rows)
            conn.close()
            dump_s = dump_and_load(source, target)
            assert count(target, "dumped") == args.rows
            t0 = time.perf_counter()
            spark = spark_session("local[*]", "snapshot-bench")
            spark_s = time.perf_counter() - t0
            # First: the Spark Python workers start and import the project here, once
            # per server in real use; the read-side figure carries that cost.
            hole_s = snapshot(source, "blackhole://", etcd, spark, args.chunk_size, "to-hole")
            sink = target.uri.rstrip("/") + f"/?worker-count={args.workers}"
            ours_s = snapshot(source, sink, etcd, spark, args.chunk_size, "to-mysql")
            assert count(target, "sbtest") == args.rows
            with tempfile.TemporaryDirectory(prefix="cdc-bench-files-") as files:
                file_s = snapshot(
                    source, f"file://{files}", etcd, spark, args.chunk_size, "to-files"
                )
            spark.stop()
        finally:
            etcd.stop()
    n = args.rows
    base = n / dump_s
    body = (
        f"{n:,} rows, chunk size {args.chunk_size}, Spark `local[*]` on {os.cpu_count()} cores "
        f"(SparkSession start-up {spark_s:.1f} s, not counted), MySQL sink worker-count "
        f"{args.workers}.\n\n"
        "| copy | lock-free | resumable | seconds | rows/s | ratio |\n"
        "| --- | --- | --- | ---: | ---: | ---: |\n"
        f"| `mariadb-dump --single-transaction \\| mariadb` (baseline) | yes (InnoDB) | no |"
        f" {dump_s:.1f} | {base:,.0f} | 1.00x |\n"
        f"| snapshot into the downstream MariaDB (MySQL sink, LOAD DATA per chunk) | yes |"
        f" by chunk | {ours_s:.1f} | {n / ours_s:,.0f} | {n / ours_s / base:.2f}x |\n"
        f"| snapshot into the file sink (canal-json, one file per chunk) | yes | by chunk |"
        f" {file_s:.1f} | {n / file_s:,.0f} | {n / file_s / base:.2f}x |\n"
        f"| snapshot into the blackhole sink (read side only) | yes | by chunk |"
        f" {hole_s:.1f} | {n / hole_s:,.0f} | {n / hole_s / base:.2f}x |\n\n"
        "Both copies share the machine's 2 cores with the source and downstream servers; "
        "the ratio is of the same run."
    )
    print(body)
    update_section(
        "snapshot",
        "Lock-free snapshot (issue #4)",
        f"python bench/snapshot_bench.py --rows {n} --chunk-size {args.chunk_size}",
        body,
    )


if __name__ == "__main__":
    main()
