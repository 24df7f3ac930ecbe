"""Bad input to `cdcctl changefeed snapshot` (a re-snapshot of a streaming table).

Each is refused by the server before anything is written, in one line, exit 2: a
table the changefeed does not replicate, a predicate that is not one condition over
the table's columns, a sink that cannot remove rows by range, a changefeed paused, a
table already being re-snapshotted, a table whose two sides rule it out (a key
column collated otherwise downstream, a downstream engine without row locks, a unique
key besides the primary key). A table changed that way after its request was accepted
fails the request with the reason, deleting nothing. docs/bad-input.md lists them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from badinput_helpers import Cli, wait_running, wait_state
from testkit import execute, wait_for

from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never", "--spark-master", "local[1]")


@pytest.fixture
def table(source_db: MariaDBServer, sink_db: MariaDBServer, db: str) -> str:
    """``a`` with a few rows on both sides; its name as cdcctl takes it."""
    for server in (source_db, sink_db):
        execute(server, f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v VARCHAR(20))")
        execute(server, f"INSERT INTO `{db}`.a VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    return f"{db}.a"


def snapshot(cli: Cli, cid: str, table: str, *more: str) -> tuple[int, str]:
    result = cli("changefeed", "snapshot", "-c", cid, "--table", table, *more)
    return result.code, result.err.strip()


def one_line(err: str) -> str:
    assert err.count("\n") == 0, err
    return err


def test_a_table_the_changefeed_does_not_replicate(
    cli: Cli, source_uri: str, sink_uri: str, table: str, db: str
) -> None:
    assert cli.create("rs1", source_uri, sink_uri, "--filter-rule", table, *NEVER).code == 0
    wait_running(cli, "rs1", 1)
    code, err = snapshot(cli, "rs1", f"{db}.nope")
    assert code == 2 and "does not replicate" in one_line(err) and table in err, err
    code, err = snapshot(cli, "rs1", "no-dot")
    assert code == 2 and "table:" in one_line(err), err
    code, err = snapshot(cli, "nope", table)
    assert code == 2 and "nope" in one_line(err), err


@pytest.mark.parametrize(
    ("where", "says"),
    [
        ("id <", "is not valid SQL"),
        ("id < 2; DROP TABLE a", "more than one statement"),
        ("id < 2;", "more than one statement"),
        ("id IN (SELECT id FROM mysql.user)", "subquery"),
        ("b.id = 1", "qualified column"),
        ("nope = 1", "unknown column 'nope'"),
        ("id + 1", "not a condition"),
        ("SLEEP(3) = 0", "unsupported function SLEEP"),
    ],
)
def test_a_predicate_that_is_not_one_condition_over_the_table(
    cli: Cli, source_uri: str, sink_uri: str, table: str, where: str, says: str
) -> None:
    assert cli.create("rs2", source_uri, sink_uri, "--filter-rule", table, *NEVER).code == 0
    wait_running(cli, "rs2", 1)
    code, err = snapshot(cli, "rs2", table, "--where", where)
    assert code == 2 and "where:" in one_line(err) and says in err, err
    assert cli.query("rs2")["tables"][0]["resnapshot"] is None


def test_a_sink_that_cannot_remove_rows_by_range(
    cli: Cli, source_uri: str, table: str, tmp_path: Path
) -> None:
    sink = f"file://{tmp_path}/out"
    assert cli.create("rs3", source_uri, sink, "--filter-rule", table, *NEVER).code == 0
    wait_running(cli, "rs3", 1)
    code, err = snapshot(cli, "rs3", table)
    assert code == 2 and "only a MySQL/MariaDB sink" in one_line(err), err


def test_a_paused_changefeed(cli: Cli, source_uri: str, sink_uri: str, table: str) -> None:
    assert cli.create("rs4", source_uri, sink_uri, "--filter-rule", table, *NEVER).code == 0
    wait_running(cli, "rs4", 1)
    assert cli("changefeed", "pause", "-c", "rs4").code == 0
    wait_state(cli, "rs4", "stopped")
    code, err = snapshot(cli, "rs4", table)
    assert code == 2 and "is stopped" in one_line(err) and "resume it first" in err, err


def test_a_table_already_being_re_snapshotted(
    cli: Cli, source_uri: str, sink_uri: str, table: str
) -> None:
    assert cli.create("rs5", source_uri, sink_uri, "--filter-rule", table, *NEVER).code == 0
    wait_running(cli, "rs5", 1)
    first = cli("changefeed", "snapshot", "-c", "rs5", "--table", table, "--where", "id > 1")
    assert first.code == 0, first.err
    code, err = snapshot(cli, "rs5", table)
    assert code == 2 and "already being re-snapshotted" in one_line(err), err


@pytest.mark.parametrize(
    ("source_columns", "sink_columns", "sink_options", "says"),
    [
        (
            "k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT",
            "k VARCHAR(10) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT",
            "",
            "utf8mb4_bin on the source but utf8mb4 / utf8mb4_general_ci downstream",
        ),
        (
            "k VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_bin PRIMARY KEY, v INT",
            "k VARCHAR(10) COLLATE utf8mb4_bin PRIMARY KEY, v INT",
            "",
            "latin1 / latin1_bin on the source",
        ),
        (
            "k INT PRIMARY KEY, v INT",
            "k INT PRIMARY KEY, v INT",
            "ENGINE=MyISAM",
            "uses the MyISAM engine: a re-snapshot needs InnoDB",
        ),
        ("k INT PRIMARY KEY, v INT", "k INT PRIMARY KEY, v INT", "ENGINE=Aria", "the Aria engine"),
        (
            "k INT PRIMARY KEY, email VARCHAR(20) UNIQUE",
            "k INT PRIMARY KEY, email VARCHAR(20) UNIQUE",
            "",
            "has a unique key besides its row key (k) on the source: email (email)",
        ),
        (
            "k INT PRIMARY KEY, email VARCHAR(20)",
            "k INT PRIMARY KEY, email VARCHAR(20), UNIQUE KEY em (email)",
            "",
            "has a unique key besides its row key (k) on the downstream: em (email)",
        ),
    ],
    ids=["collation", "charset", "myisam", "aria", "unique-source", "unique-downstream"],
)
def test_a_table_whose_two_sides_rule_a_re_snapshot_out(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
    source_columns: str,
    sink_columns: str,
    sink_options: str,
    says: str,
) -> None:
    execute(source_db, f"CREATE TABLE `{db}`.b ({source_columns})")
    execute(sink_db, f"CREATE TABLE `{db}`.b ({sink_columns}) {sink_options}")
    assert cli.create("rs6", source_uri, sink_uri, "--filter-rule", f"{db}.b", *NEVER).code == 0
    wait_running(cli, "rs6", 1)
    code, err = snapshot(cli, "rs6", f"{db}.b")
    assert code == 2 and says in one_line(err), err
    code, err = snapshot(cli, "rs6", f"{db}.b", "--where", "k < 10")
    assert code == 2 and says in one_line(err), err
    assert cli.query("rs6")["tables"][0]["resnapshot"] is None


def test_a_table_changed_after_the_request_fails_it_and_nothing_is_deleted(
    cli: Cli, source_uri: str, sink_uri: str, sink_db: MariaDBServer, table: str
) -> None:
    """Accepted while the downstream table is InnoDB, then made MyISAM before its chunk
    runs (a Spark job takes seconds to start): the capture's check at planning, or the
    chunk's own under its locks, fails the request with the reason; the extra row and
    the damaged one are left as they are."""
    assert cli.create("rs7", source_uri, sink_uri, "--filter-rule", table, *NEVER).code == 0
    wait_running(cli, "rs7", 1)
    execute(
        sink_db,
        f"INSERT INTO {table} VALUES (9, 'extra')",
        f"UPDATE {table} SET v = 'damaged' WHERE id = 2",
    )
    asked = cli("changefeed", "snapshot", "-c", "rs7", "--table", table)
    assert asked.code == 0, asked.err
    execute(sink_db, f"ALTER TABLE {table} ENGINE=MyISAM")

    def ended() -> dict[str, Any] | None:
        shown = cli.query("rs7")["tables"][0]["resnapshot"]
        return shown if shown and shown["state"] in ("done", "failed") else None

    shown = wait_for(ended, 180, "the re-snapshot to end", every=0.5)
    assert shown["state"] == "failed", shown
    assert "uses the MyISAM engine: a re-snapshot needs InnoDB" in shown["error"], shown
    rows = dict(execute(sink_db, f"SELECT id, v FROM {table}"))
    assert rows == {1: "x", 2: "damaged", 3: "z", 9: "extra"}
