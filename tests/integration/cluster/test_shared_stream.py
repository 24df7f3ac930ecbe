"""One binlog reader per changefeed per capture, while tables move in and out under writes.

A capture holds every table; a second capture joins (about half the tables
move to it), then dies (they come back, behind the first capture's reader, so
they catch up on a reader of their own that merges into the main one). All the
while a writer changes every table. At the end the downstream equals the
source (``cdc.diff``); the source never served more than two binlog dumps per
capture (plus the owner's DDL puller); tables leaving the first capture
opened no reader there, the ones coming back at most one catch-up reader that
merged into the main one, and no reader ever reconnected: the tables that
stayed never read the stream again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from cluster_harness import diff
from cluster_helpers import Node, changefeed_config, checksums, running_on, status
from test_cluster_inprocess import Writer, caught_up, fill
from testkit import wait_for

from cdc.changefeed import (
    ChangefeedState,
    ChangefeedStore,
    TableRecord,
    TableState,
    TableTask,
    TaskState,
)
from cdc.playground.mariadb import MariaDBServer
from cdc.store import EtcdStore
from processor.shared_stream import SharedStream

pytestmark = pytest.mark.integration

TABLES = [f"t{i}" for i in range(4)]


def dumps(server: MariaDBServer) -> int:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
                " WHERE COMMAND LIKE 'Binlog Dump%'"
            )
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def table_record(store: EtcdStore, table: str) -> TableRecord | None:
    item = store.get(store.keys.table_checkpoint("cf1", table))
    return None if item is None else TableRecord.from_dict(item.json())


def changefeed_on_c1(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_uri: str,
    db: str,
    nodes: Callable[..., Node],
    spark: Any,
) -> Node:
    """Four filled tables, a changefeed over them, and capture c1 (also the owner)."""
    fill(source_db, db)
    config = changefeed_config(source_db.uri, sink_uri, [f"{db}.*"], chunk_size=100)
    ChangefeedStore(store).create(config)
    first = nodes("c1", spark)
    first.lead(store)
    return first


def on_one_reader(store: EtcdStore, source_db: MariaDBServer, first: Node) -> SharedStream:
    """c1's stream once every table runs there, has joined the stream after its snapshot,
    and is held by its main reader (the snapshot's catch-up readers merged), caught up.

    Found by a full run: tasks say run before the snapshots end, so waiting for them
    and for no catch-up reader could pass while two tables were still copying; they
    then joined behind the stream and opened readers the test took for the move's."""
    wait_for(lambda: len(running_on(store, "cf1")) == 4, 20, "every table to run on c1")
    wait_for(lambda: "cf1" in first.processor.streams(), 60, "c1's stream")
    stream = first.processor.streams()["cf1"][0]

    def one_reader() -> bool:
        main = stream.main
        return (
            main is not None
            and len(main.held.tables) == len(TABLES)
            and stream.catchup is None
            and not stream.waiting
        )

    wait_for(one_reader, 90, "every table held by c1's main reader")
    caught_up(store, source_db)
    return stream


class DumpSampler(threading.Thread):
    """The source's binlog dump threads, every 0.2 s, with the number of live captures."""

    def __init__(self, server: MariaDBServer) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.captures = 1
        self.halt = threading.Event()
        self.over: list[tuple[int, int]] = []

    def run(self) -> None:
        while not self.halt.wait(0.2):
            captures = self.captures
            count = dumps(self.server)
            if count > 2 * captures + 1:
                self.over.append((count, captures))


def test_tables_move_in_and_out_while_the_others_stay_on_one_reader(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    nodes: Callable[..., Node],
    spark: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # which table started where and why each reader opened, printed should it fail
    caplog.set_level(logging.INFO, logger="processor")
    caplog.set_level(logging.INFO, logger="owner")
    db = source_database
    sink_uri = sink_db.uri.rstrip("/") + "/?worker-count=2"
    first = changefeed_on_c1(store, source_db, sink_uri, db, nodes, spark)
    writer = Writer(source_db, db)
    sampler = DumpSampler(source_db)
    writer.start()
    try:
        stream = on_one_reader(store, source_db, first)
        opened = stream.readers_opened
        sampler.start()
        sampler.captures = 2
        second = nodes("c2", spark)
        wait_for(lambda: "c2" in running_on(store, "cf1").values(), 30, "tables to move to c2")
        caught_up(store, source_db)
        assert stream.readers_opened == opened, "a table leaving opened a reader"
        merges = stream.merges
        second.kill()
        wait_for(
            lambda: (
                set(running_on(store, "cf1").values()) == {"c1"}
                and len(running_on(store, "cf1")) == 4
            ),
            30,
            "c2's tables to come back to c1",
        )
        caught_up(store, source_db)
        sampler.captures = 1
    finally:
        writer.halt.set()
        writer.join()
        sampler.halt.set()
    assert writer.error is None, writer.error
    assert writer.statements > 50
    caught_up(store, source_db)
    wait_for(lambda: stream.catchup is None, 30, "the tables that came back to merge")
    try:
        assert status(store).state is ChangefeedState.NORMAL
        report = diff(source_db, sink_db, db)
        assert report.equal, report
        assert checksums(sink_db, db, TABLES) == checksums(source_db, db, TABLES)
        assert not sampler.over, f"binlog dumps (count, live captures): {sampler.over}"
        assert first.processor.streams()["cf1"] == [stream]
        assert 1 <= stream.readers_opened - opened <= 2, "the tables that came back"
        assert stream.merges > merges, "the catch-up reader never merged"
        assert stream.main is not None and stream.main.puller.reconnects == 0
        wait_for(lambda: dumps(source_db) <= 3, 15, "c2's binlog dumps to end")
    finally:
        conn = sink_db.connect()
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        conn.close()


def test_a_table_whose_task_moved_on_is_not_started_again_from_a_stale_view_of_the_tasks(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    nodes: Callable[..., Node],
    spark: Any,
) -> None:
    """The owner moves a table away; the table's reader finds out first (etcd refuses its
    record) while the processor's view of the tasks still shows the old one, as when a
    pass reads the tasks just before the move lands. The processor must not start the
    table again from that view: a new pipeline would open a catch-up reader from its
    checkpoint for a table that is leaving (CI saw the reader count go up by one)."""
    db = source_database
    first = changefeed_on_c1(store, source_db, sink_db.uri, db, nodes, spark)
    writer = Writer(source_db, db)
    writer.start()
    try:
        stream = on_one_reader(store, source_db, first)
        assert first.owner is not None
        first.owner.stop()  # from here the test alone writes tasks
        processor = first.processor
        stale = processor._read_tasks()
        processor._read_tasks = lambda: stale  # type: ignore[method-assign]
        opened = stream.readers_opened
        table = f"{db}.t0"
        store.put(store.keys.task("cf1", table), TableTask("c1", TaskState.STOP).to_dict())
        wait_for(
            lambda: ("cf1", table) not in processor.tables(),
            15,
            "t0's reader to find its task moved on (its record refused)",
        )
        time.sleep(1.0)  # five passes on the stale view
        assert ("cf1", table) not in processor.tables(), "started again from a stale view"
        assert stream.readers_opened == opened
        del processor._read_tasks  # the view catches up: the stop is answered
        wait_for(
            lambda: (
                (record := table_record(store, table)) is not None
                and record.state is TableState.STOPPED
            ),
            15,
            "t0's stop to be answered",
        )
    finally:
        writer.halt.set()
        writer.join()
    assert writer.error is None, writer.error
