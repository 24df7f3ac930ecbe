"""The puller on a real MariaDB binlog: order, transactions, filters, DDL, resume, reconnect."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from cdc.binlog.decode_pool import DecodePool
from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.filter.table_filter import TableFilter
from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.history import SchemaHistory
from cdc.schema.loader import load_schemas
from cdc.source.flavor import ServerInfo, current_position
from cdc.uri.mysql import parse_source_uri

Event = RowChange | DdlEvent | Resolved


def make_puller(
    source_db: MariaDBServer,
    info: ServerInfo,
    start: Position | GtidSet,
    rules: list[str],
    *,
    rows: bool = True,
    decode: DecodePool | None = None,
) -> Puller:
    return Puller(
        PullerConfig(
            source=parse_source_uri(source_db.uri),
            server=info,
            start=start,
            tables=TableFilter.parse(rules),
            heartbeat_interval=0.5,
            rows=rows,
            decode=decode,
        )
    )


def collect(puller: Puller, until: Position, timeout: float = 30) -> list[Event]:
    """Events until the resolved position reaches `until` (heartbeats keep the loop turning)."""
    out: list[Event] = []
    deadline = time.monotonic() + timeout
    try:
        for event in puller.events():
            out.append(event)
            if isinstance(event, Resolved) and event.position.key() >= until.key():
                return out
            if time.monotonic() > deadline:
                pytest.fail(f"no event reached {until} within {timeout}s; last {event}")
    finally:
        puller.close()
    pytest.fail("the puller stopped before reaching the end")


def execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def rows(events: list[Event]) -> list[RowChange]:
    return [e for e in events if isinstance(e, RowChange)]


def test_transactions_come_whole_at_their_commit_position(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
) -> None:
    db = source_database
    execute(
        conn,
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE `{db}`.skipped (id INT PRIMARY KEY)",
    )
    start = current_position(conn, info)
    execute(
        conn,
        f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b')",
        f"INSERT INTO `{db}`.skipped VALUES (1)",
        "BEGIN",
        f"UPDATE `{db}`.t SET v = 'z' WHERE id = 1",
        f"INSERT INTO `{db}`.skipped VALUES (2)",
        f"DELETE FROM `{db}`.t WHERE id = 2",
        "COMMIT",
        f"UPDATE `{db}`.t SET id = 10 WHERE id = 1",
    )
    end = current_position(conn, info)
    puller = make_puller(source_db, info, start, [f"{db}.t"], decode=decode)
    events = collect(puller, end)

    changes = rows(events)
    assert [(c.op, c.key) for c in changes] == [
        (Op.CREATE, (1,)),
        (Op.CREATE, (2,)),
        (Op.UPDATE, (1,)),
        (Op.DELETE, (2,)),
        (Op.UPDATE, (10,)),
    ]
    assert {c.table for c in changes} == {TableName(db, "t")}
    assert changes[2].before == {"id": 1, "v": "a"} and changes[2].after == {"id": 1, "v": "z"}
    assert changes[4].before == {"id": 1, "v": "z"} and changes[4].after == {"id": 10, "v": "z"}
    # One transaction, one commit position and GTID; positions never go back.
    assert changes[2].position == changes[3].position
    assert changes[2].txn_id == changes[3].txn_id and changes[2].txn_id is not None
    assert changes[0].position < changes[2].position < changes[4].position
    assert changes[4].position.gtid is not None and changes[4].position.gtid.contains(
        GtidSet.parse(changes[4].txn_id)
    )
    # The filtered table's row events were never decoded: its table map was refused.
    decoded = {(t.schema, t.table) for t in puller.decoder._by_id.values()}
    assert decoded == {(db, "t")}


def test_a_ddl_only_puller_gives_ddl_and_commit_positions_and_decodes_no_row(
    source_db: MariaDBServer, conn: Any, info: ServerInfo, source_database: str
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))")
    start = current_position(conn, info)
    execute(
        conn,
        f"INSERT INTO `{db}`.t VALUES (1, 'a'), (2, 'b')",
        f"ALTER TABLE `{db}`.t ADD COLUMN w INT",
        f"UPDATE `{db}`.t SET w = 1",
    )
    end = current_position(conn, info)
    puller = make_puller(source_db, info, start, [f"{db}.t"], rows=False)
    events = collect(puller, end)

    assert rows(events) == []
    assert [e.kind for e in events if isinstance(e, DdlEvent)] == [DdlKind.ADD_COLUMN]
    commits = [e.position for e in events if isinstance(e, Resolved)]
    assert commits == sorted(commits, key=Position.key) and commits[-1].key() >= end.key()
    assert puller.decoder._by_id == {}


def test_rows_are_decoded_with_the_schema_current_at_their_position(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
    start = current_position(conn, info)
    history = SchemaHistory.initial(load_schemas(conn, [TableName(db, "a")]), start)
    execute(
        conn,
        f"INSERT INTO `{db}`.a VALUES (1, 1)",
        f"ALTER TABLE `{db}`.a ADD COLUMN y VARCHAR(5) DEFAULT 'd'",
        f"INSERT INTO `{db}`.a VALUES (2, 2, 'two')",
        f"ALTER TABLE `{db}`.a MODIFY COLUMN x BIGINT",
        f"UPDATE `{db}`.a SET x = 9000000000 WHERE id = 2",
        f"ALTER TABLE `{db}`.a RENAME COLUMN y TO z",
        f"INSERT INTO `{db}`.a VALUES (3, 3, 'z')",
        f"ALTER TABLE `{db}`.a DROP COLUMN x",
        f"INSERT INTO `{db}`.a VALUES (4, 'w')",
        f"CREATE TABLE `{db}`.b (k VARCHAR(3) PRIMARY KEY)",
        f"INSERT INTO `{db}`.b VALUES ('k1')",
        f"RENAME TABLE `{db}`.a TO `{db}`.a2",
        f"INSERT INTO `{db}`.a2 VALUES (5, 'v')",
        f"TRUNCATE TABLE `{db}`.b",
        f"INSERT INTO `{db}`.b VALUES ('k2')",
        f"DROP TABLE `{db}`.b",
        f"CREATE TABLE `{db}`.b (k INT PRIMARY KEY, extra INT)",
        f"INSERT INTO `{db}`.b VALUES (7, 8)",
    )
    end = current_position(conn, info)
    events = collect(make_puller(source_db, info, start, [f"{db}.*"], decode=decode), end)

    kinds = []
    checked = 0
    for event in events:
        if isinstance(event, DdlEvent):
            kinds.append(event.kind)
            history.apply(event)
        elif isinstance(event, RowChange):
            schema = history.at(event.table, event.position)
            assert schema is not None, event
            assert tuple(event.row) == schema.column_names, (event, schema)
            checked += 1
    assert checked == 9
    assert kinds == [
        DdlKind.ADD_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.RENAME_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.CREATE_TABLE,
        DdlKind.RENAME_TABLE,
        DdlKind.TRUNCATE_TABLE,
        DdlKind.DROP_TABLE,
        DdlKind.CREATE_TABLE,
    ]
    by_key = {(c.table.table, c.key): c.row for c in rows(events)}
    assert by_key[("a", (2,))] == {"id": 2, "x": 9000000000, "y": "two"}
    assert by_key[("a2", (5,))] == {"id": 5, "z": "v"}
    assert by_key[("b", (7,))] == {"k": 7, "extra": 8}


def test_resolved_advances_while_the_watched_tables_are_idle(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
) -> None:
    db = source_database
    execute(
        conn,
        f"CREATE TABLE `{db}`.watched (id INT PRIMARY KEY)",
        f"CREATE TABLE `{db}`.busy (id INT PRIMARY KEY)",
    )
    start = current_position(conn, info)
    execute(conn, *(f"INSERT INTO `{db}`.busy VALUES ({i})" for i in range(20)))
    end = current_position(conn, info)
    events = collect(make_puller(source_db, info, start, [f"{db}.watched"], decode=decode), end)
    assert rows(events) == []
    assert isinstance(events[-1], Resolved) and events[-1].position.key() == end.key()

    # Nothing at all happens now: heartbeats still report the (unchanged) end.
    puller = make_puller(source_db, info, end, [f"{db}.watched"], decode=decode)
    seen: list[Event] = []
    for event in puller.events():
        seen.append(event)
        if len(seen) == 3:
            break
    puller.close()
    assert all(isinstance(e, Resolved) and e.position.key() == end.key() for e in seen)


def test_restart_from_committed_continues_without_gap_or_repeat(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    start = current_position(conn, info)
    execute(conn, *(f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(1, 11)))
    end = current_position(conn, info)

    first = make_puller(source_db, info, start, [f"{db}.t"], decode=decode)
    got = []
    for event in first.events():
        if isinstance(event, RowChange):
            got.append(event.key[0])
            if len(got) == 4:
                break
    resume = first.committed
    first.close()

    got += [
        c.key[0]
        for c in rows(
            collect(make_puller(source_db, info, resume, [f"{db}.t"], decode=decode), end)
        )
    ]
    assert got == list(range(1, 11))


def test_start_from_a_gtid_set(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    start = current_position(conn, info)
    assert start.gtid is not None
    execute(conn, *(f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(3)))
    end = current_position(conn, info)
    events = collect(make_puller(source_db, info, start.gtid, [f"{db}.t"], decode=decode), end)
    assert [c.key for c in rows(events)] == [(0,), (1,), (2,)]
    assert rows(events)[-1].position == end


@pytest.mark.parametrize("mode", ["file", "gtid"])
def test_killed_connection_gives_every_committed_row_exactly_once(
    decode: DecodePool | None,
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
    mode: str,
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, pad CHAR(100))")
    start = current_position(conn, info)
    puller = make_puller(
        source_db, info, start if mode == "file" else start.gtid, [f"{db}.t"], decode=decode
    )
    total = 3000
    done = threading.Event()

    def write() -> None:
        writer = source_db.connect()
        try:
            with writer.cursor() as cur:
                for i in range(0, total, 3):
                    cur.execute("BEGIN")
                    for j in range(i, min(i + 3, total)):
                        cur.execute(f"INSERT INTO `{db}`.t VALUES ({j}, REPEAT('x', 100))")
                    cur.execute("COMMIT")
        finally:
            writer.close()
            done.set()

    kills: list[int] = []
    consumed = threading.Event()

    def kill_dump_threads() -> None:
        """KILLs the reader's binlog dump thread three times while rows flow.

        Runs beside the consumer: after a KILL the reader may still be served
        from its socket buffer before it notices and reconnects.
        """
        killer = source_db.connect()
        try:
            with killer.cursor() as cur:
                while len(kills) < 3 and not consumed.is_set():
                    time.sleep(0.15)
                    cur.execute(
                        "SELECT id FROM information_schema.PROCESSLIST"
                        " WHERE COMMAND LIKE 'Binlog Dump%'"
                    )
                    for (thread_id,) in cur.fetchall():
                        cur.execute(f"KILL {thread_id}")
                        kills.append(thread_id)
        finally:
            killer.close()

    got: list[int] = []
    writer = threading.Thread(target=write)
    killer = threading.Thread(target=kill_dump_threads)
    deadline = time.monotonic() + 120
    for event in puller.events():
        if not writer.is_alive() and not done.is_set():
            writer.start()
            killer.start()
        if isinstance(event, RowChange):
            got.append(event.key[0])
        if len(got) >= total or time.monotonic() > deadline:
            break
    consumed.set()
    puller.close()
    writer.join()
    killer.join()
    assert len(kills) >= 3
    assert got == list(range(total))
