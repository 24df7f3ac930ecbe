"""The puller reading ahead for decode worker processes, on a real binlog: large
transactions split over workers, holding at a boundary, a worker lost mid-stream."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from cdc.binlog import readahead
from cdc.binlog.decode_pool import DecodePool, DecodeWorkerError
from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.filter.table_filter import TableFilter
from cdc.model.events import RowChange
from cdc.model.position import Position
from cdc.playground.mariadb import MariaDBServer
from cdc.source.flavor import ServerInfo, current_position
from cdc.uri.mysql import parse_source_uri


def execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def puller(
    source_db: MariaDBServer, info: ServerInfo, start: Position, rules: list[str], pool: DecodePool
) -> Puller:
    return Puller(
        PullerConfig(
            source=parse_source_uri(source_db.uri),
            server=info,
            start=start,
            tables=TableFilter.parse(rules),
            heartbeat_interval=0.5,
            decode=pool,
        )
    )


def test_a_transaction_larger_than_a_unit_is_decoded_in_parts_in_order(
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
    decode_pool: DecodePool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = source_database
    monkeypatch.setattr(readahead, "UNIT_BYTES", 16 << 10)  # parts of about 100 rows
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, pad CHAR(120))")
    start = current_position(conn, info)
    execute(
        conn,
        "BEGIN",
        *(
            f"INSERT INTO `{db}`.t SELECT seq, REPEAT('p', 120) FROM `{db}`.seq_{i}_to_{i + 999}"
            for i in range(0, 5000, 1000)
        ),
        "COMMIT",
        f"INSERT INTO `{db}`.t VALUES (-1, 'after')",
    )
    end = current_position(conn, info)
    reader = puller(source_db, info, start, [f"{db}.t"], decode_pool)
    events: list[RowChange | Resolved] = []
    try:
        for event in reader.events():
            if isinstance(event, RowChange | Resolved):
                events.append(event)
            if isinstance(event, Resolved) and event.position.key() >= end.key():
                break
    finally:
        reader.close()
    keys = [e.key[0] for e in events if isinstance(e, RowChange)]
    assert keys == [*range(5000), -1]
    # one transaction: one commit position, and its Resolved only after its last row
    big = [e for e in events if isinstance(e, RowChange) and e.key[0] >= 0]
    assert len({e.position for e in big}) == 1
    first_resolved = next(i for i, e in enumerate(events) if isinstance(e, Resolved))
    assert first_resolved == 5000 and events[first_resolved].position == big[0].position


def test_hold_stops_the_reading_thread_at_the_consumers_boundary(
    source_db: MariaDBServer,
    conn: Any,
    info: ServerInfo,
    source_database: str,
    decode_pool: DecodePool,
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    start = current_position(conn, info)
    execute(conn, *(f"INSERT INTO `{db}`.t VALUES ({i})" for i in range(200)))
    end = current_position(conn, info)
    reader = puller(source_db, info, start, [f"{db}.t"], decode_pool)
    seen = 0
    drained_at: Position | None = None
    try:
        for event in reader.events():
            if isinstance(event, RowChange):
                seen += 1
                if seen == 10:
                    reader.hold()
                continue
            assert isinstance(event, Resolved)
            if seen >= 10 and drained_at is None and reader.drained():
                drained_at = event.position
                # nothing was read beyond what was handed out
                assert reader.read_position == event.position == reader.committed
            # (the reading thread may have read to the end before the hold: it then
            # stops at the next heartbeat's boundary)
            if event.position.key() >= end.key() and drained_at is not None:
                break
    finally:
        reader.close()
    assert drained_at is not None
    assert seen == 200  # and it read on once asked for more


def test_a_lost_worker_fails_the_reader_with_a_clear_error(
    source_db: MariaDBServer, conn: Any, info: ServerInfo, source_database: str
) -> None:
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, pad CHAR(200))")
    start = current_position(conn, info)
    execute(
        conn,
        f"INSERT INTO `{db}`.t SELECT seq, REPEAT('x', 200) FROM `{db}`.seq_0_to_49999",
        f"INSERT INTO `{db}`.t SELECT seq, REPEAT('x', 200) FROM `{db}`.seq_50000_to_99999",
    )
    pool = DecodePool(1)
    reader = puller(source_db, info, start, [f"{db}.t"], pool)
    keys: list[int] = []
    try:
        with pytest.raises(DecodeWorkerError, match="exited with code"):
            for event in reader.events():
                if isinstance(event, RowChange):
                    keys.append(event.key[0])
                    if len(keys) == 1:
                        for pid in pool.pids():
                            os.kill(pid, signal.SIGKILL)
    finally:
        reader.close()
        pool.close()
    # whatever came out came in order and without a gap before the loss
    assert keys == list(range(len(keys)))


def test_a_backlog_of_many_transactions_through_one_worker_arrives_whole_and_in_order(
    source_db: MariaDBServer, conn: Any, info: ServerInfo, source_database: str
) -> None:
    """Units pile up behind a busy worker and go out from its collector's callback; a
    result larger than a pipe's buffer must not wait on a unit being written the other way."""
    db = source_database
    execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, pad CHAR(200))")
    start = current_position(conn, info)
    execute(
        conn,
        *(
            f"INSERT INTO `{db}`.t SELECT seq, REPEAT('b', 200) FROM `{db}`.seq_{i}_to_{i + 19}"
            for i in range(0, 60_000, 20)
        ),
    )
    end = current_position(conn, info)
    pool = DecodePool(1)
    reader = puller(source_db, info, start, [f"{db}.t"], pool)
    keys: list[int] = []
    try:
        for event in reader.events():
            if isinstance(event, RowChange):
                keys.append(event.key[0])
            elif isinstance(event, Resolved) and event.position.key() >= end.key():
                break
    finally:
        reader.close()
        pool.close()
    assert keys == list(range(60_000))
