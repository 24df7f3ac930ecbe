"""DDL operations (#20 item 3): a DDL the downstream refuses is skipped, another replaced.

The downstream table is partitioned by its key (a downstream-only choice the data
never sees), so a UNIQUE key without the partition column is refused there (MariaDB
error 1503) while the source takes it:

    1. ADD UNIQUE KEY uk_v (v) ............. refused: the changefeed stops in state error,
                                             the error naming the DDL's position;
                                             `cdcctl changefeed ddl skip` at it: harmless
                                             (an index the rows never needed downstream)
    2. ADD COLUMN code, ADD UNIQUE KEY ..... refused: `ddl replace` with SQL refused too stops
                                             it at the same DDL again; `ddl replace` with
                                             the column alone, which the rows written after
                                             it need
    3. writes continue under both; `cdcctl diff` equal; `cdcctl changefeed query` shows
       both decisions in the history with who (role, OS user, address) and what

Wrong decisions are refused with one line and change nothing: a position that is not
the failing DDL's, an empty --sql, an unknown changefeed, a changefeed not stopped at a
DDL. One `cdc-server` process; snapshot mode never.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterator
from pathlib import Path

import pytest
from cluster_harness import Cluster
from cluster_harness import run_cli as cli
from testkit import execute, position_now

from cdc.changefeed import ChangefeedState
from cdc.changefeed.history import history_of
from cdc.cli.main import main as cdcctl
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

CF = "ddl-ops"
TIMEOUT = 120


@pytest.fixture
def cluster(etcd_server: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(etcd_server.endpoint, tmp_path, changefeed=CF, name="ddlops")
    try:
        cluster.start("ddl-1")
        yield cluster
    finally:
        cluster.close()


def caught_up(cluster: Cluster, source: MariaDBServer) -> None:
    target = position_now(source)

    def reached() -> bool:
        status = cluster.status()
        checkpoint = status.checkpoint
        return (
            status.state is ChangefeedState.NORMAL
            and status.ddl_decision is None
            and checkpoint is not None
            and checkpoint.key() >= target.key()
        )

    cluster.wait(reached, TIMEOUT, f"the checkpoint to reach {target}")


def stopped_at_ddl(cluster: Cluster, after: str | None) -> str:
    """Waits for the changefeed to stop at a refused DDL other than ``after``; its position."""

    def stopped() -> str | None:
        status = cluster.status()
        error = status.error
        if error is None or error.ddl is None or str(error.ddl.position) == after:
            return None
        assert status.state in (
            ChangefeedState.ERROR,
            ChangefeedState.FAILED,
            ChangefeedState.NORMAL,
        )
        return str(error.ddl.position)

    return str(cluster.wait(stopped, TIMEOUT, "the changefeed to stop at a refused DDL"))


def test_a_refused_ddl_skipped_and_another_replaced(
    cluster: Cluster,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = source_database
    server = ("--server", cluster.api_address())
    execute(source_db, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    execute(
        sink_db,
        f"CREATE DATABASE `{db}`",
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT) PARTITION BY HASH (id) PARTITIONS 2",
    )
    try:
        code, _, err = cli(
            capsys,
            *("changefeed", "create", *server, "--changefeed-id", CF),
            *("--source-uri", source_db.uri_by_reference(tmp_path, "source")),
            *("--sink-uri", sink_db.uri_by_reference(tmp_path, "sink") + "&worker-count=2"),
            *("--filter-rule", f"{db}.*", "--snapshot-mode", "never"),
        )
        assert code == 0, err
        # mode never starts where the owner first reads the binlog: write after that
        cluster.wait(lambda: cluster.status().checkpoint is not None, 60, "a start position")
        execute(source_db, *(f"INSERT INTO `{db}`.t VALUES ({i}, {i})" for i in range(1, 21)))
        caught_up(cluster, source_db)
        code, _, err = cli(
            capsys,
            "changefeed",
            "ddl",
            "skip",
            "-c",
            CF,
            *server,
            "--position",
            str(cluster.status().checkpoint),
        )
        assert code == 2 and "has no error" in err, err

        # 1. refused, skipped
        execute(
            source_db,
            f"ALTER TABLE `{db}`.t ADD UNIQUE KEY uk_v (v)",
            *(f"INSERT INTO `{db}`.t VALUES ({i}, {i})" for i in range(21, 41)),
        )
        first = stopped_at_ddl(cluster, None)
        status = cluster.status()
        assert status.error is not None and first in status.error.message
        assert "uk_v" in (status.error.ddl.statement if status.error.ddl else "")
        code, shown, _ = cli(capsys, "changefeed", "query", "-c", CF, *server)
        assert code == 0 and shown["failed_ddl"]["position"] == first, shown

        # wrong decisions change nothing
        code, _, err = cli(
            capsys,
            "changefeed",
            "ddl",
            "skip",
            "-c",
            CF,
            *server,
            "--position",
            f"{first.split(':')[0]}:4",
        )
        assert code == 2 and f"stopped at the DDL at {first}" in err, err
        assert len(err.strip().splitlines()) == 1, err
        code, _, err = cli(
            capsys,
            "changefeed",
            "ddl",
            "replace",
            "-c",
            CF,
            *server,
            "--position",
            first,
            "--sql",
            " ; ",
        )
        assert code == 2 and "--sql" in err and "empty" in err, err
        code, _, err = cli(
            capsys, "changefeed", "ddl", "skip", "-c", "no-such-cf", *server, "--position", first
        )
        assert code == 2 and "NOT_FOUND" in err, err
        assert cluster.status().ddl_decision is None
        assert cluster.status().error is not None

        code, reply, err = cli(
            capsys, "changefeed", "ddl", "skip", "-c", CF, *server, "--position", first
        )
        assert code == 0, err
        assert reply["ddl_decision"] == {"position": first, "action": "skip", "sql": None}
        caught_up(cluster, source_db)
        (create,) = execute(sink_db, f"SHOW CREATE TABLE `{db}`.t")
        assert "uk_v" not in create[1], create[1]
        assert execute(sink_db, f"SELECT COUNT(*) FROM `{db}`.t") == [(40,)]
        skipped = cluster.status().skipped_ddl
        assert skipped and str(skipped[-1].position) == first
        assert "by an operator" in skipped[-1].reason

        # 2. refused, replaced; the rows after it need the column
        execute(
            source_db,
            f"ALTER TABLE `{db}`.t ADD COLUMN code INT NULL, ADD UNIQUE KEY uk_code (code)",
            f"UPDATE `{db}`.t SET code = id * 10 WHERE id % 2 = 0",
            *(f"INSERT INTO `{db}`.t VALUES ({i}, {i}, {i * 10})" for i in range(41, 61)),
        )
        second = stopped_at_ddl(cluster, first)
        code, _, err = cli(
            capsys,
            "changefeed",
            "ddl",
            "replace",
            "-c",
            CF,
            *server,
            "--position",
            first,
            "--sql",
            "ALTER TABLE t ADD COLUMN code INT NULL",
        )
        assert code == 2 and f"stopped at the DDL at {second}" in err, err
        # a replacement the downstream refuses too stops at the same DDL again
        code, _, err = cli(
            capsys,
            *("changefeed", "ddl", "replace", "-c", CF, *server, "--position", second),
            *("--sql", "ALTER TABLE t ADD COLUMN code INT NULL, ADD UNIQUE KEY uk_code (code)"),
        )
        assert code == 0, err

        def refused_again() -> bool:
            error = cluster.status().error
            return error is not None and error.ddl is not None and str(error.ddl.position) == second

        cluster.wait(refused_again, TIMEOUT, "the refused replacement to stop the changefeed")
        code, reply, err = cli(
            capsys,
            "changefeed",
            "ddl",
            "replace",
            "-c",
            CF,
            *server,
            "--position",
            second,
            "--sql",
            "ALTER TABLE t ADD COLUMN code INT NULL;",
        )
        assert code == 0, err
        assert reply["ddl_decision"]["sql"] == "ALTER TABLE t ADD COLUMN code INT NULL"

        # 3. writes continue under both
        execute(
            source_db,
            f"UPDATE `{db}`.t SET code = id * 10 + 1 WHERE id % 2 = 1",
            f"DELETE FROM `{db}`.t WHERE id % 7 = 0",
        )
        caught_up(cluster, source_db)
        code, report, err = cli(
            capsys,
            *("diff", "--source-uri", source_db.uri, "--target-uri", sink_db.uri),
            *("--filter", f"{db}.*"),
        )
        assert code == 0 and report["equal"] is True, (report, err)

        code, _, err = cli(capsys, "changefeed", "pause", "-c", CF, *server)
        assert code == 0, err
        code, _, err = cli(capsys, "changefeed", "resume", "-c", CF, *server)
        assert code == 0, err
        code, shown, _ = cli(capsys, "changefeed", "query", "-c", CF, *server)
        history = shown["history"]
        assert [h["op"] for h in history] == [
            "create",
            "ddl skip",
            "ddl replace",
            "ddl replace",
            "pause",
            "resume",
        ]
        skip, replace = history[1], history[3]
        assert skip["detail"]["position"] == first and "uk_v" in skip["detail"]["statement"]
        assert replace["detail"]["sql"] == "ALTER TABLE t ADD COLUMN code INT NULL"
        for entry in history:
            assert entry["user"] == getpass.getuser() and entry["role"] == "open", entry
            assert entry["peer"] and entry["at"].endswith("Z"), entry
        code = cdcctl(["-o", "table", "changefeed", "query", "-c", CF, *server])
        table = capsys.readouterr().out
        assert code == 0 and "ddl replace" in table and "ddl skip" in table, table

        code, _, err = cli(capsys, "changefeed", "remove", "-c", CF, *server)
        assert code == 0, err
        ops = [e.op for e in history_of(cluster.store, CF)]
        assert ops[-1] == "remove" and ops[:4] == [
            "create",
            "ddl skip",
            "ddl replace",
            "ddl replace",
        ]
    finally:
        execute(sink_db, f"DROP DATABASE IF EXISTS `{db}`")
