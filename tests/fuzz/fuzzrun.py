"""Runs one seed of the randomized differential test against a real cluster; the verdict.

    run_seed(world, seed, work_dir, budget, replay=...) -> SeedResult
      1. plan = fuzzgen.generate(seed)           the operations log goes to work_dir first
      2. a fresh database on the source, the plan's setup (tables + pre-filled rows)
      3. a fresh cluster (three `cdc-server`, tests/cluster_harness.py) and changefeed,
         small chunks: the snapshot is running when the workload starts; odd seeds
         decode rows in a worker process, even ones in the reader's thread
         (``decode_workers_for``); seeds 0 and 1 modulo 4 write through the sink's
         default one lane, 2 and 3 through two (``sink_lanes_for``)
      4. the plan's operations, one after another on one connection; faults in between
      5. every killed capture started again; the changefeed checkpoint past the
         source's last position, state normal
      6. verdict (``compare``): the source holds the plan's tables, the changefeed
         runs exactly those, cdc.diff.check finds no difference

Any failure is reported, never raised: ``SeedResult.failure`` names the seed, the
one-line replay command, the operations log, and what differed (per table, the
first differing rows), and the same text ends the operations log. The callers
(tests/fuzz/test_fuzz_differential.py, bench/fuzz_soak.py) decide what a failure does.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pymysql
from cluster_harness import CAPTURES, TTL, Cluster, diff, ensure_up, start_again
from fuzzgen import Fault, Operation, OpKind, Plan, generate
from testkit import execute, position_now, wait_for

from cdc.changefeed import ChangefeedState
from cdc.changefeed.table_update import TablesUpdateResult
from cdc.changefeed.tables import TableState
from cdc.diff import DiffReport, TableStatus
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

__all__ = [
    "Budget",
    "SeedResult",
    "World",
    "compare",
    "corrupt_one_row",
    "failure_text",
    "run_seed",
]

#: Differing rows shown per table in a failure.
SHOWN_ROWS = 10


@dataclass(frozen=True)
class World:
    """The servers every seed shares; each seed has its own database and cluster."""

    source: MariaDBServer
    sink: MariaDBServer
    etcd: EtcdServer


@dataclass(frozen=True)
class Budget:
    """How big one seed's run is."""

    operations: int = 40
    max_faults: int = 2
    rows: int = 3000
    chunk_size: int = 100
    pause: float = 0.1  # seconds between operations
    settle_timeout: float = 90.0
    readds: int = 0  # captured tables removed by new rules, then added back
    corrupt: bool = False  # corrupt one downstream row before the verdict (a self-test)
    variety: bool = False  # every column kind and key shape (fuzzgen.generate)


@dataclass
class SeedResult:
    seed: int
    plan: Plan
    log: Path
    seconds: float = 0.0
    failure: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None


class _Journal:
    """The operations log of a seed: the plan, then what happened while it ran."""

    def __init__(self, path: Path, plan: Plan) -> None:
        self.path = path
        path.write_text(plan.render())

    def note(self, text: str) -> None:
        with self.path.open("a") as out:
            out.write(f"# [{time.strftime('%H:%M:%S')}] {text}\n")


def database_for(seed: int) -> str:
    return f"fz_{seed}_{uuid.uuid4().hex[:6]}"


def decode_workers_for(seed: int) -> int:
    """The changefeed's ``[mounter] worker-num``: the default decodes in the reader's
    thread and a changefeed may ask for worker processes, so seeds take both ways, from
    the seed alone (a plan does not change with it)."""
    return seed % 2


def sink_lanes_for(seed: int) -> int | None:
    """The sink's ``worker-count``: its default (one lane) or two, from the seed alone,
    crossed with :func:`decode_workers_for` so that every pairing comes up."""
    return None if seed // 2 % 2 == 0 else 2


def run_seed(world: World, seed: int, work_dir: Path, budget: Budget, *, replay: str) -> SeedResult:
    """Runs ``seed`` (see the module doc); ``replay`` is the command that runs it again."""
    plan = generate(
        seed,
        operations=budget.operations,
        max_faults=budget.max_faults,
        rows=budget.rows,
        readds=budget.readds,
        variety=budget.variety,
    )
    log = work_dir / f"fuzz-seed-{seed}.log"
    result = SeedResult(seed, plan, log)
    journal = _Journal(log, plan)
    started = time.monotonic()
    db = database_for(seed)
    journal.note(f"database {db}")
    cluster = Cluster(
        world.etcd.endpoint, work_dir, changefeed=f"fuzz-{seed}-{db[-6:]}", name="fuzz"
    )
    problems: list[str] = []
    try:
        for server in (world.etcd, world.source, world.sink):
            ensure_up(server)
        execute(world.source, f"CREATE DATABASE `{db}`")
        _apply(world.source, db, plan.setup)
        cluster.start(*CAPTURES)
        wait_for(cluster.owner, 20, "an owner")
        workers = decode_workers_for(seed)
        lanes = sink_lanes_for(seed)
        journal.note(f"decode workers {workers}, sink lanes {lanes or 'default (1)'}")
        cluster.create_changefeed(
            world.source,
            world.sink,
            db,
            worker_count=lanes,
            chunk_size=budget.chunk_size,
            decode_workers=workers,
        )
        after = plan.start_after_chunks
        cluster.wait(
            lambda: (progress := _snapshot(cluster))[1] > 0 and progress[0] >= after,
            120,
            f"the snapshot's chunk plan and {after} chunks done",
        )
        journal.note(f"workload starts; snapshot chunks done/total {_snapshot(cluster)}")
        _Workload(world, cluster, db, journal, budget.pause).run(plan.operations)
        journal.note(f"workload done; snapshot chunks done/total {_snapshot(cluster)}")
        problems += _settle(world, cluster, budget.settle_timeout, journal)
        if budget.corrupt:
            journal.note(corrupt_one_row(world.sink, db, plan))
        api_tables = _api_tables(cluster)
        problems += compare(world, plan, db, api_tables)
    except Exception as exc:  # every failure is reported with the seed
        problems.append(f"{type(exc).__name__}: {exc}")
        if not any(p.startswith("diff") for p in problems):
            problems += _diff_problems(world, db, "diff after the failure (rows may be in flight)")
    finally:
        result.seconds = time.monotonic() - started
        problems += _close(cluster)
    if problems:
        result.failure = failure_text(seed, replay, log, problems, cluster)
        journal.note("FAILED\n" + result.failure)
    else:
        journal.note(f"passed in {result.seconds:.1f}s")
        for server in (world.source, world.sink):
            execute(server, f"DROP DATABASE IF EXISTS `{db}`")
    return result


def failure_text(seed: int, replay: str, log: Path, problems: list[str], cluster: Any) -> str:
    lines = [
        f"fuzz seed {seed} FAILED",
        f"replay: {replay}",
        f"operations log: {log}",
        *problems,
    ]
    if cluster is not None:
        lines.append(f"cluster logs: {cluster.log_dir}")
    return "\n".join(lines)


# --- the workload ------------------------------------------------------------------------------


def _apply(server: MariaDBServer, db: str, statements: tuple[str, ...]) -> None:
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
    finally:
        conn.close()


class _Workload:
    """Applies a plan's operations in order; faults are done between transactions."""

    def __init__(
        self, world: World, cluster: Cluster, db: str, journal: _Journal, pause: float
    ) -> None:
        self.world, self.cluster, self.db = world, cluster, db
        self.journal, self.pause = journal, pause
        self.conn: pymysql.connections.Connection | None = None
        self.down: list[str] = []  # captures killed and not started again yet
        self.resume_after: int | None = None  # paused: resumed after this operation

    #: Operations applied while a PAUSE_RESUME fault holds the changefeed paused.
    PAUSED_OPERATIONS = 3

    def run(self, operations: tuple[Operation, ...]) -> None:
        try:
            for op in operations:
                if op.kind is not OpKind.TRANSACTION:
                    self.journal.note(
                        f"#{op.n:04d} {op.label}: source at {position_now(self.world.source)}, "
                        f"snapshot chunks done/total {_snapshot(self.cluster)}"
                    )
                try:
                    self.step(op)
                except pymysql.MySQLError as exc:
                    raise AssertionError(
                        f"the workload failed at #{op.n:04d} ({op.label}): {exc}"
                    ) from exc
                time.sleep(self.pause)
                if self.resume_after is not None and op.n >= self.resume_after:
                    self.resume()
            self.resume()
            self.revive()
        finally:
            self.disconnect()

    def connection(self) -> pymysql.connections.Connection:
        if self.conn is None:
            self.conn = self.world.source.connect(database=self.db, autocommit=True)
        return self.conn

    def disconnect(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(pymysql.MySQLError):
                self.conn.close()
            self.conn = None

    def step(self, op: Operation) -> None:
        if op.kind is OpKind.TRANSACTION:
            conn = self.connection()
            conn.begin()
            with conn.cursor() as cur:
                for statement in op.statements:
                    cur.execute(statement)
            conn.commit()
        elif op.kind is OpKind.DDL:
            with self.connection().cursor() as cur:
                cur.execute(op.statements[0])
        else:
            assert op.fault is not None
            self.fault(op.fault, op.n)

    def fault(self, fault: Fault, n: int = 0) -> None:
        cluster = self.cluster
        if fault is Fault.PAUSE_RESUME:
            if self.resume_after is None:
                state = cluster.pause().status.state
                self.resume_after = n + self.PAUSED_OPERATIONS
                self.journal.note(f"paused (state {state}) until after #{self.resume_after:04d}")
                if n % 2 == 0:  # half the time the changefeed stops before the writes go on
                    cluster.wait(
                        self.all_stopped, 60, "every table of the paused changefeed stopped"
                    )
                    self.journal.note("every table of the paused changefeed stopped")
            return
        if fault is Fault.REMOVE_AND_ADD_BACK:
            self.resume()  # a tables update waits for the state normal
            self.remove_and_add_back(n)
            return
        if fault is Fault.FLUSH_BINLOGS:
            with self.connection().cursor() as cur:
                cur.execute("FLUSH BINARY LOGS")
            return
        if fault is Fault.RESTART_SOURCE:
            self.disconnect()
            self.world.source.stop()
            time.sleep(1)
            start_again(self.world.source)
            self.journal.note(f"source started again at {position_now(self.world.source)}")
            return
        self.revive()  # at most one capture down at a time
        if fault in (Fault.KILL_OWNER_RESTART, Fault.KILL_OWNER_TAKEOVER):
            victim = cluster.wait(cluster.owner, 3 * TTL + 20, "an owner")
        else:
            victim = self.processor()
        cluster.kill(victim)
        self.journal.note(f"SIGKILL {victim}")
        if fault in (Fault.KILL_OWNER_RESTART, Fault.KILL_PROCESSOR_RESTART):
            cluster.restart(victim)
            self.journal.note(f"{victim} started again")
        else:
            self.down.append(victim)

    def all_stopped(self) -> bool:
        """Every table's record answers a stop (a failed one answers as it failed), but
        those of a capture killed and not started again, which answers nothing."""
        done = (TableState.STOPPED, TableState.ERROR)
        live = self.cluster.captures()
        records = self.cluster.records().values()
        return all(r.state in done or r.capture_id not in live for r in records)

    def resume(self) -> None:
        if self.resume_after is not None:
            self.resume_after = None
            self.journal.note(f"resumed (state {self.cluster.resume().status.state})")

    def remove_and_add_back(self, n: int) -> None:
        """New rules without one captured table (the ``n``-th of those the source holds,
        in name order); once it is removed (owner/removals.py), its downstream table
        dropped and the rules again: the table is added back with backfill, and a row
        its old pipeline had still on the way would land in the new table. The drop is
        the user's part: a downstream table left as it was may lag the source's DDL,
        which fails the table's snapshot closed (as at create, docs/operations.md)."""
        cluster, db = self.cluster, self.db
        captured = set(cluster.tasks())
        present = [t for t in _source_tables(self.world.source, db) if f"{db}.{t}" in captured]
        if not present:
            self.journal.note("no captured table to remove and add back")
            return
        name = present[n % len(present)]
        table = f"{db}.{name}"
        rules = [f"{db}.*"]
        for asked, expect in (([*rules, f"!{table}"], "removed"), (rules, "added")):
            # an update of a changefeed in error is refused: wait for the retry first
            cluster.wait(
                lambda: cluster.status().state is ChangefeedState.NORMAL, 180, "state normal"
            )
            result = self._update(asked, table, expect)
            assert result.error is None, result
            changed = result.removed if expect == "removed" else tuple(result.added)
            assert table in changed, (expect, table, result)
            self.journal.note(f"{table} {expect}: {result.summary()}")
            if expect == "removed":
                cluster.wait(lambda: table not in cluster.tasks(), 180, f"{table} gone")
                execute(self.world.sink, f"DROP TABLE IF EXISTS `{db}`.`{name}`")

    def _update(self, rules: list[str], table: str, expect: str) -> TablesUpdateResult:
        """The result of the update to ``rules``. A refusal that left no result of its own
        is the changefeed leaving state normal between the caller's wait and the call (a
        fault's retry, as a user would meet it): it is asked again once normal."""
        cluster = self.cluster
        for _attempt in range(5):
            before = cluster.status().last_tables_update
            try:
                cluster.update_rules(rules)
            except grpc.RpcError as exc:  # a refusal: its reason is in the result, if any
                if exc.code() is not grpc.StatusCode.FAILED_PRECONDITION:
                    raise
                if cluster.status().last_tables_update == before:
                    self.journal.note(f"update for {table} {expect} refused: {exc.details()}")
                    cluster.wait(
                        lambda: cluster.status().state is ChangefeedState.NORMAL, 180, "normal"
                    )
                    continue
            cluster.wait(lambda: cluster.status().tables_update is None, 180, f"{table} {expect}")
            result = cluster.status().last_tables_update
            assert result is not None
            return result
        raise AssertionError(f"the update for {table} {expect} was refused 5 times")

    def processor(self) -> str:
        """A live capture other than the owner, one that runs tables if there is one."""
        owner = self.cluster.owner()
        live = sorted(n for n, s in self.cluster.servers.items() if s.alive and n != owner)
        busy = {t.capture_id for t in self.cluster.tasks().values()}
        return next((n for n in live if n in busy), live[0])

    def revive(self) -> None:
        for name in self.down:
            self.cluster.restart(name)
            self.journal.note(f"{name} started again")
        self.down.clear()


# --- the verdict -------------------------------------------------------------------------------


def _snapshot(cluster: Cluster) -> tuple[int, int]:
    """(chunks done, chunks total) over the changefeed's tables; (-1, -1) when unknown."""
    try:
        tables = cluster.api_changefeed().tables
    except Exception:  # a progress note, never a verdict
        return (-1, -1)
    return (
        sum(t.snapshot.chunks_done for t in tables),
        sum(t.snapshot.chunks_total for t in tables),
    )


def _settle(world: World, cluster: Cluster, timeout: float, journal: _Journal) -> list[str]:
    """Waits for the checkpoint to pass the source's last position in state normal.

    Fails once nothing has moved for ``timeout`` seconds (the changefeed's
    checkpoint, a table's checkpoint, a snapshot chunk), or after three times
    that in all. A stall is what this looks for: on a loaded machine three
    captures starting their Spark sessions at once took 90 s before the first
    chunk, which is slow, not stuck.
    """
    target = position_now(world.source)
    journal.note(f"settle: waiting for the checkpoint to pass {target}")
    started = time.monotonic()
    moved_at, seen = started, _progress(cluster)
    what = f"the checkpoint to pass {target} in state normal"
    while True:
        status = cluster.status()
        if status.state is ChangefeedState.FAILED:
            return [f"settle: the changefeed failed: {status.error}"]
        if (
            status.state is ChangefeedState.NORMAL
            and status.checkpoint is not None
            and status.checkpoint.key() >= target.key()
        ):
            journal.note(f"settled in {time.monotonic() - started:.1f}s")
            return []
        now, progress = time.monotonic(), _progress(cluster)
        if progress is not None and progress != seen:
            moved_at, seen = now, progress
        if now - moved_at > timeout or now - started > 3 * timeout:
            stalled = f"nothing moved for {now - moved_at:.0f}s"
            return [
                f"settle: {stalled} after {now - started:.0f}s waiting for {what}\n"
                f"{cluster.describe()}"
            ]
        time.sleep(0.5)


def _progress(cluster: Cluster) -> tuple[str, tuple[tuple[str, str, int], ...]] | None:
    """What moves while the changefeed works: its checkpoint, each table's, and
    each table's snapshot chunks done; None when the servers cannot say."""
    try:
        status = cluster.status()
        tables = cluster.api_changefeed().tables
    except Exception:  # a fault may be under way; the next poll asks again
        return None
    return (
        str(status.checkpoint),
        tuple(sorted((t.table, t.checkpoint, t.snapshot.chunks_done) for t in tables)),
    )


def _api_tables(cluster: Cluster) -> list[str]:
    return sorted(t.table for t in cluster.api_changefeed().tables)


def _source_tables(server: MariaDBServer, db: str) -> list[str]:
    rows = execute(
        server,
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = "
        f"'{db}' ORDER BY TABLE_NAME",
    )
    return [r[0] for r in rows]


def compare(world: World, plan: Plan, db: str, api_tables: list[str] | None) -> list[str]:
    """What differs between the source and the downstream of ``db`` (empty when nothing):
    the source's tables against the plan's model, the changefeed's tables, and every row."""
    problems = []
    expected = sorted(plan.tables)
    on_source = _source_tables(world.source, db)
    if on_source != expected:
        problems.append(f"tables: the source holds {on_source}, the plan's model {expected}")
    if api_tables is not None and api_tables != [f"{db}.{t}" for t in on_source]:
        problems.append(f"tables: the changefeed runs {api_tables}, the source holds {on_source}")
    problems += _diff_problems(world, db, "diff")
    return problems


def _diff_problems(world: World, db: str, what: str) -> list[str]:
    try:
        report = diff(world.source, world.sink, db)
    except Exception as exc:  # reported with the seed
        return [f"{what}: the checker failed: {type(exc).__name__}: {exc}"]
    if report.equal:
        return []
    return [f"{what}: {json.dumps(report.summary())}", *describe_report(report)]


def describe_report(report: DiffReport) -> list[str]:
    """Per differing table: its status, row counts and the first differing rows."""
    lines = []
    for table in report.tables:
        if table.status is TableStatus.EQUAL:
            continue
        data = table.to_dict()
        rows = data.pop("differences", [])
        lines.append(f"  {table.table}: {json.dumps(data, default=str)}")
        lines += [f"    {json.dumps(r, default=str)}" for r in rows[:SHOWN_ROWS]]
        if len(rows) > SHOWN_ROWS:
            lines.append(f"    ... {len(rows) - SHOWN_ROWS} more rows")
    return lines


def corrupt_one_row(sink: MariaDBServer, db: str, plan: Plan) -> str:
    """Changes one downstream row behind the changefeed's back (the test's self-test):
    a value made NULL where there is one, else a deleted row."""
    for table in plan.tables:
        nullable = execute(
            sink,
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
            f"'{db}' AND TABLE_NAME = '{table}' AND IS_NULLABLE = 'YES' ORDER BY COLUMN_NAME",
        )
        for (column,) in nullable:
            where = f"`{column}` IS NOT NULL"
            rows = execute(sink, f"SELECT MIN(`id`) FROM `{db}`.`{table}` WHERE {where}")
            if rows[0][0] is not None:
                key = rows[0][0]
                execute(sink, f"UPDATE `{db}`.`{table}` SET `{column}` = NULL WHERE `id` = {key}")
                return f"corrupted the downstream: {table} id={key} {column} set to NULL"
    for table in plan.tables:
        rows = execute(sink, f"SELECT MIN(`id`) FROM `{db}`.`{table}`")
        if rows[0][0] is not None:
            execute(sink, f"DELETE FROM `{db}`.`{table}` WHERE `id` = {rows[0][0]}")
            return f"corrupted the downstream: deleted {table} id={rows[0][0]}"
    return "nothing to corrupt: every downstream table is empty"


def _close(cluster: Cluster) -> list[str]:
    try:
        cluster.close()
    except Exception as exc:  # reported with the seed
        return [f"closing the cluster: {type(exc).__name__}: {exc}"]
    return []
