"""Tables joining a shared stream while its reader stands at the barrier (real servers).

A reader stalled at the barrier has already read the transaction it holds
back (rows come out of the puller at commit), decoding only the tables it
held then. A table taken in at that moment, from a start before that
transaction, would miss its rows in it: the chaos suite lost updates this
way when the owner died (the barrier stood still) and the dead capture's
tables joined the others. Here the barrier is a key the test moves by hand.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from testkit import position_now, wait_for

from cdc.changefeed import Barrier, BarrierKind, TableTask
from cdc.config import load_changefeed_config
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.metrics import TableMetrics
from cdc.model.gtid import Flavor
from cdc.model.schema import TableName
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.source.connect import connect
from cdc.source.flavor import detect
from cdc.store import EtcdStore
from processor.barrier_view import BarrierView
from processor.shared_stream import SharedStream, StreamOptions
from processor.streamed_table import StreamedTable
from processor.table_records import RecordWriter, TaskGuard

pytestmark = pytest.mark.integration

CF = "cf-joins"


@pytest.fixture
def store(etcd_server: EtcdServer, etcd_prefix: str) -> Iterator[EtcdStore]:
    with etcd_server.store(etcd_prefix) as store:
        yield store


def execute(server: MariaDBServer, *statements: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
        conn.commit()
    finally:
        conn.close()


def rows(server: MariaDBServer, table: str) -> list[tuple]:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, v FROM {table} ORDER BY id")
            return list(cur.fetchall())
    finally:
        conn.close()


def test_a_table_joining_a_stalled_reader_misses_nothing_of_the_held_transaction(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
) -> None:
    db = source_database
    for server in (source_db, sink_db):
        execute(
            server,
            f"CREATE DATABASE IF NOT EXISTS `{db}`",
            f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)",
            f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v INT)",
        )
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": source_db.uri,
            "sink_uri": sink_db.uri,
            "rules": [f"{db}.*"],
        },
    )
    source = connect(config.source_uri)
    info = detect(source)
    schemas = {t: load_table_schema(source, TableName(db, t)) for t in ("a", "b")}
    source.close()
    start = position_now(source_db)
    store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, start).to_dict())
    view = BarrierView(store, CF)
    stream = SharedStream(store, config, view, lambda: True, StreamOptions(0.2, 1000))

    def table(name: str) -> StreamedTable:
        key = store.keys.task(CF, f"{db}.{name}")
        store.put(key, TableTask("c1").to_dict())
        item = store.get(key)
        assert item is not None
        records = RecordWriter(store, CF, f"{db}.{name}", "c1", TaskGuard(item.mod_revision))
        return StreamedTable(
            TableName(db, name),
            schemas[name],
            None,
            floor=start,
            records=records,
            metrics=TableMetrics(CF, f"{db}.{name}"),
            events=EventFilter([], True),
            flavor=Flavor.MARIADB,
            case_sensitive=True,
            log=get_logger(__name__, table=name),
        )

    a, b = table("a"), table("b")
    try:
        stream.join(a, start, info)
        execute(
            source_db,
            "START TRANSACTION",
            *(f"INSERT INTO `{db}`.a VALUES ({i}, {i})" for i in range(1, 4)),
            *(f"INSERT INTO `{db}`.b VALUES ({i}, {i})" for i in range(1, 4)),
        )
        main = stream.main
        assert main is not None
        # The reader reads that one transaction and stands at the barrier (the start).
        wait_for(lambda: main.boundary == start and a.reported == start, 10, "a to report")
        time.sleep(1.0)
        stream.join(b, start, info)
        time.sleep(1.0)
        end = position_now(source_db)
        store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, end).to_dict())
        wait_for(
            lambda: all(t.reported is not None and t.reported.key() >= end.key() for t in (a, b)),
            20,
            f"both tables to report {end}",
        )
        assert rows(sink_db, f"`{db}`.a") == rows(source_db, f"`{db}`.a")
        assert rows(sink_db, f"`{db}`.b") == rows(source_db, f"`{db}`.b")
    finally:
        for state in (a, b):
            stream.leave(state, report=False)
        stream.close()
        view.close()
