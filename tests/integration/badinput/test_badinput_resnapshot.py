"""Bad input to `cdcctl changefeed snapshot` (a re-snapshot of a streaming table).

Each is refused by the server before anything is written, in one line, exit 2: a
table the changefeed does not replicate, a predicate that is not one condition over
the table's columns, a sink that cannot remove rows by range, a changefeed paused, a
table already being re-snapshotted. docs/bad-input.md lists them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from badinput_helpers import Cli, wait_running, wait_state
from testkit import execute

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
