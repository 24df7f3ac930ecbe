"""The control plane with real captures (issue #15): three `cdc-server` processes, real tables.

    .venv/bin/python bench/control_plane_real_bench.py [--tables 1000,10000] [--seconds 20]
                                                       [--no-report]

``bench/control_plane_bench.py`` measures the owner alone against synthetic
captures; this one runs the product as deployed, per table count, on a private
etcd and source MariaDB (its table cache sized for the tables):

1. --tables empty tables created on the source (not timed);
2. three `cdc-server` processes (``bench/cluster.py``), each serving /metrics;
   the clock starts at the changefeed's creation (blackhole sink, snapshot mode
   never, every table of the database) and stops when every table's record says
   running on the capture its task names: **all running**;
3. --seconds of steady state, a heartbeat row written on the source every
   100 ms (into a table created with the others: no DDL falls in the window):
   from each capture's /metrics, the owner's cycles (``cdc_owner_cycle_seconds``:
   count, p50 and p99 as the bucket bounds they fall in; the same for the CPU
   time of the owner's thread in a cycle, ``cdc_owner_cycle_cpu_seconds``) and
   the etcd requests each capture sent (``cdc_etcd_requests_total``, the owner's
   capture counts its processor's too);
4. a capture that is not the owner is SIGKILLed: seconds until every table
   runs again on a live capture (its record running, at its task's revision);
5. a fourth capture starts: seconds until the tables are balanced over the
   three live ones (within one of each other, no move under way) and every one
   runs.

Writes the "Control plane with real captures" section of docs/benchmarks.md
unless --no-report.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.cluster import Cluster, cluster, private_etcd, wait_for  # noqa: E402
from bench.report import update_section  # noqa: E402
from bench.servers import mariadb  # noqa: E402
from cdc.changefeed import TableRecord, TableState, TaskState  # noqa: E402
from cdc.playground.etcd import EtcdServer  # noqa: E402
from cdc.playground.mariadb import MariaDBServer  # noqa: E402
from cdc.store.keys import TableCheckpointKey, TaskKey  # noqa: E402

CF = "cp"
#: Seconds between two polls of every task and record (the bench's own etcd reads).
POLL = 1.0


@dataclass
class Result:
    tables: int
    all_running_s: float
    cycles: int
    cycle_p50: float
    cycle_p99: float
    cpu_p50: float
    cpu_p99: float
    owner_requests_per_s: float
    other_requests_per_s: float
    reassign_s: float
    rebalance_s: float
    moved: int


@dataclass(frozen=True)
class Scrape:
    is_owner: bool
    requests: float
    #: (upper bound, cumulative count) of the owner-cycle histogram
    cycle_buckets: tuple[tuple[float, float], ...]
    #: the same for the CPU time of the owner's thread per cycle
    cpu_buckets: tuple[tuple[float, float], ...]


def scrape(address: str) -> Scrape:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    is_owner, requests, buckets, cpu = False, 0.0, [], []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "cdc_capture_is_owner":
                is_owner = sample.value == 1
            elif sample.name == "cdc_etcd_requests_total":
                requests = sample.value
            elif sample.name == "cdc_owner_cycle_seconds_bucket":
                buckets.append((float(sample.labels["le"]), sample.value))
            elif sample.name == "cdc_owner_cycle_cpu_seconds_bucket":
                cpu.append((float(sample.labels["le"]), sample.value))
    return Scrape(is_owner, requests, tuple(sorted(buckets)), tuple(sorted(cpu)))


def quantile(before: Scrape, after: Scrape, q: float, *, cpu: bool = False) -> tuple[int, float]:
    """Cycles between two scrapes, and the bucket bound the ``q`` quantile of their time
    (with ``cpu``, of their thread's CPU time) falls in."""
    was = dict(before.cpu_buckets if cpu else before.cycle_buckets)
    counts = [
        (le, n - was.get(le, 0.0)) for le, n in (after.cpu_buckets if cpu else after.cycle_buckets)
    ]
    total = counts[-1][1] if counts else 0.0
    for le, n in counts:
        if total and n >= q * total:
            return int(total), le
    return int(total), float("nan")


def placement(c: Cluster, live: set[str]) -> tuple[Counter[str], int, int]:
    """Tables running per live capture, moves under way, tables not running as their task says."""
    keys = c.store.keys
    tasks = {
        keys.parse(i.key, TaskKey).table: (i.json(), i.mod_revision)
        for i in c.store.get_prefix(keys.prefix_of(TaskKey, CF))
    }
    records = {
        keys.parse(i.key, TableCheckpointKey).table: TableRecord.from_dict(i.json())
        for i in c.store.get_prefix(keys.prefix_of(TableCheckpointKey, CF))
    }
    running: Counter[str] = Counter()
    moving = waiting = 0
    for table, (task, revision) in tasks.items():
        if task["state"] != TaskState.RUN.value:
            moving += 1
            continue
        record = records.get(table)
        if (
            task["capture_id"] in live
            and record is not None
            and record.state is TableState.RUNNING
            and record.capture_id == task["capture_id"]
            and record.task_revision == revision
        ):
            running[task["capture_id"]] += 1
        else:
            waiting += 1
    return running, moving, waiting


def heartbeat(source: MariaDBServer, db: str, stop: threading.Event) -> None:
    conn = source.connect()
    try:
        with conn.cursor() as cur:
            while not stop.wait(0.1):
                cur.execute(f"REPLACE INTO `{db}`.hb VALUES (1, {time.time()})")
                conn.commit()
    finally:
        conn.close()


def measure(etcd: EtcdServer, source: MariaDBServer, tables: int, seconds: float) -> Result:
    db = f"cpr{tables}"
    conn = source.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{db}`")
            for n in range(tables):
                cur.execute(f"CREATE TABLE `{db}`.t{n:05d} (id INT PRIMARY KEY, v INT)")
            # captured from the start: a CREATE TABLE in the window would put a DDL's cycle
            # (the owner applies it and schedules the new table) into the steady state
            cur.execute(f"CREATE TABLE `{db}`.hb (id INT PRIMARY KEY, t DOUBLE)")
        conn.commit()
    finally:
        conn.close()
    stop = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(source, db, stop), daemon=True)
    with cluster(etcd, 0) as c:
        c.start_captures(3, metrics=True)
        live = {f"capture-{n}" for n in range(3)}
        begun = time.monotonic()
        c.create_changefeed(
            CF,
            source,
            "blackhole://",
            rules=[f"{db}.*"],
            snapshot_mode="never",
        )

        def every_table_runs() -> bool:
            running, moving, waiting = placement(c, live)
            return not moving and not waiting and sum(running.values()) >= tables

        wait_for(every_table_runs, 3600, "every table to run", every=POLL)
        all_running = time.monotonic() - begun
        beat.start()
        try:
            addresses = [a for a in c.metrics_addresses if a is not None]
            first = [scrape(a) for a in addresses]
            window = time.monotonic()
            time.sleep(seconds)
            last = [scrape(a) for a in addresses]
            elapsed = time.monotonic() - window
        finally:
            stop.set()
            beat.join()
        owner = next(n for n, s in enumerate(last) if s.is_owner)
        cycles, p50 = quantile(first[owner], last[owner], 0.5)
        _, p99 = quantile(first[owner], last[owner], 0.99)
        _, cpu_p50 = quantile(first[owner], last[owner], 0.5, cpu=True)
        _, cpu_p99 = quantile(first[owner], last[owner], 0.99, cpu=True)
        rates = [(b.requests - a.requests) / elapsed for a, b in zip(first, last, strict=True)]
        others = [r for n, r in enumerate(rates) if n != owner]
        dead = next(n for n in range(3) if n != owner)
        killed = time.monotonic()
        c.procs[dead].send_signal(signal.SIGKILL)
        c.procs[dead].wait()
        live.discard(f"capture-{dead}")
        wait_for(every_table_runs, 3600, "the dead capture's tables to run again", every=POLL)
        reassign = time.monotonic() - killed
        joined = time.monotonic()
        c.start_captures(1, metrics=True)
        live.add(f"capture-{len(c.procs) - 1}")

        def balanced() -> bool:
            running, moving, waiting = placement(c, live)
            counts = [running[capture] for capture in live]
            return not moving and not waiting and max(counts) - min(counts) <= 1

        wait_for(balanced, 3600, "the tables to balance over the capture that joined", every=POLL)
        rebalance = time.monotonic() - joined
        moved = placement(c, live)[0][f"capture-{len(c.procs) - 1}"]
    return Result(
        tables=tables,
        all_running_s=all_running,
        cycles=cycles,
        cycle_p50=p50,
        cycle_p99=p99,
        cpu_p50=cpu_p50,
        cpu_p99=cpu_p99,
        owner_requests_per_s=rates[owner],
        other_requests_per_s=sum(others) / len(others),
        reassign_s=reassign,
        rebalance_s=rebalance,
        moved=moved,
    )


def table(results: list[Result]) -> str:
    lines = [
        "| tables | all running after create | owner cycles | cycle p50 | cycle p99"
        " | its CPU p50 | its CPU p99"
        " | etcd requests/s, owner's capture | each other capture"
        " | all running again after a capture died | rebalance after a capture joined |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.tables:,} | {r.all_running_s:.1f} s | {r.cycles} | <= {r.cycle_p50 * 1000:g} ms"
            f" | <= {r.cycle_p99 * 1000:g} ms | <= {r.cpu_p50 * 1000:g} ms"
            f" | <= {r.cpu_p99 * 1000:g} ms | {r.owner_requests_per_s:.1f}"
            f" | {r.other_requests_per_s:.1f} | {r.reassign_s:.1f} s"
            f" | {r.rebalance_s:.1f} s ({r.moved:,} moved) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", default="1000,10000", help="table counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="steady state measured")
    parser.add_argument("--no-report", action="store_true", help="print only")
    args = parser.parse_args()
    counts = [int(n) for n in args.tables.split(",")]
    cache = str(max(counts) + 2000)
    options = (f"--table-open-cache={cache}", "--open-files-limit=65535")
    results = []
    with private_etcd() as etcd, mariadb("cpr-source", 102, True, options) as source:
        for count in counts:
            result = measure(etcd, source, count, args.seconds)
            print(table([result]).splitlines()[-1], flush=True)
            results.append(result)
    body = (
        "Three `cdc-server` processes on this machine with etcd and the source; one "
        "changefeed over every table of a database (empty tables: the cost measured is "
        "the tables' number, not their rows), blackhole sink, snapshot mode never, a "
        "heartbeat row written every 100 ms into a table of its own, captured from the "
        f"start (the tables' count is one more). {args.seconds:.0f} s of steady state. Cycle "
        "quantiles are the bounds of the `cdc_owner_cycle_seconds` buckets they fall in "
        "(its CPU: `cdc_owner_cycle_cpu_seconds`, the owner thread's CPU time in a cycle; "
        "the rest of a cycle waited on etcd or on the interpreter's other threads); "
        "the owner's capture's requests include its processor's. \"All running\" counts a "
        "table once its record says running on the capture its task names, at that task's "
        "revision; after a capture died, its tables are reassigned once its lease (5 s) "
        "ran out.\n\n" + table(results)
    )
    print(body)
    if not args.no_report:
        command = "python bench/control_plane_real_bench.py " + " ".join(sys.argv[1:])
        update_section(
            "control_plane_real",
            "Control plane with real captures (issue #15)",
            command.strip(),
            body,
        )


if __name__ == "__main__":
    main()
