"""Puller + typed decoding rows/s against a bare BinLogStreamReader loop, same binlog, same run.

    .venv/bin/python bench/puller_bench.py [--rows 1000000]

1. A private source MariaDB; a sysbench-shaped table (id, k, c char(120), pad
   char(60)) filled with --rows rows by multi-row INSERTs (1000 rows each).
2. Baseline: `for ev in BinLogStreamReader(...): for row in ev.rows` over that
   binlog range (only_events = the three row events, non-blocking).
3. Ours: `Puller.events()` over the same range, every RowChange built (typed
   values, key, position), until the end position.
Each reader runs --repeat times; the best run of each counts.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from bench.report import update_section
from bench.servers import mariadb
from bench.sysbench import fill
from cdc.binlog.puller import Puller, PullerConfig
from cdc.filter.table_filter import TableFilter
from cdc.model.events import RowChange
from cdc.model.position import Position
from cdc.playground.mariadb import MariaDBServer
from cdc.source.flavor import ServerInfo, current_position, detect
from cdc.uri.mysql import parse_source_uri


def bare_loop(
    server: MariaDBServer,
    start: Position,
    end: Position,
    schema: str = "sbtest",
    table: str | None = "sbtest1",
) -> int:
    """Rows of ``schema`` (one ``table`` of it, or all when None) between two positions,
    read by a bare ``BinLogStreamReader`` loop: the baseline the benchmarks compare with."""
    stream = BinLogStreamReader(
        connection_settings={
            "host": server.host,
            "port": server.port,
            "user": server.user,
            "passwd": server.password,
        },
        server_id=random.randint(1 << 20, 1 << 30),
        resume_stream=True,
        log_file=start.file,
        log_pos=start.offset,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_tables=None if table is None else [table],
        only_schemas=[schema],
    )
    n = 0
    for event in stream:
        for _row in event.rows:
            n += 1
        if stream.log_file == end.file and stream.log_pos >= end.offset:
            break
    stream.close()
    return n


def ours(server: MariaDBServer, info: ServerInfo, start: Position, end: Position) -> int:
    puller = Puller(
        PullerConfig(
            source=parse_source_uri(server.uri),
            server=info,
            start=start,
            tables=TableFilter.parse(["sbtest.sbtest1"]),
        )
    )
    n = 0
    for event in puller.events():
        if type(event) is RowChange:
            n += 1
        elif event.position.key() >= end.key():
            break
    puller.close()
    return n


def best(fn: Callable[[], int], repeat: int) -> tuple[int, float]:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        runs.append((time.perf_counter() - t0, n))
    seconds, n = min(runs)
    return n, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    with mariadb("bench-source", 1, True) as server:
        conn = server.connect()
        info = detect(conn)
        start = current_position(conn, info)
        t0 = time.perf_counter()
        fill(conn, args.rows)
        fill_s = time.perf_counter() - t0
        end = current_position(conn, info)
        conn.close()
        base_n, base_s = best(lambda: bare_loop(server, start, end), args.repeat)
        our_n, our_s = best(lambda: ours(server, info, start, end), args.repeat)
    assert base_n == our_n == args.rows, (base_n, our_n)
    base_rate, our_rate = base_n / base_s, our_n / our_s
    body = (
        f"{args.rows:,} rows inserted (1000 per INSERT, {fill_s:.0f} s), read back from the"
        f" binlog; best of {args.repeat}.\n\n"
        "| reader | rows | seconds | rows/s | ratio |\n| --- | ---: | ---: | ---: | ---: |\n"
        f"| bare `BinLogStreamReader` loop over `ev.rows` (baseline) | {base_n:,} | {base_s:.2f} |"
        f" {base_rate:,.0f} | 1.00x |\n"
        f"| `Puller.events()`: typed RowChange with key and position | {our_n:,} | {our_s:.2f} |"
        f" {our_rate:,.0f} | {our_rate / base_rate:.2f}x |\n"
    )
    print(body)
    if not args.no_write:
        update_section(
            "puller",
            "Binlog puller and typed decoding (issue #3)",
            f"python bench/puller_bench.py --rows {args.rows}",
            body,
        )


if __name__ == "__main__":
    main()
