"""Error classification of the MySQL sink (cdc.sink.mysql.errors): retry, skip or fail."""

from __future__ import annotations

import pymysql
import pytest

from cdc.model import DdlKind
from cdc.sink.mysql.errors import (
    describe_error,
    error_code,
    is_ddl_already_applied,
    is_transient,
    redact_statement,
)
from cdc.source.flavor import SourceError


def server_error(code: int, message: str = "boom") -> pymysql.err.MySQLError:
    cls = (
        pymysql.err.OperationalError
        if code in (1205, 1213, 2006, 2013)
        else (pymysql.err.ProgrammingError)
    )
    return cls(code, message)


@pytest.mark.parametrize("code", [2003, 2006, 2013, 1213, 1205, 1053, 1927, 1040])
def test_lost_connections_deadlocks_and_lock_waits_are_retried(code: int) -> None:
    assert is_transient(server_error(code))


@pytest.mark.parametrize("code", [1146, 1054, 1406, 1366, 1264, 1062, 1064, 1045, 1142])
def test_schema_data_and_permission_errors_are_permanent(code: int) -> None:
    assert not is_transient(server_error(code))


def test_connect_errors_are_judged_by_their_cause() -> None:
    unreachable = SourceError("cannot connect to the sink")
    unreachable.__cause__ = pymysql.err.OperationalError(2003, "Can't connect")
    denied = SourceError("cannot connect to the sink")
    denied.__cause__ = pymysql.err.OperationalError(1045, "Access denied")
    assert is_transient(unreachable) and error_code(unreachable) == 2003
    assert not is_transient(denied)
    assert is_transient(pymysql.err.InterfaceError(0, ""))
    assert is_transient(pymysql.err.InternalError("Packet sequence number wrong - got 1"))
    assert not is_transient(ValueError("a bug"))


@pytest.mark.parametrize(
    ("code", "kind", "skipped"),
    [
        (1050, DdlKind.CREATE_TABLE, True),
        (1051, DdlKind.DROP_TABLE, True),
        (1060, DdlKind.ADD_COLUMN, True),
        (1061, DdlKind.ADD_INDEX, True),
        (1091, DdlKind.DROP_COLUMN, True),
        (1007, DdlKind.CREATE_SCHEMA, True),
        (1008, DdlKind.DROP_SCHEMA, True),
        (4092, DdlKind.DROP_VIEW, True),
        (1146, DdlKind.RENAME_TABLE, True),
        (1146, DdlKind.ADD_COLUMN, False),  # ALTER of a missing table: the downstream is wrong
        (1054, DdlKind.RENAME_COLUMN, True),
        (1054, DdlKind.ADD_INDEX, False),
        (1064, DdlKind.CREATE_TABLE, False),
        (1213, DdlKind.CREATE_TABLE, False),
    ],
)
def test_only_errors_a_replay_explains_are_skipped(code: int, kind: DdlKind, skipped: bool) -> None:
    assert is_ddl_already_applied(server_error(code), kind) is skipped


def test_descriptions_are_truncated_and_masked() -> None:
    text = describe_error(pymysql.err.ProgrammingError(1146, "Table 'a.b' doesn't exist"))
    assert text == "Table 'a.b' doesn't exist (MySQL error 1146)"
    long = describe_error(pymysql.err.DataError(1406, "x" * 1000))
    assert len(long) < 340 and long.endswith("... (MySQL error 1406)")
    leaked = describe_error(RuntimeError("cannot reach mysql://root:hunter2@db:3306/"))
    assert "hunter2" not in leaked


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE USER 'u'@'%' IDENTIFIED BY 'hunter2'",
        "ALTER USER u IDENTIFIED VIA mysql_native_password USING PASSWORD('hunter2')",
        "SET PASSWORD FOR u = PASSWORD('hunter2')",
        "GRANT ALL ON *.* TO u IDENTIFIED BY 'hunter2'",
    ],
)
def test_ddl_statements_in_errors_never_show_passwords(statement: str) -> None:
    redacted = redact_statement(statement)
    assert "hunter2" not in redacted and "******" in redacted


def test_long_ddl_statements_are_cut() -> None:
    statement = "CREATE TABLE t (" + ", ".join(f"c{i} int" for i in range(500)) + ")"
    redacted = redact_statement(statement)
    assert len(redacted) == 500 and redacted.endswith("...")
