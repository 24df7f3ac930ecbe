"""Re-snapshot of a streaming table (#20 item 2): `cdcctl changefeed snapshot`, real servers.

A changefeed streams ``t`` (even ids 2..6000) into MariaDB through a `cdc-server`
process (Spark local[1]). The downstream copy is then damaged directly: rows deleted,
rows changed, rows inserted that the source never had, each both below and above
id 3000. While a writer keeps changing the source (never the damaged rows above 3000),
`cdcctl changefeed snapshot --table db.t --where "id < 3000"` runs through the lock-free
chunk path, the binlog stream going on (its checkpoint moves meanwhile). Afterwards:

* every row below 3000 is the source's (damage repaired, concurrent writes kept);
* the damage above 3000 is untouched, and `cdcctl diff` reports exactly it: the
  predicate bounds the work;
* `cdcctl changefeed query` showed the re-snapshot's chunks and state;
* a second re-snapshot without --where repairs the rest: `cdcctl diff` is equal.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_harness import Cluster, checkpoint_reaches
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

CF = "resnap"
TIMEOUT = 300
N = 3000
#: Damaged downstream: deleted, changed, and extra (odd ids the source never had).
BELOW = {"deleted": range(100, 202, 2), "changed": range(300, 402, 2), "extra": range(501, 601, 2)}
ABOVE = {
    "deleted": range(4000, 4102, 2),
    "changed": range(4300, 4402, 2),
    "extra": range(4501, 4601, 2),
}


@pytest.fixture
def cluster(
    etcd_server: EtcdServer, tmp_path: Path, sink_db: MariaDBServer, source_database: str
) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="resnap")
    try:
        cluster.start("rs-1")
        yield cluster
    finally:
        cluster.close()
        execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = cdcctl(list(args))
    out, err = capsys.readouterr()
    try:
        return code, json.loads(out) if out.strip() else {"stderr": err}
    except json.JSONDecodeError:
        return code, {"stdout": out, "stderr": err}


class Writer(threading.Thread):
    """Updates, deletes and inserts rows below ``N`` and above 5000, never 3000..4999."""

    def __init__(self, source: MariaDBServer, table: str) -> None:
        super().__init__(daemon=True)
        self.source, self.table = source, table
        self.random = random.Random(20)
        self.halt = threading.Event()
        self.statements = 0
        self.error: BaseException | None = None
        self.next_id = 100_001

    def statement(self) -> str:
        r, t = self.random, self.table
        row = r.choice([r.randrange(2, N, 2), r.randrange(5000, 6001, 2)])
        roll = r.random()
        if roll < 0.5:
            return f"UPDATE {t} SET k = k + 1, c = 'w{r.randint(0, 999)}' WHERE id = {row}"
        if roll < 0.65:
            return f"DELETE FROM {t} WHERE id = {row}"
        if roll < 0.8:
            return f"INSERT IGNORE INTO {t} VALUES ({r.randrange(1, N, 2)}, 7, 'odd')"
        self.next_id += 1
        return f"INSERT INTO {t} VALUES ({self.next_id}, 1, 'new')"

    def run(self) -> None:
        conn = self.source.connect()
        try:
            with conn.cursor() as cur:
                while not self.halt.is_set():
                    cur.execute(self.statement())
                    conn.commit()
                    self.statements += 1
                    time.sleep(0.004)
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            conn.close()


def rows(server: MariaDBServer, table: str, where: str) -> list[tuple[Any, ...]]:
    return execute(server, f"SELECT id, k, c FROM {table} WHERE {where} ORDER BY id")


def damage(sink: MariaDBServer, table: str, plan: dict[str, range]) -> None:
    deleted, changed, extra = plan["deleted"], plan["changed"], plan["extra"]
    execute(
        sink,
        f"DELETE FROM {table} WHERE id BETWEEN {deleted.start} AND {deleted.stop - 1}",
        f"UPDATE {table} SET c = 'damaged' WHERE id BETWEEN {changed.start} AND {changed.stop - 1}",
        f"INSERT INTO {table} VALUES " + ", ".join(f"({i}, -1, 'extra')" for i in extra),
    )


def streaming(cluster: Cluster, source: MariaDBServer, table: str) -> None:
    """Waits for the table's first snapshot to end, then for the changefeed's checkpoint
    to pass the source's position after it (past every chunk's high watermark)."""

    def copied() -> bool:
        found = [t for t in cluster.api_changefeed().tables if t.table == table]
        return bool(found) and 0 < found[0].snapshot.chunks_done == found[0].snapshot.chunks_total

    cluster.wait(copied, TIMEOUT, f"the snapshot of {table}")
    checkpoint_reaches(cluster, position_now(source), TIMEOUT)


def wait_done(cluster: Cluster, table: str, request_id: str) -> list[tuple[int, int]]:
    """Waits for the request to end done; the (chunks done, chunks total) seen meanwhile."""
    seen: list[tuple[int, int]] = []

    def done() -> bool:
        (t,) = [t for t in cluster.api_changefeed().tables if t.table == table]
        seen.append((t.snapshot.chunks_done, t.snapshot.chunks_total))
        r = t.resnapshot
        assert r.id == request_id, r
        assert r.state != "failed", r.error
        return r.state == "done"

    cluster.wait(done, TIMEOUT, f"re-snapshot {request_id} to finish")
    return seen


def diff_keys(
    capsys: pytest.CaptureFixture[str], source: MariaDBServer, sink: MariaDBServer, db: str
) -> tuple[int, set[int]]:
    """`cdcctl diff` on the table: its exit code and the ids of the rows it reports."""
    code, report = cli(
        capsys,
        "diff",
        "--source-uri",
        source.uri,
        "--target-uri",
        sink.uri,
        "--filter",
        f"{db}.t",
    )
    keys: set[int] = set()
    for table in report.get("tables", []):
        for row in table.get("differences", []):
            keys.add(int(row["key"]["id"]))
    return code, keys


def test_resnapshot_with_a_predicate_repairs_only_its_rows_while_the_table_streams(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    t = f"`{db}`.t"
    execute(source_db, f"CREATE TABLE {t} (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(40))")
    values = ", ".join(f"({i}, {i % 7}, 'c{i}')" for i in range(2, 6001, 2))
    execute(source_db, f"INSERT INTO {t} VALUES {values}")
    cluster.create_changefeed(source_db, sink_db, db, chunk_size=200, spark_master="local[1]")
    streaming(cluster, source_db, f"{db}.t")
    server = ("--server", cluster.api_address())

    damage(sink_db, t, BELOW)
    damage(sink_db, t, ABOVE)
    writer = Writer(source_db, t)
    writer.start()
    try:
        time.sleep(1.0)
        before = cluster.status().checkpoint
        code, answer = cli(
            capsys,
            "changefeed",
            "snapshot",
            "-c",
            CF,
            "--table",
            f"{db}.t",
            "--where",
            f"id < {N}",
            *server,
        )
        assert code == 0, answer
        (shown,) = answer["tables"]
        asked = shown["resnapshot"]
        assert asked["where"] == f"id < {N}" and asked["state"] in ("requested", "running")
        seen = wait_done(cluster, f"{db}.t", asked["id"])
        # the stream went on while the chunks ran
        during = cluster.status().checkpoint
        assert before is not None and during is not None and during.key() > before.key()
        time.sleep(1.0)
    finally:
        writer.halt.set()
        writer.join()
    assert writer.error is None, writer.error
    assert writer.statements > 200, writer.statements
    checkpoint_reaches(cluster, position_now(source_db), TIMEOUT)
    assert cluster.status().state is ChangefeedState.NORMAL, cluster.describe()
    assert any(0 < done < total for done, total in seen) or seen[-1][0] == seen[-1][1] > 0, seen

    code, query = cli(capsys, "changefeed", "query", "-c", CF, *server)
    assert code == 0
    (table,) = [x for x in query["tables"] if x["table"] == f"{db}.t"]
    assert table["resnapshot"]["state"] == "done", table
    assert table["snapshot"]["chunks_done"] == table["snapshot"]["chunks_total"] > 1, table
    assert query["history"][-1]["op"] == "snapshot", query["history"]
    assert query["history"][-1]["detail"]["where"] == f"id < {N}"

    # below N: the source's rows exactly (damage gone, concurrent writes kept)
    assert rows(sink_db, t, f"id < {N}") == rows(source_db, t, f"id < {N}")
    # above N: the damage stays, and it is all `cdcctl diff` finds
    damaged = {*ABOVE["deleted"], *ABOVE["changed"], *ABOVE["extra"]}
    kept = {r[0]: r for r in rows(sink_db, t, f"id BETWEEN {N} AND 4999")}
    assert not set(ABOVE["deleted"]) & set(kept)
    assert all(kept[i][2] == "damaged" for i in ABOVE["changed"])
    assert all(kept[i][1:] == (-1, "extra") for i in ABOVE["extra"])
    code, keys = diff_keys(capsys, source_db, sink_db, db)
    assert code == 1 and keys == damaged, sorted(keys ^ damaged)[:20]

    # the whole table, no predicate: every difference repaired
    code, answer = cli(capsys, "changefeed", "snapshot", "-c", CF, "--table", f"{db}.t", *server)
    assert code == 0, answer
    wait_done(cluster, f"{db}.t", answer["tables"][0]["resnapshot"]["id"])
    checkpoint_reaches(cluster, position_now(source_db), TIMEOUT)
    code, keys = diff_keys(capsys, source_db, sink_db, db)
    assert code == 0 and not keys, sorted(keys)[:20]

    # a changefeed in error (retried only in an hour) takes no re-snapshot
    def in_error(old: dict[str, Any] | None) -> dict[str, Any] | None:
        assert old is not None
        error = {"message": "SinkError: test", "at": time.time(), "table": None}
        return {**old, "state": "error", "error": error, "retry_at": time.time() + 3600}

    cluster.store.update(cluster.store.keys.changefeed_status(CF), in_error)
    code, answer = cli(capsys, "changefeed", "snapshot", "-c", CF, "--table", f"{db}.t", *server)
    assert code == 2 and "is error" in answer["stderr"], answer


def test_a_resnapshot_whose_capture_dies_is_finished_when_the_table_runs_again(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SIGKILL among the chunks: the table starts again from its checkpoint (no hand-off
    gate from the request's chunk records), the request's chunks not done run, and the
    downstream ends equal while the source is written throughout."""
    db = source_database
    t = f"`{db}`.t"
    execute(source_db, f"CREATE TABLE {t} (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(40))")
    values = ", ".join(f"({i}, {i % 7}, 'c{i}')" for i in range(2, 12001, 2))
    execute(source_db, f"INSERT INTO {t} VALUES {values}")
    cluster.create_changefeed(source_db, sink_db, db, chunk_size=200, spark_master="local[1]")
    streaming(cluster, source_db, f"{db}.t")
    damage(sink_db, t, BELOW)
    damage(sink_db, t, ABOVE)
    writer = Writer(source_db, t)
    writer.start()
    try:
        code, answer = cli(
            capsys,
            "changefeed",
            "snapshot",
            "-c",
            CF,
            "--table",
            f"{db}.t",
            "--server",
            cluster.api_address(),
        )
        assert code == 0, answer
        request = answer["tables"][0]["resnapshot"]["id"]

        def among_chunks() -> bool:
            (table,) = [x for x in cluster.api_changefeed().tables if x.table == f"{db}.t"]
            return 2 <= table.snapshot.chunks_done < table.snapshot.chunks_total - 5

        cluster.wait(among_chunks, TIMEOUT, "the re-snapshot to be among its chunks")
        watch = ("changefeed", "query", "-c", CF, "--watch", "--count", "1")
        assert cdcctl([*watch, "--server", cluster.api_address()]) == 0
        shown = capsys.readouterr().out
        assert "chunks" in shown, shown  # the table's bar (its only table)
        cluster.kill("rs-1")
        cluster.wait_gone("rs-1")
        cluster.restart("rs-1")
        wait_done(cluster, f"{db}.t", request)
        time.sleep(1.0)
    finally:
        writer.halt.set()
        writer.join()
    assert writer.error is None, writer.error
    checkpoint_reaches(cluster, position_now(source_db), TIMEOUT)
    assert cluster.status().state is ChangefeedState.NORMAL, cluster.describe()
    code, keys = diff_keys(capsys, source_db, sink_db, db)
    assert code == 0 and not keys, sorted(keys)[:20]


def test_a_ddl_during_a_resnapshot_fails_it_closed_and_it_can_be_asked_again(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """ADD COLUMN among the chunks: the request ends failed naming the DDL (no chunk is
    written in the wrong shape, the changefeed stays normal and applies the DDL); asked
    again once the DDL is downstream, it runs with the new shape and the diff is equal."""
    db = source_database
    t = f"`{db}`.t"
    execute(source_db, f"CREATE TABLE {t} (id INT PRIMARY KEY, k INT NOT NULL, c VARCHAR(40))")
    values = ", ".join(f"({i}, {i % 7}, 'c{i}')" for i in range(2, 12001, 2))
    execute(source_db, f"INSERT INTO {t} VALUES {values}")
    cluster.create_changefeed(source_db, sink_db, db, chunk_size=200, spark_master="local[1]")
    streaming(cluster, source_db, f"{db}.t")
    damage(sink_db, t, ABOVE)
    server = ("--server", cluster.api_address())
    args = ("changefeed", "snapshot", "-c", CF, "--table", f"{db}.t", *server)
    code, answer = cli(capsys, *args)
    assert code == 0, answer
    first = answer["tables"][0]["resnapshot"]["id"]

    def chunks() -> tuple[int, int]:
        (table,) = [x for x in cluster.api_changefeed().tables if x.table == f"{db}.t"]
        return table.snapshot.chunks_done, table.snapshot.chunks_total

    cluster.wait(lambda: 2 <= chunks()[0] < chunks()[1] - 5, TIMEOUT, "chunks to run")
    execute(source_db, f"ALTER TABLE {t} ADD COLUMN extra INT NOT NULL DEFAULT 5")
    execute(source_db, f"UPDATE {t} SET extra = id % 11 WHERE id % 3 = 0")

    def failed() -> Any:
        (table,) = [x for x in cluster.api_changefeed().tables if x.table == f"{db}.t"]
        r = table.resnapshot
        assert r.id == first and r.state != "done", r
        return r if r.state == "failed" else None

    ended = cluster.wait(failed, TIMEOUT, "the re-snapshot to fail at the DDL")
    assert "DDL" in ended.error or "shape" in ended.error, ended.error
    checkpoint_reaches(cluster, position_now(source_db), TIMEOUT)
    assert cluster.status().state is ChangefeedState.NORMAL, cluster.describe()

    def asked_again() -> str | None:
        code, answer = cli(capsys, *args)
        assert code == 0, answer
        request = answer["tables"][0]["resnapshot"]["id"]
        try:
            wait_done(cluster, f"{db}.t", request)
        except AssertionError:  # the record's schema not yet the new one: ask again
            return None
        return request

    cluster.wait(asked_again, TIMEOUT, "a re-snapshot after the DDL")
    checkpoint_reaches(cluster, position_now(source_db), TIMEOUT)
    code, keys = diff_keys(capsys, source_db, sink_db, db)
    assert code == 0 and not keys, sorted(keys)[:20]
