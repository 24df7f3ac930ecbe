"""Startup checks: each bad source names the setting or the purged binlog and what to do."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testkit import wait_for

from cdc.binlog.puller import Puller, PullerConfig
from cdc.filter.table_filter import TableFilter
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.playground.mariadb import MariaDBServer, MariaDBSpec
from cdc.playground.ports import free_port
from cdc.source.checks import check_binlog_settings
from cdc.source.connect import connect
from cdc.source.flavor import SourceError, binlog_files, current_position, detect
from cdc.uri.mysql import parse_source_uri


@pytest.fixture
def private_source(tmp_path: Path) -> Iterator[MariaDBServer]:
    """A source of its own: these tests change global settings and purge binlogs."""
    server = MariaDBServer(
        MariaDBSpec("checks", tmp_path / "db", free_port(), 31, True), die_with_parent=True
    )
    server.start()
    yield server
    server.stop()


def first_error(server: MariaDBServer, start: Position | GtidSet) -> str:
    conn = server.connect()
    info = detect(conn)
    conn.close()
    puller = Puller(
        PullerConfig(
            source=parse_source_uri(server.uri),
            server=info,
            start=start,
            tables=TableFilter.parse(["*.*"]),
        )
    )
    with pytest.raises(SourceError) as error:
        next(puller.events())
    return str(error.value)


def execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def test_wrong_binlog_settings_are_all_named(private_source: MariaDBServer) -> None:
    conn = private_source.connect()
    start = current_position(conn, detect(conn))
    execute(
        conn,
        "SET GLOBAL binlog_format = 'STATEMENT'",
        "SET GLOBAL binlog_row_image = 'MINIMAL'",
        "SET GLOBAL binlog_row_metadata = 'MINIMAL'",
    )
    conn.close()
    message = first_error(private_source, start)
    assert "binlog_format=STATEMENT (need ROW)" in message
    assert "binlog_row_image=MINIMAL (need FULL)" in message
    assert "binlog_row_metadata=MINIMAL (need FULL)" in message
    assert "log_bin" not in message.split(".")[0]


def test_a_server_without_binlog_is_refused(sink_db: MariaDBServer) -> None:
    conn = sink_db.connect()
    info = detect(conn)
    with pytest.raises(SourceError, match="log_bin=OFF"):
        check_binlog_settings(conn)
    with pytest.raises(SourceError, match="no binary log"):
        current_position(conn, info)
    conn.close()


def test_purged_position_names_the_file_and_what_is_kept(private_source: MariaDBServer) -> None:
    conn = private_source.connect()
    info = detect(conn)
    old = current_position(conn, info)
    execute(conn, "CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY)", "FLUSH BINARY LOGS")
    execute(conn, "INSERT INTO d.t VALUES (1)", "FLUSH BINARY LOGS")
    newest = current_position(conn, info)

    def purged() -> bool:
        # MariaDB keeps a file until its binlog checkpoint passed it (crash recovery),
        # which may take a moment on a busy machine
        execute(conn, f"PURGE BINARY LOGS TO '{newest.file}'")
        return old.file not in [file for file, _ in binlog_files(conn)]

    wait_for(purged, 30, f"{old.file} to be purged")
    kept = [file for file, _ in binlog_files(conn)]
    conn.close()

    message = first_error(private_source, old)
    assert f"start position {old.file}:{old.offset} is not on the source" in message
    assert f"keeps binlog files {kept[0]} .. {kept[-1]}" in message
    assert "snapshot mode 'initial'" in message

    assert old.gtid is not None
    message = first_error(private_source, old.gtid)
    assert f"start GTID set {old.gtid} is older than the oldest binlog kept" in message


def test_position_past_the_end_of_its_file(private_source: MariaDBServer) -> None:
    conn = private_source.connect()
    end = current_position(conn, detect(conn))
    conn.close()
    message = first_error(private_source, Position(end.file, end.offset + 10_000))
    assert "is past the end of that file" in message


def test_unreachable_source_is_named_with_the_password_masked() -> None:
    uri = parse_source_uri(f"mysql://cdc:hunter2@127.0.0.1:{free_port()}/")
    with pytest.raises(SourceError) as error:
        connect(uri)
    message = str(error.value)
    assert "cannot connect to the source mysql://cdc:******@127.0.0.1" in message
    assert "hunter2" not in message
    assert "check that the server runs" in message
