"""New table rules on a running changefeed (#20 item 1), against real servers.

One `cdc-server` process; the changefeed starts with tables ``a``, ``b``, ``gone`` and
``back`` (snapshot mode initial), and a writer keeps changing ``a`` and ``b`` throughout:

    1. update: rules a, b, back, fill  ``fill`` (rows before, written during) is added with
                                       a snapshot; ``gone`` is removed: its later source
                                       writes never arrive, its downstream rows stay
       then ``back`` removed and at once added back with backfill (the second update
       waits until the first one's pipeline has stopped, owner/removals.py), written
       at the source in between: its downstream rows end as the source's
    2. update --no-backfill: + live .. ``live`` streams from the update's position: its
                                       downstream rows are exactly the rows changed after
                                       the update (inserted, updated), none of those only
                                       written before it, none deleted after it
    3. update: + a rule matching no table: nothing added or removed
    4. bad input, each one line, nothing changed: a table without a primary key (as
       at create), --no-backfill into a downstream table of other columns (the owner
       refuses it and puts the old rules back), another setting while running (pause
       first), ``gone`` added back with backfill after a column was added to it (its
       downstream table, left as it was, lacks it), an update of a changefeed in error
    5. paused: an update adds ``later`` by a ``[filter] no-backfill`` rule; after the
       resume its downstream rows are exactly those changed after the update
    6. throughout: the checkpoints of ``a`` and ``b`` never stand still for long, their
       pipelines are started once (their tasks never rewritten), and at the end
       `cdcctl diff` is equal over a, b, fill and back
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster
from cluster_harness import run_cli as cli
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState, ErrorInfo, read_tables
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

CF = "tables-update"
TIMEOUT = 180
#: The longest the checkpoint of a table under writes may stand still.
STILL_LIMIT = 6.0


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="tblupd")
    try:
        cluster.start("tu-1")
        yield cluster
    finally:
        cluster.close()


def update(
    capsys: pytest.CaptureFixture[str], server: tuple[str, str], config: Path, *more: str
) -> tuple[int, Any, str]:
    """`cdcctl -o json changefeed update --changefeed-id CF --config <config> <more>`."""
    return cli(
        capsys,
        *("-o", "json", "changefeed", "update", "--changefeed-id", CF, "--config", str(config)),
        *more,
        *server,
    )


class Writer:
    """Keeps changing tables ``a`` and ``b`` on its own connection until stopped."""

    def __init__(self, source: MariaDBServer, db: str) -> None:
        self.source, self.db = source, db
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            n = 1000
            while not self.stop.is_set():
                n += 1
                execute(
                    self.source,
                    f"INSERT INTO `{self.db}`.a VALUES ({n}, {n})",
                    f"UPDATE `{self.db}`.b SET v = v + 1 WHERE id = {n % 50}",
                    f"DELETE FROM `{self.db}`.a WHERE id = {n - 40}",
                )
                time.sleep(0.02)
        except BaseException as exc:  # reported by the test
            self.error = exc


class Watch:
    """Samples the checkpoints of the tables that stay, and their task revisions."""

    def __init__(self, cluster: Cluster, tables: list[str]) -> None:
        self.cluster, self.tables = cluster, tables
        self.stop = threading.Event()
        self.longest = dict.fromkeys(tables, 0.0)
        self.last: dict[str, tuple[Position | None, float]] = {}
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            # each table's checkpoint as query shows it: its record, or its reader's progress
            entries, now = read_tables(self.cluster.store, CF), time.monotonic()
            for table in self.tables:
                entry = entries.get(table)
                checkpoint = None if entry is None else entry.checkpoint
                seen, since = self.last.get(table, (None, now))
                if checkpoint != seen:
                    self.last[table] = (checkpoint, now)
                else:
                    self.longest[table] = max(self.longest[table], now - since)
            time.sleep(0.2)


def task_revisions(cluster: Cluster, tables: list[str]) -> dict[str, int]:
    store = cluster.store
    out = {}
    for table in tables:
        item = store.get(store.keys.task(CF, table))
        assert item is not None, table
        out[table] = item.mod_revision
    return out


def values(ids: range, value: Callable[[int], object]) -> str:
    return ", ".join(f"({i}, {value(i)})" for i in ids)


def rows(server: MariaDBServer, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in execute(server, sql)]


def write_config(
    path: Path,
    cluster: Cluster,
    rules: list[str],
    no_backfill: list[str] | None = None,
    **extra: str,
) -> Path:
    """The changefeed's config as created, with other table rules (and ``[filter]
    no-backfill`` rules, and ``extra`` keys of ``[snapshot]``)."""
    stored = cluster.feeds.get(CF).config.to_dict(mask=False)
    lines = [
        f'changefeed-id = "{CF}"',
        f'source-uri = "{stored["source-uri"]}"',
        f'sink-uri = "{stored["sink-uri"]}"',
        "[filter]",
        f"rules = {json.dumps(rules)}",
        *([f"no-backfill = {json.dumps(no_backfill)}"] if no_backfill else []),
        "[snapshot]",
        f'spark-master = "{stored["snapshot"]["spark-master"]}"',
        *(f"{key} = {value}" for key, value in extra.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tables_added_with_and_without_backfill_and_removed_while_running(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    server = ("--server", cluster.api_address())
    kept = [f"{db}.a", f"{db}.b"]
    back = f"{db}.back"
    execute(
        source_db,
        *(
            f"CREATE TABLE `{db}`.{t} (id INT PRIMARY KEY, v INT)"
            for t in ["a", "b", "gone", "back"]
        ),
        f"INSERT INTO `{db}`.back VALUES {values(range(1, 101), lambda i: i)}",
        f"CREATE TABLE `{db}`.fill (id INT PRIMARY KEY, v VARCHAR(20))",
        f"CREATE TABLE `{db}`.live (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.later (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{db}`.later VALUES {values(range(1, 21), lambda i: i)}",
        f"CREATE TABLE `{db}`.clash (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.nopk (id INT, v INT)",
        *(f"INSERT INTO `{db}`.{t} VALUES (1, 1), (2, 2)" for t in ["a", "gone"]),
        f"INSERT INTO `{db}`.b VALUES {values(range(50), lambda i: 0)}",
        f"INSERT INTO `{db}`.fill VALUES {values(range(1, 3001), lambda i: repr(f'r{i}'))}",
        f"INSERT INTO `{db}`.live VALUES {values(range(1, 101), lambda i: i)}",
    )
    execute(
        sink_db,
        f"CREATE DATABASE `{db}`",
        f"CREATE TABLE `{db}`.clash (id INT PRIMARY KEY, other DATE)",
    )
    writer = Writer(source_db, db)
    watch = Watch(cluster, kept)
    try:
        cluster.create_changefeed(source_db, sink_db, db, rules=[*kept, f"{db}.gone", f"{db}.back"])
        cluster.wait(
            lambda: cluster.status().checkpoint is not None, TIMEOUT, "the first snapshots"
        )
        revisions = task_revisions(cluster, kept)
        writer.thread.start()
        watch.thread.start()
        time.sleep(3)

        # 1. fill added with backfill (written while it is copied), gone removed
        config = write_config(tmp_path / "cf1.toml", cluster, [*kept, back, f"{db}.fill"])
        fill_writes = threading.Thread(
            target=execute,
            args=(
                source_db,
                *(f"UPDATE `{db}`.fill SET v = 'changed' WHERE id = {i * 97}" for i in range(30)),
                f"INSERT INTO `{db}`.fill VALUES (5000, 'new')",
                f"DELETE FROM `{db}`.fill WHERE id = 3",
            ),
        )
        fill_writes.start()
        code, out, err = update(capsys, server, config)
        fill_writes.join()
        assert code == 0, err
        assert out["tables_update"]["added"] == {f"{db}.fill": "backfill"}, out
        assert out["tables_update"]["removed"] == [f"{db}.gone"], out
        cluster.wait(lambda: f"{db}.gone" not in cluster.tasks(), 60, "gone's removal")
        execute(source_db, f"INSERT INTO `{db}`.gone VALUES (3, 3)", f"DELETE FROM `{db}`.gone")

        # 1b. back removed and at once added back, written at the source in between
        config = write_config(tmp_path / "cf1b.toml", cluster, [*kept, f"{db}.fill"])
        code, out, err = update(capsys, server, config)
        assert code == 0 and out["tables_update"]["removed"] == [back], (out, err)
        execute(
            source_db,
            f"DELETE FROM `{db}`.back WHERE id <= 10",
            f"UPDATE `{db}`.back SET v = -v WHERE id BETWEEN 50 AND 60",
            f"INSERT INTO `{db}`.back VALUES {values(range(200, 211), lambda i: i)}",
        )
        config = write_config(tmp_path / "cf1c.toml", cluster, [*kept, back, f"{db}.fill"])
        code, out, err = update(capsys, server, config)
        assert code == 0, err
        assert (out["tables_update"]["added"], out["tables_update"]["removed"]) == (
            {back: "backfill"},
            [],
        ), out
        execute(source_db, f"UPDATE `{db}`.back SET v = 7 WHERE id = 99")

        # 2. live added without backfill: only what changes after the update arrives
        execute(source_db, f"UPDATE `{db}`.live SET v = -1 WHERE id BETWEEN 40 AND 60")
        config = write_config(
            tmp_path / "cf2.toml", cluster, [*kept, back, f"{db}.fill", f"{db}.live"]
        )
        code, out, err = update(capsys, server, config, "--no-backfill")
        assert code == 0, err
        result = out["tables_update"]
        assert (result["added"], result["removed"]) == ({f"{db}.live": "no-backfill"}, []), out
        execute(
            source_db,
            f"INSERT INTO `{db}`.live VALUES {values(range(101, 151), lambda i: i * 10)}",
            f"UPDATE `{db}`.live SET v = v + 1000 WHERE id <= 10",
            f"DELETE FROM `{db}`.live WHERE id BETWEEN 11 AND 20",
            f"DELETE FROM `{db}`.live WHERE id BETWEEN 140 AND 145",
        )

        # 3. a rule matching no table: nothing added or removed
        tables = [*kept, back, f"{db}.fill", f"{db}.live"]
        config = write_config(tmp_path / "cf3.toml", cluster, [*tables, f"{db}.nothing_*"])
        code, out, err = update(capsys, server, config)
        assert code == 0, err
        assert (out["tables_update"]["added"], out["tables_update"]["removed"]) == ({}, [])

        # 4. bad input: one line each, nothing changed
        rules_now = cluster.feeds.get(CF).config.rules
        nopk = write_config(tmp_path / "nopk.toml", cluster, [*rules_now, f"{db}.nopk"])
        code, _, err = update(capsys, server, nopk)
        assert code == 2 and "has no primary key" in err and err.count("\n") == 1, err
        clash = write_config(tmp_path / "clash.toml", cluster, [*rules_now, f"{db}.clash"])
        code, _, err = update(capsys, server, clash, "--no-backfill")
        assert code == 2 and "cannot be written downstream" in err and "clash" in err, err
        assert err.count("\n") == 1, err
        other = write_config(
            tmp_path / "other.toml", cluster, [*rules_now, f"{db}.clash"], **{"chunk-size": "7"}
        )
        code, _, err = update(capsys, server, other)
        assert code == 2 and "pause it first" in err and "snapshot" in err, err
        # gone, removed in 1 and widened since, back with backfill: its downstream table,
        # left as it was, lacks the new column
        execute(source_db, f"ALTER TABLE `{db}`.gone ADD COLUMN w INT")
        back_gone = write_config(tmp_path / "gone.toml", cluster, [*rules_now, f"{db}.gone"])
        code, _, err = update(capsys, server, back_gone)
        assert code == 2 and "added with backfill cannot be written downstream" in err, err
        assert "missing downstream: w" in err and err.count("\n") == 1, err
        assert cluster.feeds.get(CF).config.rules == rules_now
        assert set(cluster.tasks()) == set(tables)

        # the old tables and the backfilled one catch up; live is exactly its later changes
        target = position_now(source_db)
        writer.stop.set()
        writer.thread.join()
        assert writer.error is None, writer.error
        end = position_now(source_db)

        def caught_up() -> bool:
            status = cluster.status()
            checkpoint = status.checkpoint
            return (
                status.state is ChangefeedState.NORMAL
                and checkpoint is not None
                and checkpoint.key() >= end.key()
            )

        cluster.wait(caught_up, TIMEOUT, f"the checkpoint to reach {end} (past {target})")
        watch.stop.set()
        watch.thread.join()
        with capsys.disabled():
            still = ", ".join(f"{t.split('.')[-1]} {s:.1f} s" for t, s in watch.longest.items())
            print(f"\nlongest a checkpoint stood still: {still}", file=sys.stderr)
        for table, longest in watch.longest.items():
            assert longest < STILL_LIMIT, (table, watch.longest)
        assert task_revisions(cluster, kept) == revisions
        log = Path(cluster.servers["tu-1"].log).read_text()
        for table in kept:
            starts = re.findall(rf"table {re.escape(CF)}/{re.escape(table)} started", log)
            assert len(starts) == 1, (table, starts)

        expected = rows(
            source_db,
            f"SELECT id, v FROM `{db}`.live WHERE id <= 10 OR id BETWEEN 101 AND 150 ORDER BY id",
        )
        assert len(expected) == 10 + 50 - 6
        assert rows(sink_db, f"SELECT id, v FROM `{db}`.live ORDER BY id") == expected
        assert rows(sink_db, f"SELECT id, v FROM `{db}`.gone ORDER BY id") == [(1, 1), (2, 2)]

        code, out, err = cli(
            capsys,
            *("-o", "json", "diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
            *(arg for t in (*kept, f"{db}.fill", back) for arg in ("--filter", t)),
        )
        assert code == 0 and out["equal"] is True, out

        # 6. paused: later added by a [filter] no-backfill rule, its changes from the update
        ref = ("--changefeed-id", CF, *server)
        assert cli(capsys, "-o", "json", "changefeed", "pause", *ref)[0] == 0
        execute(source_db, f"UPDATE `{db}`.later SET v = -1 WHERE id = 2")
        config = write_config(
            tmp_path / "cf6.toml", cluster, [*tables, f"{db}.later"], no_backfill=[f"{db}.l*"]
        )
        code, out, err = update(capsys, server, config)
        assert code == 0, err
        assert out["state"] == "stopped" and out["tables_update"]["added"] == {
            f"{db}.later": "no-backfill"
        }, out
        execute(
            source_db,
            f"UPDATE `{db}`.later SET v = 100 WHERE id = 1",
            f"INSERT INTO `{db}`.later VALUES {values(range(21, 31), lambda i: i)}",
        )
        assert cli(capsys, "-o", "json", "changefeed", "resume", *ref)[0] == 0
        end = position_now(source_db)
        cluster.wait(caught_up, TIMEOUT, f"the checkpoint to reach {end} after the resume")
        expected = rows(
            source_db, f"SELECT id, v FROM `{db}`.later WHERE id = 1 OR id > 20 ORDER BY id"
        )
        assert rows(sink_db, f"SELECT id, v FROM `{db}`.later ORDER BY id") == expected

        # an update of a changefeed in error is refused
        _force_error(cluster)
        code, _, err = update(capsys, server, nopk)
        assert code == 2 and "is in state error" in err and "pause it" in err, err
    finally:
        writer.stop.set()
        watch.stop.set()
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")


def _force_error(cluster: Cluster) -> None:
    """Puts the changefeed into state error, its retry far away (as after a failing table),
    with a compare-and-swap that a concurrent owner write makes us repeat."""
    key = cluster.store.keys.changefeed_status(CF)

    def put() -> bool:
        item = cluster.store.get(key)
        assert item is not None
        status = cluster.feeds.get(CF).status.changed(
            state=ChangefeedState.ERROR,
            error=ErrorInfo("injected by the test", time.time()),
            retry_at=time.time() + 600,
        )
        return cluster.store.compare_and_swap(key, status.to_dict(), item.mod_revision)

    cluster.wait(put, 30, "the status written in state error")
