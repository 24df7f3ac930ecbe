"""The MySQL sink's lane settings against one catch-up: which defaults to ship.

    .venv/bin/python bench/sink_settings_bench.py [--rows 1000000] [--rounds 3]
        [--settings "" "worker-count=2" "worker-count=4" "max-txn-row=256"]

The same binlog (--rows rows in one sysbench table, 1000 per INSERT) caught up by a
changefeed on one capture from before the rows, snapshot mode `never`, into the
downstream MariaDB once per round for each sink URI query of --settings (the empty
one: the defaults), alternated so that a drift of the machine's speed falls on every
setting alike, with the bare `BinLogStreamReader` loop of `bench/replication_bench.py`
first in each round for the ratio. Timed from creating the changefeed until its
checkpoint passes the last insert, with the CPU seconds of the capture's process and
of the downstream's server; results go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster import position_now, private_etcd
from bench.puller_bench import bare_loop
from bench.replication_bench import SIZING, Run, catch_up, fill_tables
from bench.report import median_cell, update_section
from bench.servers import execute_sql, mariadb

DEFAULT_SETTINGS = ("", "worker-count=2", "worker-count=4", "max-txn-row=256")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--settings", nargs="+", default=list(DEFAULT_SETTINGS), help="sink URI queries"
    )
    args = parser.parse_args()
    runs: dict[str, list[Run]] = {s: [] for s in args.settings}
    bare: list[float] = []
    with (
        mariadb("settings-source", 1, True, SIZING) as source,
        mariadb("settings-target", 2, False, SIZING) as target,
        private_etcd() as etcd,
    ):
        start = position_now(source)
        fill_tables(source, "e2e", 1, args.rows)
        end = position_now(source)
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            bare_loop(source, start, end, "e2e", None)
            bare.append(time.perf_counter() - t0)
            for query in args.settings:
                uri = target.uri.rstrip("/") + "/?" + query if query else target.uri
                run = catch_up(source, target, etcd, "e2e", 1, start, uri)
                runs[query].append(run)
                print(query or "(defaults)", run, flush=True)
                execute_sql(target, "DROP DATABASE IF EXISTS e2e")

    lines = [
        f"{args.rows:,} rows (one sysbench table, 1000 per INSERT) caught up by a changefeed "
        "on one capture from before them, snapshot mode `never`, into the downstream "
        f"MariaDB; both servers with a 1 GiB buffer pool; {os.cpu_count()} cores shared by "
        f"the source, the downstream, etcd and the capture. {args.rounds} rounds, the bare "
        "loop and then each setting in turn; each cell: the median, then every run. "
        "Seconds from `changefeed create` until the checkpoint passes the last insert; the "
        "ratio is the bare loop's median over the setting's; CPU seconds of the capture's "
        "process and of the downstream's server. Defaults: `worker-count=1`, "
        "`max-txn-row=4096`.\n",
        f"Bare `BinLogStreamReader` loop over `ev.rows`: {median_cell(bare)} s.\n",
        "| sink URI query | seconds | vs bare loop | capture, CPU-s | downstream, CPU-s |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for query, done in runs.items():
        seconds = [r.seconds for r in done]
        lines.append(
            f"| {f'`{query}`' if query else '(defaults)'} | {median_cell(seconds)} |"
            f" {statistics.median(bare) / statistics.median(seconds):.2f}x |"
            f" {median_cell([r.capture for r in done])} |"
            f" {median_cell([r.cpu.downstream for r in done])} |"
        )
    body = "\n".join(lines)
    print(body)
    quoted = " ".join(f'"{q}"' for q in args.settings)
    update_section(
        "sink_settings",
        "The MySQL sink's lane settings (issue #14)",
        f"python bench/sink_settings_bench.py --rows {args.rows} --rounds {args.rounds} "
        f"--settings {quoted}",
        body,
    )


if __name__ == "__main__":
    main()
