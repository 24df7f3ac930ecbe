"""A capture frozen in the middle of a downstream transaction (SIGSTOP, a paused VM).

Its session holds the transaction's row locks while it is frozen. The capture its
tables move to (once its lease ends) writes the same rows and would wait for those
locks until the frozen one runs again: a stall seen once in the test suite under
load. The sink's sessions have MariaDB end a session whose transaction stands idle
(``MySQLSinkOptions.idle_transaction_timeout``), which releases the locks; the
frozen capture, thawed, finds its connection gone, and its fence refuses to write
the transaction again.
"""

from __future__ import annotations

import threading
import time

import pymysql
import pytest
from testkit import execute

from cdc.logs import get_logger
from cdc.model import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.mysql import MySQLSinkOptions
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.errors import is_transient
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

LOCK_WAIT_TIMEOUT = 1205


def hold_row(conn: pymysql.connections.Connection, table: TableName) -> None:
    """A transaction that changed row 1 and then stood still: its lock stays."""
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(f"UPDATE {table.quoted()} SET v = -1 WHERE id = 1")


def write_row(server: MariaDBServer, table: TableName, lock_wait: int) -> float:
    """Seconds another session takes to change row 1 (waiting at most ``lock_wait``)."""
    conn = server.connect()
    try:
        began = time.monotonic()
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION innodb_lock_wait_timeout = {lock_wait}")
            cur.execute(f"UPDATE {table.quoted()} SET v = 2 WHERE id = 1")
        conn.commit()
        return time.monotonic() - began
    finally:
        conn.close()


def test_a_sink_session_left_idle_in_a_transaction_is_ended_by_the_downstream(
    sink_db: MariaDBServer, sink_database: str
) -> None:
    table = TableName(sink_database, "t")
    execute(
        sink_db,
        f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {table.quoted()} VALUES (1, 0)",
    )
    # Without the limit, the lock stays for as long as its holder stands still.
    plain = sink_db.connect()
    try:
        hold_row(plain, table)
        with pytest.raises(pymysql.err.OperationalError) as waited:
            write_row(sink_db, table, lock_wait=2)
        assert waited.value.args[0] == LOCK_WAIT_TIMEOUT
    finally:
        plain.close()

    frozen = Downstream(
        parse_sink_uri(sink_db.uri).connection,
        MySQLSinkOptions(idle_transaction_timeout=2),
        get_logger(__name__),
        threading.Event(),
        read_timeout=30,
    )
    try:
        conn = frozen._connection()  # the session a lane writes through
        with conn.cursor() as cur:
            cur.execute("SELECT @@session.idle_transaction_timeout")
            assert cur.fetchone() == (2,)
        hold_row(conn, table)  # its capture freezes here
        assert write_row(sink_db, table, lock_wait=30) < 15
        with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as lost:
            cur.execute("COMMIT")  # thawed: the session is gone, its change with it
        assert is_transient(lost.value), lost.value
    finally:
        frozen.close()
    conn = sink_db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT v FROM {table.quoted()} WHERE id = 1")
            assert cur.fetchone() == (2,)
    finally:
        conn.close()
