"""The shared stream on real servers: tables joining while its reader stands at the
barrier, and transactions handed to the sink whole.

A reader stalled at the barrier has already read the transaction it holds
back (rows come out of the puller at commit), decoding only the tables it
held then. A table taken in at that moment, from a start before that
transaction, would miss its rows in it: the chaos suite lost updates this
way when the owner died (the barrier stood still) and the dead capture's
tables joined the others. Here the barrier is a key the test moves by hand.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence

import pytest
from testkit import position_now, wait_for

from cdc.changefeed import Barrier, BarrierKind, TableTask
from cdc.config import load_changefeed_config
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.metrics import TableMetrics
from cdc.model.events import DdlEvent, RowChange
from cdc.model.gtid import Flavor
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.playground.etcd import EtcdServer
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.base import Sink
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, detect
from cdc.store import EtcdStore
from processor import shared_stream
from processor.barrier_view import BarrierView
from processor.shared_stream import SharedStream, StreamOptions
from processor.streamed_table import StreamedTable
from processor.table_records import RecordWriter, TaskGuard

pytestmark = pytest.mark.integration

CF = "cf-joins"
#: A report every 0.2 s: the tests wait for reports.
FAST_REPORTS = StreamOptions(0.2)


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


def table_state(
    store: EtcdStore, db: str, name: str, schema: TableSchema, floor: Position
) -> StreamedTable:
    """A table of the test's changefeed with its task, starting after ``floor``."""
    key = store.keys.task(CF, f"{db}.{name}")
    store.put(key, TableTask("c1").to_dict())
    item = store.get(key)
    assert item is not None
    return StreamedTable(
        TableName(db, name),
        schema,
        None,
        floor=floor,
        records=RecordWriter(store, CF, f"{db}.{name}", "c1", TaskGuard(item.mod_revision)),
        metrics=TableMetrics(CF, f"{db}.{name}"),
        events=EventFilter([], True),
        flavor=Flavor.MARIADB,
        case_sensitive=True,
        log=get_logger(__name__, table=name),
    )


def open_stream(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_uri: str,
    db: str,
    tables: Sequence[str],
    options: StreamOptions = FAST_REPORTS,
) -> tuple[SharedStream, BarrierView, ServerInfo, dict[str, TableSchema]]:
    """The changefeed's stream on this capture over ``db``, its barrier view (the test
    moves the barrier key by hand), the source's flavour and the tables' schemas."""
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": source_db.uri,
            "sink_uri": sink_uri,
            "rules": [f"{db}.*"],
        },
    )
    source = connect(config.source_uri)
    info = detect(source)
    schemas = {t: load_table_schema(source, TableName(db, t)) for t in tables}
    source.close()
    view = BarrierView(store, CF)
    stream = SharedStream(store, config, view, lambda: True, options, capture_id="c1")
    return stream, view, info, schemas


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
    stream, view, info, schemas = open_stream(store, source_db, sink_db.uri, db, ("a", "b"))
    start = position_now(source_db)
    store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, start).to_dict())

    def table(name: str) -> StreamedTable:
        return table_state(store, db, name, schemas[name], start)

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


class _Calls(Sink):
    """Records each ``write_rows`` call's rows by position (the sink the stream opens)."""

    def __init__(self) -> None:
        self.calls: list[Counter[tuple[str, int]]] = []

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        self.calls.append(Counter(c.position.key()[:2] for c in changes))

    def apply_ddl(self, ddl: DdlEvent) -> None:
        raise AssertionError("the stream applies no DDL")

    def flush(self) -> Position | None:
        return None

    @property
    def flushed(self) -> Position | None:
        return None

    def close(self) -> None:
        pass


def test_a_transaction_goes_to_the_sink_in_one_call(
    store: EtcdStore,
    source_db: MariaDBServer,
    source_database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever its size, a transaction's rows are handed in by one ``write_rows`` call:
    the file sink takes a table's position as complete once its rows are in, and a flush
    asked by another reader (or a timed one) must not find half a transaction there."""
    db = source_database
    execute(
        source_db,
        f"CREATE DATABASE IF NOT EXISTS `{db}`",
        f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)",
    )
    config = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": source_db.uri,
            "sink_uri": "blackhole://",
            "rules": [f"{db}.*"],
        },
    )
    source = connect(config.source_uri)
    info = detect(source)
    schema = load_table_schema(source, TableName(db, "a"))
    source.close()
    sink = _Calls()
    monkeypatch.setattr(shared_stream, "open_sink", lambda *a, **k: sink)
    start = position_now(source_db)
    store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, start).to_dict())
    view = BarrierView(store, CF)
    stream = SharedStream(store, config, view, lambda: True, StreamOptions(0.2), capture_id="c1")
    key = store.keys.task(CF, f"{db}.a")
    store.put(key, TableTask("c1").to_dict())
    item = store.get(key)
    assert item is not None
    state = StreamedTable(
        TableName(db, "a"),
        schema,
        None,
        floor=start,
        records=RecordWriter(store, CF, f"{db}.a", "c1", TaskGuard(item.mod_revision)),
        metrics=TableMetrics(CF, f"{db}.a"),
        events=EventFilter([], True),
        flavor=Flavor.MARIADB,
        case_sensitive=True,
        log=get_logger(__name__, table="a"),
    )
    values = ", ".join(f"({i}, {i})" for i in range(1, 2501))
    try:
        stream.join(state, start, info)
        execute(source_db, f"INSERT INTO `{db}`.a VALUES {values}")
        execute(source_db, f"UPDATE `{db}`.a SET v = -v WHERE id <= 1200")
        end = position_now(source_db)
        store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, end).to_dict())
        wait_for(
            lambda: state.reported is not None and state.reported.key() >= end.key(),
            20,
            f"the table to report {end}",
        )
        sizes = sorted(n for call in sink.calls for n in call.values())
        assert sizes == [1200, 2500]
    finally:
        stream.leave(state, report=False)
        stream.close()
        view.close()


def test_a_joiner_the_reading_thread_passed_before_a_stall_is_passed_on_and_reports(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
) -> None:
    """A table routed to a reader that reads ahead waits for the reading thread to stop
    at a boundary; if the reader stalls at the barrier first (its reading thread already
    past the table's start), the table goes to a catch-up reader at once, which reports
    it at the barrier: else the barrier would wait for a table nobody reads."""
    db = source_database
    for server in (source_db, sink_db):
        execute(
            server,
            f"CREATE DATABASE IF NOT EXISTS `{db}`",
            f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)",
            f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v INT)",
        )
    stream, view, info, schemas = open_stream(store, source_db, sink_db.uri, db, ("a", "b"))
    start = position_now(source_db)
    store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, start).to_dict())

    def table(name: str) -> StreamedTable:
        return table_state(store, db, name, schemas[name], start)

    a, b = table("a"), table("b")
    try:
        stream.join(a, start, info)
        main = stream.main
        assert main is not None
        wait_for(lambda: a.reported == start, 10, "a to report the start")
        # b joins where the reading thread stands; a transaction beyond the barrier
        # follows at once, so the reader stalls on it before it could take b
        stream.join(b, start, info)
        execute(
            source_db,
            "START TRANSACTION",
            *(f"INSERT INTO `{db}`.a VALUES ({i}, {i})" for i in range(1, 4)),
            *(f"INSERT INTO `{db}`.b VALUES ({i}, {i})" for i in range(1, 4)),
        )
        wait_for(lambda: b.reported == start, 10, "b to report the barrier's limit")
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


def test_a_table_joining_behind_a_stalled_catch_up_reader_is_not_left_waiting(
    store: EtcdStore,
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
) -> None:
    """Main and catch-up readers both stand at the barrier; a third table joins from before
    the catch-up reader's position. It cannot wait for the catch-up reader to merge (that
    waits for the barrier, which waits for the table): the catch-up reader hands its tables
    back and a new one reads from the lowest start, reporting them all at the barrier."""
    db = source_database
    for server in (source_db, sink_db):
        execute(
            server,
            f"CREATE DATABASE IF NOT EXISTS `{db}`",
            *(f"CREATE TABLE `{db}`.{t} (id INT PRIMARY KEY, v INT)" for t in ("a", "c", "j")),
        )
    stream, view, info, schemas = open_stream(store, source_db, sink_db.uri, db, ("a", "c", "j"))

    def txn(first: int, *names: str) -> Position:
        execute(
            source_db,
            "START TRANSACTION",
            *(f"INSERT INTO `{db}`.{t} VALUES ({first + i}, {i})" for t in names for i in range(3)),
        )
        return position_now(source_db)

    start = position_now(source_db)
    limit = txn(0, "c", "j")  # T1
    ahead = txn(10, "c", "j")  # T2, beyond the barrier
    store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, limit).to_dict())

    def table(name: str, floor: Position) -> StreamedTable:
        return table_state(store, db, name, schemas[name], floor)

    a, c, j = table("a", ahead), table("c", start), table("j", start)
    try:
        stream.join(a, ahead, info)  # the main reader, stalled at once (it starts past it)
        wait_for(lambda: stream.main is not None and a.reported is not None, 10, "a to report")
        stream.join(c, start, info)  # a catch-up reader: T1, then stalled on T2
        wait_for(lambda: c.reported == limit, 10, "c to report the barrier's limit")
        stream.join(j, start, info)  # behind both readers
        wait_for(lambda: j.reported == limit, 15, "j to report the barrier's limit")
        end = txn(20, "a", "c", "j")
        store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, end).to_dict())
        wait_for(
            lambda: all(
                t.reported is not None and t.reported.key() >= end.key() for t in (a, c, j)
            ),
            20,
            f"every table to report {end}",
        )
        for name in ("a", "c", "j"):
            assert rows(sink_db, f"`{db}`.{name}") == rows(source_db, f"`{db}`.{name}")
    finally:
        for state in (a, c, j):
            stream.leave(state, report=False)
        stream.close()
        view.close()


def test_a_reader_that_caught_up_reports_at_the_next_heartbeat(
    store: EtcdStore, source_db: MariaDBServer, source_database: str
) -> None:
    """With a checkpoint interval of ten minutes, only the source's heartbeat (the reader
    stands at the binlog's end) can make the table report the write in time: what a user
    waits for after a backlog, or after one write to a quiet source."""
    db = source_database
    execute(
        source_db,
        f"CREATE DATABASE IF NOT EXISTS `{db}`",
        f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, v INT)",
    )
    stream, view, info, schemas = open_stream(
        store, source_db, "blackhole://", db, ("a",), StreamOptions(600.0)
    )
    start = position_now(source_db)
    state = table_state(store, db, "a", schemas["a"], start)
    try:
        stream.join(state, start, info)
        execute(source_db, f"INSERT INTO `{db}`.a VALUES (1, 1), (2, 2)")
        end = position_now(source_db)
        store.put(store.keys.barrier(CF), Barrier(BarrierKind.RESOLVED, end).to_dict())
        wait_for(
            lambda: state.reported is not None and state.reported.key() >= end.key(),
            20,
            f"the table to report {end} before its checkpoint interval",
        )
    finally:
        stream.leave(state, report=False)
        stream.close()
        view.close()
