"""Row sessions of the MySQL sink run READ COMMITTED (cdc.sink.mysql.strict.isolation_sql):
writers of one table do not wait on the gaps next to each other's rows."""

from __future__ import annotations

import threading

import pymysql
import pytest
from testkit import execute

from cdc.logs import get_logger
from cdc.model import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.sink.mysql.strict import isolation_sql
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration


def session(server: MariaDBServer) -> pymysql.connections.Connection:
    """A connection set up exactly as a lane's or a chunk loader's (a strict Downstream)."""
    downstream = Downstream(
        parse_sink_uri(server.uri).connection,
        MySQLSinkOptions(),
        get_logger(__name__),
        threading.Event(),
        read_timeout=30,
    )
    return downstream._connection()


def test_a_range_delete_does_not_hold_the_gap_another_writer_inserts_into(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    """Two chunks of one table loaded at once: the first one's range DELETE, its
    transaction still open, and the next chunk's row inserted past that range. Under
    REPEATABLE READ the DELETE locked the gap up to the next row (1000), and the
    insert of 500 waited for it (error 1205 here after 2 s)."""
    table = TableName(sink_database, "t").quoted()
    execute(
        sink_db,
        f"CREATE TABLE {table} (id INT PRIMARY KEY)",
        f"INSERT INTO {table} VALUES (1), (1000)",
    )
    first, second = session(sink_db), session(sink_db)
    try:
        with first.cursor() as cur:
            cur.execute("SELECT @@tx_isolation")
            assert cur.fetchone()[0] == "READ-COMMITTED"
            cur.execute(f"DELETE FROM {table} WHERE id >= 10 AND id < 100")
        with second.cursor() as cur:
            cur.execute("SET SESSION innodb_lock_wait_timeout = 2")
            cur.execute(f"INSERT INTO {table} VALUES (500)")
        second.commit()
        first.commit()
    finally:
        first.close()
        second.close()
    assert execute(sink_db, f"SELECT id FROM {table} ORDER BY id") == [(1,), (500,), (1000,)]


def test_a_downstream_logging_statements_keeps_its_isolation_and_takes_the_writes(
    source_db: MariaDBServer, source_database: str
) -> None:
    """InnoDB refuses writes under READ COMMITTED to a statement-format binlog (error
    1665): such a downstream's row sessions keep the server's default level."""
    ((before,),) = execute(source_db, "SELECT @@global.binlog_format")
    table = TableName(source_database, "t").quoted()
    execute(source_db, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)")
    execute(source_db, "SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        conn = session(source_db)
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@log_bin, @@session.binlog_format, @@tx_isolation")
                assert cur.fetchone() == (1, "STATEMENT", "REPEATABLE-READ")
                cur.execute(f"REPLACE INTO {table} VALUES (1, 1)")
            conn.commit()
        finally:
            conn.close()
    finally:
        execute(source_db, f"SET GLOBAL binlog_format = '{before}'")
    assert execute(source_db, f"SELECT id, v FROM {table}") == [(1, 1)]
    read_committed = ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",)
    for answer in (
        [("log_bin", "ON"), ("binlog_format", "MIXED")],
        [("log_bin", "OFF"), ("binlog_format", "STATEMENT")],
        [("log_bin", "ON")],  # a server without binlog_format logs rows only
    ):
        assert isolation_sql(answer) == read_committed, answer
    assert isolation_sql([("log_bin", "ON"), ("binlog_format", "STATEMENT")]) == ()
