"""Decode worker processes or the reader's own thread: which catches up faster here.

    .venv/bin/python bench/decode_workers_bench.py [--rows 1000000] [--rounds 5] [--workers 0,1]

The same binlog (--rows rows in one sysbench table, 1000 per INSERT) caught up by a
changefeed on one capture from before the rows, snapshot mode `never`, once per
round for each sink (blackhole, the downstream MariaDB with the sink's default settings) and each
`[mounter] worker-num` of --workers, alternated so that a drift of the machine's
speed falls on every setting alike. Timed from creating the changefeed until its
checkpoint passes the last insert, as `bench/replication_bench.py` times it, with
the CPU seconds of each side and of the capture's own process (without its decode
workers): what a worker takes off the reader against what it costs in all. The
default (none: `[mounter] worker-num` unset decodes in the reader's thread) follows
from this; results go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster import position_now, private_etcd
from bench.replication_bench import SIZING, Run, catch_up, fill_tables
from bench.report import median_cell, update_section
from bench.servers import execute_sql, mariadb

SINKS = ("blackhole", "MariaDB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", default="0,1", help="worker-num values, comma-separated")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    runs: dict[tuple[str, int], list[Run]] = {(s, w): [] for s in SINKS for w in counts}
    with (
        mariadb("decode-source", 1, True, SIZING) as source,
        mariadb("decode-target", 2, False, SIZING) as target,
        private_etcd() as etcd,
    ):
        start = position_now(source)
        fill_tables(source, "e2e", 1, args.rows)
        for _ in range(args.rounds):
            for sink in SINKS:
                for workers in counts:
                    uri = "blackhole://" if sink == "blackhole" else None
                    run = catch_up(source, target, etcd, "e2e", 1, start, uri, workers)
                    runs[(sink, workers)].append(run)
                    print(sink, workers, run, flush=True)
                    execute_sql(target, "DROP DATABASE IF EXISTS e2e")
    lines = [
        f"{args.rows:,} rows (one sysbench table, 1000 per INSERT) caught up by a changefeed "
        "on one capture from before them, snapshot mode `never`; both servers with a 1 GiB "
        f"buffer pool; {os.cpu_count()} cores shared by the source, the downstream, etcd and "
        f"the capture. {args.rounds} rounds, the settings alternated within each; each cell: "
        "the median, then every run. Seconds from `changefeed create` until the checkpoint "
        "passes the last insert; CPU seconds of the capture's own process (the reader, the "
        "pipeline, the sink), of its decode workers, and of the downstream's server. "
        "Unset, worker-num is 0.\n",
        "| sink | worker-num | seconds | capture's process, CPU-s | decode workers, CPU-s |"
        " downstream, CPU-s |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]

    for (sink, workers), done in runs.items():
        lines.append(
            f"| {sink} | {workers} | {median_cell([r.seconds for r in done])} |"
            f" {median_cell([r.capture for r in done])} |"
            f" {median_cell([max(0.0, r.cpu.copying - r.capture) for r in done])} |"
            f" {median_cell([r.cpu.downstream for r in done])} |"
        )
    body = "\n".join(lines)
    print(body)
    update_section(
        "decode_workers",
        "Decode workers or the reader's thread (issue #14)",
        f"python bench/decode_workers_bench.py --rows {args.rows} --rounds {args.rounds} "
        f"--workers {args.workers}",
        body,
    )


if __name__ == "__main__":
    main()
