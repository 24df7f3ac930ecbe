"""Row changes logged as SQL statements on a real MariaDB: refused on captured tables, whatever
their form or the session's default schema; let through on tables the changefeed does not capture.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc.binlog.decode_pool import DecodePool
from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.filter.table_filter import TableFilter
from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.source.checks import ChangesUnavailable
from cdc.source.flavor import ServerInfo, current_position
from cdc.uri.mysql import parse_source_uri

pytestmark = pytest.mark.integration

Event = RowChange | DdlEvent | Resolved
SECRET = "s3cret-value"


@pytest.fixture
def other(conn: Any, source_database: str) -> Iterator[str]:
    """A second database, never captured: the default schema of some sessions."""
    name = f"other_{source_database[-8:]}"
    execute(conn, f"CREATE DATABASE `{name}`")
    yield name
    execute(conn, f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def tables(conn: Any, source_database: str, other: str) -> str:
    """Captured: db.t (InnoDB), db.tm (MyISAM). Not captured: db.hb, other.src."""
    db = source_database
    execute(
        conn,
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(40))",
        f"CREATE TABLE `{db}`.tm (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=MyISAM",
        f"CREATE TABLE `{db}`.hb (id INT PRIMARY KEY, v VARCHAR(40))",
        f"CREATE TABLE `{other}`.src (id INT PRIMARY KEY, v VARCHAR(40))",
        f"INSERT INTO `{other}`.src VALUES (1, '{SECRET}'), (2, '{SECRET}')",
        f"INSERT INTO `{db}`.t VALUES (1, 'one'), (2, 'two')",
        f"INSERT INTO `{db}`.hb VALUES (1, 'one')",
    )
    return db


def execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def make_puller(
    source_db: MariaDBServer,
    info: ServerInfo,
    start: Position,
    db: str,
    decode: DecodePool | None = None,
) -> Puller:
    return Puller(
        PullerConfig(
            source=parse_source_uri(source_db.uri),
            server=info,
            start=start,
            tables=TableFilter.parse([f"{db}.t", f"{db}.tm"]),
            heartbeat_interval=0.5,
            decode=decode,
        )
    )


def pull(puller: Puller, until: Position, out: list[Event], timeout: float = 30) -> None:
    """Appends events to `out` until the resolved position reaches `until`."""
    deadline = time.monotonic() + timeout
    try:
        for event in puller.events():
            out.append(event)
            if isinstance(event, Resolved) and event.position.key() >= until.key():
                return
            if time.monotonic() > deadline:
                pytest.fail(f"no event reached {until} within {timeout}s; last {event}")
    finally:
        puller.close()
    pytest.fail("the puller stopped before reaching the end")


def statement_session(source_db: MariaDBServer, fmt: str, schema: str | None) -> Any:
    """A session that logs its writes as `fmt` (STATEMENT or MIXED), default schema `schema`."""
    connection = source_db.connect(local_infile=True, **({"database": schema} if schema else {}))
    execute(connection, f"SET SESSION binlog_format = '{fmt}'")
    return connection


def keys(events: list[Event]) -> list[tuple[str, tuple]]:
    return [(e.table.table, e.key) for e in events if isinstance(e, RowChange)]


# (id, default schema: none / db / other, statements with {db} {other} {file}, verb, table).
# Not here: INSERT DELAYED, which MariaDB always logs as rows (its handler thread writes them).
REFUSED = [
    ("replace", None, ["REPLACE INTO `{db}`.t VALUES (3, '{secret}')"], "REPLACE", "t"),
    ("insert_myisam", None, ["INSERT INTO `{db}`.tm VALUES (3, '{secret}')"], "INSERT", "tm"),
    (
        "insert_low_priority",
        "other",
        ["INSERT LOW_PRIORITY INTO `{db}`.t VALUES (3, '{secret}')"],
        "INSERT",
        "t",
    ),
    (
        "insert_high_priority_ignore",
        None,
        ["INSERT HIGH_PRIORITY IGNORE INTO `{db}`.t VALUES (3, '{secret}')"],
        "INSERT",
        "t",
    ),
    (
        "update_ignore",
        "other",
        ["UPDATE IGNORE `{db}`.t SET v = '{secret}' WHERE id = 1"],
        "UPDATE",
        "t",
    ),
    (
        "update_multi_table",
        "other",
        ["UPDATE src JOIN `{db}`.t ON t.id = src.id SET t.v = src.v"],
        "UPDATE",
        "t",
    ),
    (
        "delete_multi_table",
        "other",
        ["DELETE t FROM `{db}`.t AS t JOIN src ON t.id = src.id"],
        "DELETE",
        "t",
    ),
    (
        "leading_comment",
        None,
        ["/* app: checkout */ DELETE FROM `{db}`.t WHERE id = 2"],
        "DELETE",
        "t",
    ),
    (
        "executable_comment",
        "other",
        ["/*!40000 INSERT INTO `{db}`.t VALUES (3, '{secret}') */"],
        "INSERT",
        "t",
    ),
    (
        "replace_select_use_other",
        "other",
        ["REPLACE INTO `{db}`.t SELECT id, v FROM src"],
        "REPLACE",
        "t",
    ),
    (
        "replace_select_unqualified",
        "db",
        ["REPLACE INTO t SELECT id, v FROM `{other}`.src"],
        "REPLACE",
        "t",
    ),
    (
        "insert_select_use_statement",
        None,
        ["USE `{other}`", "INSERT INTO `{db}`.t SELECT id + 10, v FROM src"],
        "INSERT",
        "t",
    ),
    (
        "set_statement_for",
        None,
        ["SET STATEMENT max_statement_time = 100 FOR UPDATE `{db}`.t SET v = '{secret}'"],
        "UPDATE",
        "t",
    ),
    (
        "load_data_local",
        "db",
        ["LOAD DATA LOCAL INFILE '{file}' INTO TABLE t FIELDS TERMINATED BY ','"],
        "LOAD DATA",
        "t",
    ),
    (
        "load_data_local_replace",
        "other",
        ["LOAD DATA LOCAL INFILE '{file}' REPLACE INTO TABLE `{db}`.t FIELDS TERMINATED BY ','"],
        "LOAD DATA",
        "t",
    ),
]


@pytest.mark.parametrize(
    ("default", "statements", "verb", "table"),
    [pytest.param(*case[1:], id=case[0]) for case in REFUSED],
)
def test_statement_logged_rows_on_a_captured_table_fail_the_changefeed(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    tables: str,
    other: str,
    tmp_path: Path,
    default: str | None,
    statements: list[str],
    verb: str,
    table: str,
) -> None:
    db = tables
    data = tmp_path / "rows.csv"
    data.write_text(f"7,{SECRET}\n8,{SECRET}\n")
    start = current_position(conn, info)
    execute(conn, f"INSERT INTO `{db}`.t VALUES (100, 'row event before')")
    schema = {"db": db, "other": other, None: None}[default]
    session = statement_session(source_db, "STATEMENT", schema)
    try:
        texts = [s.format(db=db, other=other, file=data, secret=SECRET) for s in statements]
        execute(session, *texts)
    finally:
        session.close()
    execute(conn, f"INSERT INTO `{db}`.t VALUES (101, 'row event after')")
    end = current_position(conn, info)

    events: list[Event] = []
    with pytest.raises(ChangesUnavailable) as failure:
        pull(make_puller(source_db, info, start, db, decode), end, events)

    message = str(failure.value)
    assert f"({verb} on {db}.{table})" in message
    assert f"at {end.file}:" in message
    assert "written to the binlog as an SQL statement" in message
    assert "Set binlog_format=ROW for every session" in message
    assert f"snapshot mode 'initial' to copy {db}.{table}" in message
    assert SECRET not in message and str(data) not in message  # values stay out
    # Every row before the statement came out; nothing after it did.
    assert keys(events) == [("t", (100,))]


def test_a_stored_function_call_logged_as_a_statement_fails_closed(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    tables: str,
    other: str,
) -> None:
    """`SELECT f()` is in the binlog only because f wrote rows; which ones it cannot tell."""
    db = tables
    execute(
        conn,
        f"CREATE FUNCTION `{other}`.f() RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
        f"BEGIN INSERT INTO `{db}`.t VALUES (50, 'from f'); RETURN 1; END",
    )
    start = current_position(conn, info)
    session = statement_session(source_db, "STATEMENT", other)
    try:
        execute(session, "SELECT f()")
    finally:
        session.close()
    end = current_position(conn, info)

    with pytest.raises(ChangesUnavailable) as failure:
        pull(make_puller(source_db, info, start, db, decode), end, [])
    message = str(failure.value)
    assert "(SELECT on tables the statement does not show" in message
    assert "SELECT `" in message and f"default schema '{other}'" in message


def test_statement_logged_rows_outside_the_filter_pass(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    tables: str,
    other: str,
    tmp_path: Path,
) -> None:
    """Heartbeats, other schemas and a temporary table that hides a captured one are none of
    the changefeed's business: it goes on, and the row events around them all come out."""
    db = tables
    data = tmp_path / "hb.csv"
    data.write_text("7,x\n8,y\n")
    start = current_position(conn, info)
    session = statement_session(source_db, "STATEMENT", db)
    try:
        execute(
            session,
            "INSERT INTO hb VALUES (2, 'beat') ON DUPLICATE KEY UPDATE v = 'beat'",
            "UPDATE LOW_PRIORITY hb SET v = 'beat2' WHERE id = 1",
            f"REPLACE INTO `{other}`.src SELECT id, v FROM hb",
            f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE hb FIELDS TERMINATED BY ','",
            "/* cleanup */ DELETE FROM hb WHERE id > 100",
            # A temporary table of the captured table's name hides it in this session.
            "CREATE TEMPORARY TABLE t (id INT PRIMARY KEY, v VARCHAR(40))",
            "INSERT INTO t VALUES (1, 'temporary')",
            f"UPDATE `{db}`.t SET v = 'temporary 2'",
            "DROP TEMPORARY TABLE t",
        )
    finally:
        session.close()
    execute(conn, f"INSERT INTO `{db}`.t VALUES (3, 'row event')")
    end = current_position(conn, info)

    events: list[Event] = []
    pull(make_puller(source_db, info, start, db, decode), end, events)
    assert keys(events) == [("t", (3,))]


def test_a_statement_on_another_table_keeps_its_transactions_rows(
    decode: DecodePool | None, source_db: MariaDBServer, conn: Any, info: ServerInfo, tables: str
) -> None:
    """MIXED logs unsafe statements as rows, safe ones as statements, in one transaction:
    the statement on the heartbeat table must neither cut the transaction nor drop its rows."""
    db = tables
    start = current_position(conn, info)
    session = statement_session(source_db, "MIXED", db)
    try:
        execute(
            session,
            "BEGIN",
            "INSERT INTO t VALUES (10, UUID())",
            "UPDATE hb SET v = 'beat' WHERE id = 1",
            "INSERT INTO t VALUES (11, UUID())",
            "COMMIT",
        )
    finally:
        session.close()
    end = current_position(conn, info)

    events: list[Event] = []
    pull(make_puller(source_db, info, start, db, decode), end, events)
    changes = [e for e in events if isinstance(e, RowChange)]
    assert [(c.table, c.key) for c in changes] == [
        (TableName(db, "t"), (10,)),
        (TableName(db, "t"), (11,)),
    ]
    assert changes[0].position == changes[1].position == end
    # No resolved mark inside the transaction: the only one is at its commit.
    assert [e.position for e in events if isinstance(e, Resolved)] == [end]
