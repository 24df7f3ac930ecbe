"""The failover guard against real servers: a reader never reads another server's binlog by
file:offset, resumes a position of an earlier source by its GTID set, and fails closed where
it cannot (a position without a GTID set); the changefeed's source record in etcd."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest
from testkit import execute, position_now

from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.changefeed import ChangefeedStatus, ChangefeedStore
from cdc.changefeed.failover import FailoverRefused, follow_source
from cdc.config import load_changefeed_config
from cdc.filter.table_filter import TableFilter
from cdc.model.events import RowChange
from cdc.model.position import Position
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.source.checks import ChangesUnavailable, SourceSwitched
from cdc.source.flavor import ServerInfo
from cdc.store import EtcdStore, Fence
from cdc.uri.mysql import parse_source_uri

CF = "guard"


def puller(source_db: MariaDBServer, info: ServerInfo, start: Position, db: str) -> Puller:
    return Puller(
        PullerConfig(
            source=parse_source_uri(source_db.uri),
            server=info,
            start=start,
            tables=TableFilter.parse([f"{db}.*"]),
            heartbeat_interval=0.5,
        )
    )


def first_rows(reader: Puller, count: int, timeout: float = 30) -> list[RowChange]:
    rows: list[RowChange] = []
    deadline = time.monotonic() + timeout
    try:
        for event in reader.events():
            if isinstance(event, RowChange):
                rows.append(event)
                if len(rows) == count:
                    return rows
            assert time.monotonic() < deadline, f"only {len(rows)} row(s) in {timeout}s"
    finally:
        reader.close()
    return rows


def test_a_reader_started_on_one_server_refuses_another(
    source_db: MariaDBServer, info: ServerInfo, source_database: str
) -> None:
    elsewhere = replace(info, server_id=info.server_id + 1000)
    reader = puller(source_db, elsewhere, position_now(source_db), source_database)
    with pytest.raises(SourceSwitched, match=r"now reaches another server \(server_id"):
        next(iter(reader.events()))


def test_a_position_of_an_earlier_source_resumes_by_its_gtid_set_never_its_file_offset(
    source_db: MariaDBServer, info: ServerInfo, source_database: str
) -> None:
    db = source_database
    execute(source_db, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    execute(source_db, f"INSERT INTO `{db}`.t VALUES (1)")
    now = position_now(source_db)
    assert now.gtid is not None
    # what the old server called this place: a file this server does not even have
    elsewhere = Position("old-primary-bin.000077", 123_456, now.gtid)
    execute(source_db, f"INSERT INTO `{db}`.t VALUES (2)", f"INSERT INTO `{db}`.t VALUES (3)")
    followed = replace(info, generation=1)
    rows = first_rows(puller(source_db, followed, elsewhere, db), 2)
    assert [r.key for r in rows] == [(2,), (3,)]
    assert all(r.position.gen == 1 for r in rows)
    assert all(r.position.gtid is not None and r.position.gtid.contains(now.gtid) for r in rows)


def test_a_position_of_an_earlier_source_without_gtid_set_fails_closed(
    source_db: MariaDBServer, info: ServerInfo, source_database: str
) -> None:
    now = position_now(source_db)
    file_mode = Position(now.file, now.offset)  # a changefeed started at FILE:OFFSET
    reader = puller(source_db, replace(info, generation=1), file_mode, source_database)
    with pytest.raises(ChangesUnavailable, match="carries no GTID set") as caught:
        next(iter(reader.events()))
    assert "means nothing" in str(caught.value)


def test_a_gtid_set_the_server_never_had_is_refused_naming_it(
    source_db: MariaDBServer, info: ServerInfo, source_database: str
) -> None:
    now = position_now(source_db)
    assert now.gtid is not None
    (ahead,) = now.gtid.mariadb_gtids
    beyond = Position("old-primary-bin.000077", 4, now.gtid.add(f"0-99-{ahead.seq + 5}"))
    reader = puller(source_db, replace(info, generation=1), beyond, source_database)
    with pytest.raises(ChangesUnavailable, match=r"never had: domain 0: seq"):
        next(iter(reader.events()))


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Any:
    with etcd_server.store(etcd_prefix) as opened:
        yield opened


def _changefeed(store: EtcdStore, source_db: MariaDBServer) -> None:
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": source_db.uri,
            "sink_uri": "blackhole://",
            "rules": ["x.*"],
            "snapshot_mode": "never",
        },
    )
    ChangefeedStore(store).create(replace(config, store_credentials=True))


def _owner_fence(store: EtcdStore) -> Fence:
    key = store.keys.owner()
    store.put(key, {"capture_id": "test-owner"})
    item = store.get(key)
    assert item is not None
    return Fence(str(key), item.create_revision)


def test_the_changefeed_records_its_server_and_refuses_one_missing_its_transactions(
    store: EtcdStore, source_db: MariaDBServer, sink_db: MariaDBServer
) -> None:
    _changefeed(store, source_db)
    feeds = ChangefeedStore(store)
    conn = source_db.connect()
    try:
        first = follow_source(store, CF, conn)
        record = feeds.get(CF).status.source
        assert record is not None and record.names(first) and record.generation == 0
        assert first.generation == 0
        checkpoint = position_now(source_db)
        store.put(
            store.keys.changefeed_status(CF),
            replace(feeds.get(CF).status, checkpoint=checkpoint).to_dict(),
        )
    finally:
        conn.close()

    other = sink_db.connect()  # another server: no binlog, so none of the transactions
    try:
        with pytest.raises(SourceSwitched, match="the owner checks"):
            follow_source(store, CF, other, wait=0.5)
        with pytest.raises(FailoverRefused, match="lacks transactions") as caught:
            follow_source(store, CF, other, fence=_owner_fence(store))
    finally:
        other.close()
    assert "server_id 2" in str(caught.value) and "server_id 1" in str(caught.value)
    status: ChangefeedStatus = feeds.get(CF).status
    assert status.source is not None and status.source.names(first)


def test_resolved_marks_carry_the_time_the_source_was_current(
    source_db: MariaDBServer, info: ServerInfo, source_database: str
) -> None:
    """An idle source: every heartbeat's resolved mark says when it arrived (the source was
    current then), not the time of the last commit, which may be long ago."""
    execute(source_db, "SELECT 1")
    began = time.time()
    reader = puller(source_db, info, position_now(source_db), source_database)
    seen: list[Resolved] = []
    try:
        for event in reader.events():
            if isinstance(event, Resolved):
                seen.append(event)
                if len(seen) == 4:
                    break
    finally:
        reader.close()
    times = [r.source_time for r in seen]
    assert all(t is not None and t >= began for t in times), times
    assert times == sorted(times)
