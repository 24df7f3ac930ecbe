"""Rows per second of the MySQL sink against a plain single-connection ``executemany``.

    .venv/bin/python bench/sink_bench.py [--rows 200000] [--update-rows 50000] [--repeat 3]

Starts its own MariaDB (``cdc.playground``, data in a temporary directory,
installing mariadb-server first if it is missing), so it runs on a fresh
machine. The table is sysbench's ``sbtest`` (id INT primary key, k INT with an
index, c CHAR(120), pad CHAR(60)) with sysbench-like random values.

Workloads, each on an emptied (insert) or freshly loaded (update) table:

* insert: ``--rows`` new rows.
* update: ``--update-rows`` changes of k and c on existing rows.

Writers:

* ``executemany``: one connection, ``cursor.executemany`` over batches of
  ``--max-txn-row`` rows (PyMySQL folds an INSERT into multi-row statements;
  an UPDATE runs row by row), one transaction per batch. What a plain loader
  or applier does.
* ``MySQLSink`` with worker-count 1 and 8, ``--max-txn-row`` rows per
  transaction, fed ``RowChange`` s in ``write_rows`` calls of ``--batch``
  changes, ten changes per source transaction. Building the ``RowChange`` s
  (the decoder's work) is not timed; the clock runs from the first
  ``write_rows`` to the return of ``flush``.

Each cell is the median of ``--repeat`` runs. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pymysql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import update_section
from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.packages import MARIADB_PACKAGES, ensure_packages
from cdc.playground.ports import free_port
from cdc.sink.mysql import MySQLSink
from cdc.sink.registry import parse_sink_uri
from cdc.typeconv import sink_connect_kwargs

DATABASE = "sinkbench"
TABLE = TableName(DATABASE, "sbtest1")
DDL = (
    f"CREATE TABLE {TABLE.quoted()} (id INT NOT NULL, k INT NOT NULL DEFAULT 0, "
    "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', "
    "PRIMARY KEY (id), KEY k_1 (k)) ENGINE=InnoDB"
)
SCHEMA = TableSchema(
    TABLE,
    (
        Column("id", "int", "int(11)", nullable=False),
        Column("k", "int", "int(11)", nullable=False),
        Column("c", "char", "char(120)", nullable=False),
        Column("pad", "char", "char(60)", nullable=False),
    ),
    ("id",),
)
ROWS_PER_TXN = 10

Row = tuple[int, int, str, str]


def sysbench_text(rng: random.Random, groups: int) -> str:
    """sysbench's c / pad values: groups of 11 digits joined by '-'."""
    return "-".join(f"{rng.randrange(10**11):011d}" for _ in range(groups))


def make_rows(count: int, seed: int) -> list[Row]:
    rng = random.Random(seed)
    return [
        (i, rng.randint(1, count), sysbench_text(rng, 10), sysbench_text(rng, 5))
        for i in range(1, count + 1)
    ]


def as_dict(row: Row) -> dict[str, Any]:
    return {"id": row[0], "k": row[1], "c": row[2], "pad": row[3]}


def make_changes(rows: list[Row], before: list[Row] | None) -> list[RowChange]:
    """Inserts of ``rows`` (or updates from ``before``), ten per source transaction."""
    changes = []
    position = Position("binlog.000001", 4)
    for n, row in enumerate(rows):
        if n % ROWS_PER_TXN == 0:
            position = Position("binlog.000001", 4 + n)
        if before is None:
            changes.append(RowChange(TABLE, Op.CREATE, None, as_dict(row), (row[0],), position))
        else:
            old = as_dict(before[n])
            changes.append(RowChange(TABLE, Op.UPDATE, old, as_dict(row), (row[0],), position))
    return changes


class Bench:
    def __init__(self, server: MariaDBServer, args: argparse.Namespace) -> None:
        self.server = server
        self.args = args

    def connect(self) -> pymysql.connections.Connection:
        return self.server.connect(autocommit=True, **sink_connect_kwargs())

    def reset(self, rows: list[Row] | None) -> None:
        """An empty table, or one holding ``rows``."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"DROP TABLE IF EXISTS {TABLE.quoted()}")
                cur.execute(DDL)
                if rows:
                    for start in range(0, len(rows), 5000):
                        cur.executemany(
                            f"INSERT INTO {TABLE.quoted()} (id, k, c, pad) VALUES (%s,%s,%s,%s)",
                            rows[start : start + 5000],
                        )
        finally:
            conn.close()

    def executemany(self, rows: list[Row], update: bool) -> float:
        if update:
            sql = f"UPDATE {TABLE.quoted()} SET k = %s, c = %s, pad = %s WHERE id = %s"
            params: list[tuple[Any, ...]] = [(k, c, pad, i) for i, k, c, pad in rows]
        else:
            sql = f"INSERT INTO {TABLE.quoted()} (id, k, c, pad) VALUES (%s, %s, %s, %s)"
            params = list(rows)
        size = self.args.max_txn_row
        conn = self.connect()
        try:
            began = time.perf_counter()
            with conn.cursor() as cur:
                for start in range(0, len(params), size):
                    conn.begin()
                    cur.executemany(sql, params[start : start + size])
                    conn.commit()
            return time.perf_counter() - began
        finally:
            conn.close()

    def sink(self, changes: list[RowChange], workers: int) -> float:
        query = f"?worker-count={workers}&max-txn-row={self.args.max_txn_row}"
        sink = MySQLSink(parse_sink_uri(self.server.uri + query), lambda _: SCHEMA, "bench")
        try:
            batch = self.args.batch
            began = time.perf_counter()
            for start in range(0, len(changes), batch):
                sink.write_rows(changes[start : start + batch])
            flushed = sink.flush()
            elapsed = time.perf_counter() - began
        finally:
            sink.close()
        assert flushed == changes[-1].position
        return elapsed

    def check(self, rows: list[Row]) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT COUNT(*), SUM(k), SUM(CRC32(c)) FROM {TABLE.quoted()}")
                got = cur.fetchone()
        finally:
            conn.close()
        want = (len(rows), sum(r[1] for r in rows), sum(zlib.crc32(r[2].encode()) for r in rows))
        if tuple(int(v) for v in got) != want:
            raise SystemExit(f"wrong table contents after a run: {got} != {want}")

    def measure(
        self, run: Callable[[], float], prepare: Callable[[], None], rows: list[Row]
    ) -> float:
        times = []
        for _ in range(self.args.repeat):
            prepare()
            times.append(run())
            self.check(rows)
        return statistics.median(times)


def server_version(server: MariaDBServer) -> str:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT VERSION()")
            return cur.fetchone()[0]
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--update-rows", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--max-txn-row", type=int, default=256)
    args = parser.parse_args(argv)
    ensure_packages(MARIADB_PACKAGES)
    with tempfile.TemporaryDirectory(prefix="sinkbench-") as tmp:
        spec = MariaDBSpec(
            name="sink-bench", base_dir=Path(tmp), port=free_port(), server_id=77, binlog=False
        )
        server = MariaDBServer(spec, die_with_parent=True)
        server.start()
        try:
            conn = server.connect()
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {DATABASE}")
            conn.close()
            results = run_all(Bench(server, args), args)
            version = server_version(server)
        finally:
            server.stop()
    print_table(results, args, argv, version)
    return 0


def run_all(bench: Bench, args: argparse.Namespace) -> list[tuple[str, str, int, float]]:
    results: list[tuple[str, str, int, float]] = []
    rows = make_rows(args.rows, seed=1)
    inserts = make_changes(rows, None)
    empty = partial(bench.reset, None)
    seconds = bench.measure(partial(bench.executemany, rows, False), empty, rows)
    results.append(("insert", "executemany", len(rows), seconds))
    for workers in (1, 8):
        seconds = bench.measure(partial(bench.sink, inserts, workers), empty, rows)
        results.append(("insert", f"MySQLSink worker-count={workers}", len(rows), seconds))

    base = make_rows(args.update_rows, seed=2)
    rng = random.Random(3)
    updated = [(i, rng.randint(1, len(base)), sysbench_text(rng, 10), pad) for i, _, _, pad in base]
    updates = make_changes(updated, base)
    loaded = partial(bench.reset, base)
    seconds = bench.measure(partial(bench.executemany, updated, True), loaded, updated)
    results.append(("update", "executemany", len(updated), seconds))
    for workers in (1, 8):
        seconds = bench.measure(partial(bench.sink, updates, workers), loaded, updated)
        results.append(("update", f"MySQLSink worker-count={workers}", len(updated), seconds))
    return results


def print_table(
    results: list[tuple[str, str, int, float]],
    args: argparse.Namespace,
    argv: list[str],
    version: str,
) -> None:
    """Prints the table and writes it into docs/benchmarks.md (section `sink`)."""
    command = " ".join(["python", "bench/sink_bench.py", *map(shlex.quote, argv)])
    lines = [
        f"MariaDB {version} (playground settings), median of {args.repeat} run(s), "
        f"max-txn-row {args.max_txn_row}, write_rows batches of {args.batch}; baseline: a plain "
        "single-connection `executemany` of the same rows.",
        "",
        "| workload | writer | rows | seconds | rows/s | vs executemany |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    baseline: dict[str, float] = {}
    for workload, writer, count, seconds in results:
        rate = count / seconds
        if writer == "executemany":
            baseline[workload] = rate
        lines.append(
            f"| {workload} | {writer} | {count:,} | {seconds:.2f} | {rate:,.0f} | "
            f"{rate / baseline[workload]:.2f}x |"
        )
    body = "\n".join(lines)
    print(body)
    update_section("sink", "MySQL sink (issue #5)", command, body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
