"""Bad input meeting a running changefeed (issue #9): what `cdcctl changefeed query` shows.

Every changefeed here streams the binlog (snapshot mode never) from a real
source into a real downstream MariaDB through a real cdc-server. Rows written
before the bad event must be downstream (checksums), and where the product
carries on, the other tables keep replicating. docs/bad-input.md lists the cases.
"""

from __future__ import annotations

import pytest
from badinput_helpers import (
    Cli,
    checksum,
    purge_binlogs_before_newest,
    same_rows,
    wait_running,
    wait_state,
    wait_synced,
)
from testkit import execute, wait_for

from cdc.playground.mariadb import MariaDBServer

pytestmark = pytest.mark.integration

NEVER = ("--snapshot-mode", "never")
MIB = 1024 * 1024


@pytest.fixture
def two_tables(source_db: MariaDBServer, sink_db: MariaDBServer, db: str) -> str:
    """``a`` and ``b`` on the source and the downstream, two rows each; the filter rule."""
    for server in (source_db, sink_db):
        execute(
            server,
            f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v VARCHAR(20))",
            f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, data LONGBLOB)",
        )
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (1, 'x'), (2, 'y')")
    execute(source_db, f"INSERT INTO `{db}`.b VALUES (1, 'p'), (2, 'q')")
    execute(sink_db, f"INSERT INTO `{db}`.a VALUES (1, 'x'), (2, 'y')")
    execute(sink_db, f"INSERT INTO `{db}`.b VALUES (1, 'p'), (2, 'q')")
    return f"{db}.*"


def start(cli: Cli, cid: str, source_uri: str, sink_uri: str, rules: str, tables: int) -> None:
    """Creates changefeed ``cid`` (rules separated by spaces) and waits for its tables."""
    flags = [f for rule in rules.split() for f in ("--filter-rule", rule)]
    assert cli.create(cid, source_uri, sink_uri, *flags, *NEVER).code == 0
    wait_running(cli, cid, tables)


def wait_tables_stopped(cli: Cli, cid: str) -> None:
    """Waits until every table of a paused changefeed reported its final checkpoint."""
    wait_for(
        lambda: all(t["state"] == "stopped" for t in cli.query(cid)["tables"]),
        30,
        f"the tables of {cid} to stop",
    )


def no_traceback(text: str | None) -> str:
    assert text and "Traceback" not in text and "\n" not in text, text
    return text


def test_unsupported_ddl_is_skipped_and_shown(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    start(cli, "ddl", source_uri, sink_uri, two_tables, 2)
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (3, 'before')")
    execute(source_db, f"CREATE VIEW `{db}`.v AS SELECT id FROM `{db}`.a")
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (4, 'after')", f"DELETE FROM `{db}`.b")
    wait_synced(source_db, sink_db, db, "a", "b")
    data = cli.query("ddl")
    assert data["state"] == "normal" and data["error"] is None
    assert [t["state"] for t in data["tables"]] == ["running", "running"]
    [skipped] = data["skipped_ddl"]
    assert skipped["kind"] == "create view" and f"`{db}`.`v`" in skipped["statement"]
    assert "kind 'create view' is not supported by the sink" in skipped["reason"]
    assert "add 'create view' to the changefeed's supported-ddl list" in skipped["reason"]
    assert execute(sink_db, f"SHOW FULL TABLES IN `{db}` WHERE Table_type = 'VIEW'") == []


def test_table_dropped_while_running(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    start(cli, "drop", source_uri, sink_uri, two_tables, 2)
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (3, 'last')")
    wait_synced(source_db, sink_db, db, "a")
    execute(source_db, f"DROP TABLE `{db}`.a", f"INSERT INTO `{db}`.b VALUES (3, 'after')")
    wait_synced(source_db, sink_db, db, "b")
    data = cli.query("drop")
    assert data["state"] == "normal" and data["error"] is None
    assert [(t["table"], t["state"]) for t in data["tables"]] == [(f"{db}.b", "running")]
    # The drop is replicated like any other change: the downstream follows the source.
    assert checksum(sink_db, db, "a") == (-1, -1)
    execute(source_db, f"UPDATE `{db}`.b SET data = 'later'")
    wait_synced(source_db, sink_db, db, "b")


def test_row_larger_than_16_mib(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    # One binlog event and one statement larger than a 16 MiB protocol packet: both
    # servers must allow it (the fixtures start them with max_allowed_packet=64M).
    for server in (source_db, sink_db):
        assert execute(server, "SELECT @@GLOBAL.max_allowed_packet")[0][0] >= 40 * MIB
    start(cli, "big", source_uri, sink_uri, two_tables, 2)
    execute(
        source_db,
        f"INSERT INTO `{db}`.b VALUES (3, REPEAT('z', {17 * MIB}))",
        f"INSERT INTO `{db}`.a VALUES (3, 'next')",
        f"UPDATE `{db}`.b SET data = CONCAT(data, REPEAT('y', {MIB})) WHERE id = 3",
    )
    wait_synced(source_db, sink_db, db, "a", "b")
    assert execute(sink_db, f"SELECT LENGTH(data) FROM `{db}`.b WHERE id = 3") == [(18 * MIB,)]
    assert cli.query("big")["state"] == "normal"


def test_rows_logged_as_statements(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    execute(source_db, f"CREATE TABLE `{db}`.other (id INT PRIMARY KEY)")
    start(cli, "stmt", source_uri, sink_uri, f"{db}.a {db}.b", 2)
    # Statements on a table the changefeed does not capture are none of its business.
    execute(
        source_db,
        "SET SESSION binlog_format = 'STATEMENT'",
        f"INSERT INTO `{db}`.other VALUES (1)",
    )
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (3, 'row event')")
    wait_synced(source_db, sink_db, db, "a", "b")
    assert cli.query("stmt")["state"] == "normal"
    kept = checksum(source_db, db, "a")
    execute(
        source_db,
        "SET SESSION binlog_format = 'STATEMENT'",
        f"INSERT INTO `{db}`.a VALUES (4, 'statement')",
    )
    data = wait_state(cli, "stmt", "failed")
    error = no_traceback(data["error"])
    assert f"INSERT on {db}.a" in error and "written to the binlog as an SQL statement" in error
    assert "binlog_format=STATEMENT or MIXED" in error
    assert "Set binlog_format=ROW for every session" in error
    assert "snapshot mode 'initial'" in error
    assert "'statement'" not in error  # the statement's values stay out of the status
    assert checksum(sink_db, db, "a") == kept


def test_purged_checkpoint_on_resume(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    start(cli, "purge", source_uri, sink_uri, two_tables, 2)
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (3, 'kept')")
    wait_synced(source_db, sink_db, db, "a", "b")
    kept = checksum(sink_db, db, "a")
    assert cli("changefeed", "pause", "-c", "purge").code == 0
    wait_tables_stopped(cli, "purge")
    execute(source_db, f"INSERT INTO `{db}`.a VALUES (4, 'purged')")
    newest = purge_binlogs_before_newest(source_db)
    assert cli("changefeed", "resume", "-c", "purge").code == 0
    data = wait_state(cli, "purge", "failed")
    error = no_traceback(data["error"])
    assert "is not on the source" in error and f"it keeps binlog files {newest}" in error
    assert "start a new changefeed with snapshot mode 'initial'" in error
    assert checksum(sink_db, db, "a") == kept


def test_unsupported_column_type_added_while_running(
    cli: Cli,
    source_uri: str,
    sink_uri: str,
    two_tables: str,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    db: str,
) -> None:
    start(cli, "type", source_uri, sink_uri, two_tables, 2)
    execute(source_db, f"INSERT INTO `{db}`.b VALUES (3, 'before')")
    wait_synced(source_db, sink_db, db, "a", "b")
    kept = checksum(sink_db, db, "b")
    execute(
        source_db,
        f"ALTER TABLE `{db}`.b ADD COLUMN ip INET6",
        f"INSERT INTO `{db}`.b VALUES (4, 'after', '::1')",
    )
    data = wait_state(cli, "type", "failed")
    error = no_traceback(data["error"])
    assert "column 'ip': type 'inet6' is not supported" in error
    assert "Change the column to a supported type on the source" in error
    [table] = [t for t in data["tables"] if t["table"] == f"{db}.b"]
    assert table["state"] == "error" and table["error"] == error
    assert checksum(sink_db, db, "b")[0] == kept[0]
    assert same_rows(source_db, sink_db, db, "a")
