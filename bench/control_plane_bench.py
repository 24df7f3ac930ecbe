"""The owner's cost against the number of tables (issue #15): cycle time, etcd requests.

    .venv/bin/python bench/control_plane_bench.py [--tables 10,1000,10000] [--seconds 20]
                                                  [--max-moving N] [--no-report]

Per table count, on a private etcd and source MariaDB: one changefeed
(snapshot mode never, its DDL puller reading the real source) whose tables
are synthetic in etcd: a task and a record per table, spread over three
captures. The captures are synthetic too: three capture keys under leases
this script keeps alive, and a processor process that reports as real
processors do while rows flow (``processor/shared_stream.py``): each
capture's one binlog reader writes its progress key once a second at the
source's current position, a table's record (which carries its schema and
names the reader) is written as soon as its task changes (watched) and
otherwise again every 30 s, spread evenly, batched 64 per transaction; a
stop is answered with a stopped record. Real `cdc-server`
processes would start a pipeline per task, and these tables do not exist on
the source.

The owner is the product's (``owner.owner.Owner``), in this process, on its
own etcd connection; measured over ``--seconds`` after a 5 s warm-up:

* owner cycles: how many, p50 / p99 / max duration (``Owner.run_cycle``);
* etcd requests the owner's connection sent, per second and per cycle
  (reads, writes, transactions; watch events are not requests);
* then one capture's lease is revoked: seconds until no task names it
  (the owner's reassignment of a third of the tables, 48 tasks to a fenced
  transaction);
* then a fourth capture joins: seconds until the tables are balanced again
  (each capture's count within one of the others', no move under way), a
  third of them moved (two captures held them all), each by a stop its old
  capture answers and a start on the new one (``OwnerOptions.max_moving``
  moves under way at once).

Writes the "Control plane" section of docs/benchmarks.md unless --no-report.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cluster import position_now, private_etcd  # noqa: E402
from bench.report import update_section  # noqa: E402
from bench.servers import mariadb  # noqa: E402
from capture.gc_policy import tune_after_startup  # noqa: E402
from cdc.changefeed import (  # noqa: E402
    ChangefeedStatus,
    ChangefeedStore,
    TableRecord,
    TableState,
    TableTask,
    TaskState,
)
from cdc.changefeed.stream_progress import StreamProgress  # noqa: E402
from cdc.config import load_changefeed_config  # noqa: E402
from cdc.model.position import Position  # noqa: E402
from cdc.model.schema import Column, TableName, TableSchema  # noqa: E402
from cdc.playground.etcd import EtcdServer  # noqa: E402
from cdc.playground.mariadb import MariaDBServer  # noqa: E402
from cdc.source.connect import connect  # noqa: E402
from cdc.source.flavor import current_position, detect  # noqa: E402
from cdc.store import (  # noqa: E402
    Election,
    EtcdConfig,
    EtcdStore,
    KeepAlive,
    KeyMirror,
    Put,
)
from cdc.store.keys import TaskKey, cluster_prefix  # noqa: E402
from cdc.uri.mysql import parse_source_uri  # noqa: E402
from owner.owner import Owner, OwnerOptions  # noqa: E402

CF = "cp"
DB = "cp"
CAPTURES = ("c0", "c1", "c2")
#: The capture that joins after one of CAPTURES died: a third of the tables move to it.
JOINER = "c3"
#: Operations per etcd transaction when writing many keys (etcd allows 128).
BATCH = 64
WARMUP = 5.0
#: Seconds between two writes of a streaming table's record (StreamOptions.record_refresh).
REFRESH = 30


class CountingStore(EtcdStore):
    """An ``EtcdStore`` that counts the requests it sends."""

    requests = 0

    def _call(self, what: str, fn: Callable[[Any], Any], lease_id: int | None = None) -> Any:
        self.requests += 1
        return super()._call(what, fn, lease_id)


@dataclass
class Result:
    tables: int
    cycles: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    requests_per_s: float
    requests_per_cycle: float
    reassign_s: float
    first_ms: float
    rebalance_s: float
    moved: int


def schema_of(table: str) -> dict[str, Any]:
    columns = (
        Column("id", "int", "int(11)", nullable=False),
        Column("k", "int", "int(11)"),
        Column("c", "char", "char(120)"),
        Column("pad", "char", "char(60)"),
    )
    return TableSchema(TableName(DB, table), columns, ("id",)).to_dict()


def put_all(store: EtcdStore, items: list[tuple[Any, dict[str, Any]]]) -> int:
    """Writes ``items``, ``BATCH`` to a transaction; the revision of the last one."""
    last = 0
    for first in range(0, len(items), BATCH):
        last = store.txn_revision([], [Put(k, v) for k, v in items[first : first + BATCH]]) or 0
    return last


def report_forever(
    endpoint: str, prefix: str, source_uri: str, stop: Any, reported: Any
) -> None:
    """The synthetic processors, in a process of their own (so that their encoding does
    not take the owner's interpreter). Tasks are followed by a watch, as real processors
    follow theirs: a task that changed is answered at once (a stop with a stopped record,
    a run with a running one). Per capture one progress key a second at the source's
    position; a streaming table's record again every ``REFRESH`` seconds, spread evenly."""
    store = EtcdStore(EtcdConfig((endpoint,), prefix=prefix))
    source = connect(parse_source_uri(source_uri))
    info = detect(source)
    keys = store.keys
    woken = threading.Event()
    mirror = KeyMirror(store, keys.prefix_of(TaskKey, CF), lambda _key: woken.set()).start()
    #: table -> (capture, state, revision); a task decoded again only when it changed
    tasks: dict[str, tuple[str, str, int]] = {}
    names: dict[str, str] = {}
    written: dict[str, tuple[str, str, int]] = {}
    through: dict[str, int] = {}
    turn, next_second = 0, 0.0
    position = current_position(source, info)
    try:
        while not stop.is_set():
            woken.wait(0.1)
            woken.clear()
            seen = {}
            for item in mirror.get_prefix(mirror.prefix):
                table = names.get(item.key) or names.setdefault(
                    item.key, keys.parse(item.key, TaskKey).table
                )
                held = tasks.get(table)
                if held is None or held[2] != item.mod_revision:
                    task = item.json()
                    held = (task["capture_id"], task["state"], item.mod_revision)
                seen[table] = held
            tasks = seen
            rewrite = [t for t, held in tasks.items() if written.get(t) != held]
            second = time.monotonic() >= next_second
            if second:
                next_second = time.monotonic() + 1.0
                position = current_position(source, info)
                fresh = [t for t in tasks if written.get(t) == tasks[t] and tasks[t][1] == "run"]
                count = -(-len(fresh) // REFRESH)
                first = turn % max(len(fresh), 1)
                turn = first + count
                rewrite += fresh[first : first + count]
                rewrite += fresh[: max(0, first + count - len(fresh))]
            last = put_all(
                store,
                [(keys.table_checkpoint(CF, t), record(*tasks[t], position, t)) for t in rewrite],
            )
            for t in rewrite:
                written[t] = tasks[t]
                through[tasks[t][0]] = max(through.get(tasks[t][0], 0), last)
            if second:
                for capture in {capture for capture, _, _ in tasks.values()}:
                    store.put(
                        keys.stream_progress(CF, capture, f"{capture}-r"),
                        StreamProgress(position, through.get(capture, 0)).to_dict(),
                    )
                reported.set()
    finally:
        mirror.close()
        source.close()
        store.close()


def record(
    capture: str, state: str, revision: int, position: Position, table: str
) -> dict[str, Any]:
    running = state == TaskState.RUN.value
    data = TableRecord(
        capture,
        TableState.RUNNING if running else TableState.STOPPED,
        revision,
        position,
        reader=f"{capture}-r" if running else None,
    ).to_dict()
    data["schema"] = schema_of(table)
    return data


def heartbeat(source: MariaDBServer, stop: threading.Event) -> None:
    """A write on the source every 100 ms, so positions move."""
    conn = source.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{DB}`")
            cur.execute(f"CREATE TABLE IF NOT EXISTS `{DB}`.hb (id INT PRIMARY KEY, t DOUBLE)")
            while not stop.wait(0.1):
                cur.execute(f"REPLACE INTO `{DB}`.hb VALUES (1, {time.time()})")
                conn.commit()
    finally:
        conn.close()


class Captures:
    """Synthetic captures: a capture key under a lease this script keeps alive."""

    def __init__(self, store: EtcdStore) -> None:
        self.store = store
        self.leases: dict[str, Any] = {}
        self.alive: list[KeepAlive] = []

    def join(self, capture: str) -> None:
        lease = self.store.grant_lease(10)
        self.store.put(
            self.store.keys.capture(capture),
            {"v": 1, "capture_id": capture, "address": "127.0.0.1:0"},
            lease=lease,
        )
        self.leases[capture] = lease
        self.alive.append(KeepAlive(lease, on_lost=lambda _lease: None).start())

    def die(self, capture: str) -> None:
        self.store.revoke_lease(self.leases.pop(capture).id)


@contextmanager
def captures(store: EtcdStore) -> Iterator[Captures]:
    held = Captures(store)
    try:
        for capture in CAPTURES:
            held.join(capture)
        yield held
    finally:
        for keepalive in held.alive:
            keepalive.stop()


def placement(store: EtcdStore) -> tuple[Counter[str], int]:
    """Tasks that run, per capture; and how many are stopped (a move under way)."""
    running: Counter[str] = Counter()
    stopped = 0
    for item in store.get_prefix(store.keys.prefix_of(TaskKey, CF)):
        task = item.json()
        if task["state"] == TaskState.RUN.value:
            running[task["capture_id"]] += 1
        else:
            stopped += 1
    return running, stopped


def measure(
    etcd: EtcdServer, source: MariaDBServer, tables: int, seconds: float, max_moving: int
) -> Result:
    prefix = f"cp-{uuid.uuid4().hex[:8]}"
    config = EtcdConfig((etcd.endpoint,), prefix=cluster_prefix(prefix))
    world = EtcdStore(config)
    owner_store = CountingStore(config)
    stop = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(source, stop), daemon=True)
    beat.start()
    names = [f"t{i:05d}" for i in range(tables)]
    try:
        with captures(world) as held:
            start = position_now(source)
            feeds = ChangefeedStore(world)
            feeds.create(
                load_changefeed_config(
                    None,
                    {
                        "changefeed_id": CF,
                        "source_uri": source.uri_by_reference(source.spec.base_dir, "source"),
                        "sink_uri": "blackhole://",
                        "rules": [f"{DB}.*"],
                        "snapshot_mode": "never",
                    },
                )
            )
            keys = world.keys
            world.put(
                keys.changefeed_status(CF),
                ChangefeedStatus(start=start, checkpoint=start).to_dict(),
            )
            put_all(
                world,
                [
                    (
                        keys.task(CF, f"{DB}.{t}"),
                        TableTask(CAPTURES[i % 3], TaskState.RUN).to_dict(),
                    )
                    for i, t in enumerate(names)
                ],
            )
            spawn = multiprocessing.get_context("spawn")
            stop_reports = spawn.Event()
            reported = spawn.Event()
            processors = spawn.Process(
                target=report_forever,
                args=(etcd.endpoint, config.prefix, source.uri, stop_reports, reported),
                daemon=True,
            )
            processors.start()
            election = Election(owner_store, "owner", ttl=10)
            # as cdc-server does once started (capture/gc_policy.py): the collector's
            # defaults would walk every table's objects in a full collection mid-cycle
            tune_after_startup()
            options = OwnerOptions(max_moving=max_moving)
            owner = Owner(owner_store, "owner", election.campaign(timeout=10), options)
            durations: list[tuple[float, float]] = []
            real_cycle = owner.run_cycle

            def timed() -> str:
                begun = time.monotonic()
                try:
                    return real_cycle()
                finally:
                    durations.append((begun, time.monotonic() - begun))

            owner.run_cycle = timed  # type: ignore[method-assign]
            owner.start()
            try:
                # Warm-up, reported apart: the processors write every table's record
                # (each carrying a schema) and the owner decodes each once; then the
                # steady state is measured from a few cycles on.
                reported.wait()
                settled_from = len(durations)
                while len(durations) < settled_from + 3:
                    time.sleep(0.05)
                first_cycle = max(d for _, d in durations[: settled_from + 3])
                time.sleep(WARMUP)
                requests_before, begun = owner_store.requests, time.monotonic()
                time.sleep(seconds)
                requests = owner_store.requests - requests_before
                elapsed = time.monotonic() - begun
                window = sorted(d for at, d in durations if begun <= at < begun + elapsed)
                dead = CAPTURES[2]
                killed = time.monotonic()
                held.die(dead)
                while dead in placement(world)[0]:
                    time.sleep(0.05)
                reassign = time.monotonic() - killed
                joined = time.monotonic()
                held.join(JOINER)
                while True:
                    running, stopped = placement(world)
                    spread = max(running.values()) - min(running.values())
                    if not stopped and spread <= 1 and JOINER in running:
                        break
                    time.sleep(0.5)
                rebalance = time.monotonic() - joined
                moved = running[JOINER]
            finally:
                stop_reports.set()
                processors.join()
                owner.stop()
                election.resign()
        ms = [d * 1000 for d in window]
        return Result(
            tables=tables,
            cycles=len(ms),
            p50_ms=statistics.median(ms),
            p99_ms=ms[min(len(ms) - 1, int(len(ms) * 0.99))],
            max_ms=ms[-1],
            requests_per_s=requests / elapsed,
            requests_per_cycle=requests / max(len(ms), 1),
            reassign_s=reassign,
            first_ms=first_cycle * 1000,
            rebalance_s=rebalance,
            moved=moved,
        )
    finally:
        stop.set()
        beat.join()
        world.delete_prefix(cluster_prefix(prefix) + "/")
        owner_store.close()
        world.close()


def table(results: list[Result]) -> str:
    lines = [
        "| tables | warm-up's longest cycle | owner cycles | cycle p50 | p99 | max"
        " | owner etcd requests/s | requests/cycle | reassign after a capture died"
        " | rebalance after a capture joined |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| {r.tables:,} | {r.first_ms:.0f} ms | {r.cycles} | {r.p50_ms:.1f} ms"
            f" | {r.p99_ms:.1f} ms | {r.max_ms:.1f} ms | {r.requests_per_s:.1f}"
            f" | {r.requests_per_cycle:.2f} | {r.reassign_s:.1f} s"
            f" | {r.rebalance_s:.1f} s ({r.moved:,} moved) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", default="10,1000,10000", help="table counts, comma-separated")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per count")
    parser.add_argument(
        "--max-moving",
        type=int,
        default=OwnerOptions().max_moving,
        help="the owner's moves under way at once (default: the product's)",
    )
    parser.add_argument("--no-report", action="store_true", help="print only")
    args = parser.parse_args()
    counts = [int(n) for n in args.tables.split(",")]
    results = []
    with private_etcd() as etcd, mariadb("cp-source", 101, binlog=True) as source:
        for count in counts:
            result = measure(etcd, source, count, args.seconds, args.max_moving)
            print(table([result]).splitlines()[-1], flush=True)
            results.append(result)
    body = (
        "One changefeed; its tables synthetic in etcd (a task and a record each, records "
        "carrying a 4-column schema), spread over 3 synthetic captures whose processor "
        "reports as the real one does (one progress key per capture a second; a table's "
        "record as soon as its task changes, a stop answered with a stopped record, and "
        "every 30 s, spread evenly; from a process of its own); the owner is the product's, "
        "in the bench process with cdc-server's garbage-collector settings "
        "(capture/gc_policy.py), its DDL puller on a real source with a "
        f"heartbeat write every 100 ms. {args.seconds:.0f} s measured, {WARMUP:.0f} s after "
        "the warm-up: the owner's first cycles read every task and record once, the "
        "processors' first reports included (their longest is reported apart).\n\n"
        + table(results)
        + "\n\nRequests are the owner's own connection's (reads, writes, transactions, "
        "lease calls; watch events are not requests). The reassignment rewrites the dead "
        "capture's tasks, 48 to a fenced transaction. Each cycle decodes the records and "
        "progress keys that changed since the last one (a thirtieth of the records a "
        "second, 3 progress keys) and computes every table's checkpoint from its record "
        "and its reader's progress. The rebalance moves a third of the tables to the "
        f"capture that joined, {args.max_moving} under way at once "
        "(`OwnerOptions.max_moving`); each move is a stop the old capture answers and a "
        "start on the new one."
    )
    print(body)
    if not args.no_report:
        command = "python bench/control_plane_bench.py " + " ".join(sys.argv[1:])
        update_section(
            "control_plane",
            "Control plane: the owner against table count (issue #15)",
            command.strip(),
            body,
        )


if __name__ == "__main__":
    main()
