"""What a shared stream's report writes (processor/shared_stream.py): the records that must
change and one progress key, and, at a DDL's limit, every record that lags behind it.

A table restarts from its record. Found by review: with records refreshed only every
30 s, the owner could apply a DDL once the readers' progress reached its limit, while a
table's record was still before it; had its capture died then, the table would have
written rows of the old shape into a downstream table that already had the DDL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_parts import CF, SERVER, pos, stream, table

from cdc.changefeed import Barrier, BarrierKind, TableReader, TableRecord, TableTask
from cdc.changefeed.stream_progress import StreamProgress
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.store import Put, Versioned
from cdc.store.codec import encode
from cdc.store.keys import KeySpace
from owner.decisions import BarrierStep, barrier_step
from processor.shared_stream import SharedStream, StreamOptions, _Reader


class Store:
    """The writes a stream makes, kept as a mirror would hold them."""

    keys = KeySpace("/cdc/test")

    def __init__(self) -> None:
        self.items: dict[str, Versioned] = {}
        self.revision = 0

    def _put(self, key: object, value: dict[str, Any]) -> int:
        self.revision += 1
        self.items[str(key)] = Versioned(str(key), encode(value), self.revision, self.revision)
        return self.revision

    def txn_revision(self, conditions: Sequence[object], ops: Sequence[Put]) -> int:
        for op in ops:
            assert isinstance(op.value, dict)
            self._put(op.key, op.value)
        return self.revision

    def put(self, key: object, value: dict[str, Any]) -> int:
        return self._put(key, value)

    def get(self, key: object) -> Versioned | None:
        return self.items.get(str(key))

    def get_prefix(self, prefix: str) -> list[Versioned]:
        return [v for k, v in sorted(self.items.items()) if k.startswith(prefix)]

    def applied_through(self, prefix: str) -> None:
        return None

    def changes_since(self, prefix: str, position: int) -> None:
        return None

    def journal_position(self, prefix: str) -> None:
        return None


class Barriers:
    """A barrier view standing still (the test moves it)."""

    def __init__(self, barrier: Barrier) -> None:
        self.barrier = barrier


class Sink:
    def flush(self) -> None:
        pass


def held_reader(store: Store, barriers: Barriers, tables: int) -> tuple[_Reader, SharedStream]:
    shared = stream(store, barriers, StreamOptions(1.0, 30.0))
    shared._sink = Sink()  # type: ignore[assignment]
    reader = _Reader(shared, "main", pos(100), SERVER)
    for n in range(tables):
        revision = store.put(store.keys.task(CF, f"db.t{n}"), TableTask("c1").to_dict())
        reader.held.add(table(store, f"t{n}", pos(100), revision))
    return reader, shared


def recorded(store: Store, tables: int) -> list[int]:
    out = []
    for n in range(tables):
        item = store.get(store.keys.table_checkpoint(CF, f"db.t{n}"))
        assert item is not None
        checkpoint = TableRecord.from_dict(item.json()).checkpoint
        assert checkpoint is not None
        out.append(checkpoint.offset)
    return out


def test_between_barriers_one_progress_key_carries_the_tables() -> None:
    store = Store()
    barriers = Barriers(Barrier(BarrierKind.RESOLVED, pos(10_000)))
    reader, stream = held_reader(store, barriers, 4)
    reader.boundary = pos(100)
    stream.report(reader)  # the tables join the reader: their records name it
    before = store.revision
    for offset in range(200, 1_000, 200):
        reader.boundary = pos(offset)
        stream.report(reader)
    progress = store.get(reader.progress_key)
    assert progress is not None and StreamProgress.decode(progress).position == pos(800)
    # 4 reports, 4 progress writes, and a refresh of one record at a time (4 tables / 30 s)
    assert store.revision - before == 8
    assert min(recorded(store, 4)) < 800


def test_at_a_ddl_limit_every_record_is_written_before_the_progress_moves_there() -> None:
    store = Store()
    barriers = Barriers(Barrier(BarrierKind.RESOLVED, pos(10_000)))
    reader, stream = held_reader(store, barriers, 4)
    for offset in range(100, 5_000, 200):
        reader.boundary = pos(offset)
        stream.report(reader)
    assert min(recorded(store, 4)) < 4_900
    barriers.barrier = Barrier(BarrierKind.DDL, pos(5_000))
    reader.boundary = pos(5_000)
    stream.report(reader)
    assert recorded(store, 4) == [5_000] * 4
    owner = TableReader(store, CF)  # type: ignore[arg-type]
    owner.read()
    assert owner.lowest_checkpoint() == owner.lowest_recorded() == pos(5_000)
    step = barrier_step(
        owner.lowest_checkpoint(), pos(5_000), is_ddl=True, recorded=owner.lowest_recorded()
    )
    assert step is BarrierStep.APPLY_DDL


def test_the_owner_waits_for_records_a_progress_alone_carried_to_the_limit() -> None:
    """A reader whose view still shows the resolved barrier stands at the same limit
    (the resolved position just before the DDL) without writing the records."""
    store = Store()
    barriers = Barriers(Barrier(BarrierKind.RESOLVED, pos(5_000)))
    reader, stream = held_reader(store, barriers, 4)
    for offset in range(100, 5_001, 200):
        reader.boundary = pos(min(offset, 5_000))
        stream.report(reader)
    reader.boundary = pos(5_000)
    stream.report(reader)
    owner = TableReader(store, CF)  # type: ignore[arg-type]
    owner.read()
    assert owner.lowest_checkpoint() == pos(5_000)
    assert owner.lowest_recorded() is not None and owner.lowest_recorded() < pos(5_000)
    step = barrier_step(
        owner.lowest_checkpoint(), pos(5_000), is_ddl=True, recorded=owner.lowest_recorded()
    )
    assert step is BarrierStep.WAIT


class MarkedSink:
    """A sink whose writes become durable when the test says so (its marks), or at a
    flush; it counts flushes."""

    def __init__(self, *, tells: bool = True) -> None:
        self.tells = tells
        self.written = 0
        self.durable = 0
        self.flushes = 0

    def write_rows(self, rows: object) -> None:
        self.written += 1

    def written_mark(self) -> int | None:
        return self.written if self.tells else None

    def durable_mark(self) -> int | None:
        return self.durable if self.tells else None

    def flush(self) -> None:
        self.flushes += 1
        self.durable = self.written


def marked_reader(
    store: Store, tables: int, sink: MarkedSink
) -> tuple[_Reader, SharedStream, MarkedSink]:
    """A reader whose tables' records already name it (one report), over ``sink``."""
    reader, stream = held_reader(
        store, Barriers(Barrier(BarrierKind.RESOLVED, pos(10_000))), tables
    )
    stream._sink = sink  # type: ignore[assignment]
    reader.boundary = pos(100)
    stream.report(reader)
    return reader, stream, sink


def written_through(reader: _Reader, stream: SharedStream, offsets: range) -> list[int]:
    """The reader hands in rows before each boundary of ``offsets``; the marks after each."""
    marks = []
    for offset in offsets:
        reader._mark = stream.write([])
        marks.append(reader._mark)
        reader.boundary = pos(offset)
        reader._note(pos(offset))
    return marks


def progress_of(store: Store, reader: _Reader) -> Position:
    item = store.get(reader.progress_key)
    assert item is not None
    return StreamProgress.decode(item).position


def test_a_due_report_names_the_newest_boundary_the_sink_has_written_without_a_flush() -> None:
    """Flushing at every report stopped the reader while the downstream emptied its queue;
    the report names what is durable instead, never a boundary with rows still queued."""
    store = Store()
    reader, stream, sink = marked_reader(store, 3, MarkedSink())
    flushes = sink.flushes
    marks = written_through(reader, stream, range(200, 700, 100))
    sink.durable = marks[2]  # the rows before 200, 300 and 400 are written, not those after
    reader._last_report = 0.0
    assert reader._at_boundary() is False
    assert sink.flushes == flushes
    assert progress_of(store, reader) == pos(400)
    assert max(recorded(store, 3)) <= 400
    # Nothing more durable at the next report: it flushes and names where the reader is.
    reader._last_report = 0.0
    reader._at_boundary()
    assert sink.flushes == flushes + 1
    assert progress_of(store, reader) == pos(600)


def test_boundaries_without_rows_between_them_count_once_their_rows_are_written() -> None:
    store = Store()
    reader, stream, sink = marked_reader(store, 2, MarkedSink())
    (mark,) = written_through(reader, stream, range(200, 300, 100))
    for offset in (250, 260, 270):  # transactions of other tables: nothing handed in
        reader.boundary = pos(offset)
        reader._note(pos(offset))
    assert len(reader._noted) == 1
    sink.durable = mark
    assert reader._report_durable()
    assert progress_of(store, reader) == pos(270)


def test_a_record_that_must_change_makes_the_report_flush() -> None:
    """A table that followed a DDL since (its record carries the new schema) must not be
    recorded at a boundary before the DDL: the report flushes and names the current one."""
    store = Store()
    reader, stream, sink = marked_reader(store, 2, MarkedSink())
    marks = written_through(reader, stream, range(200, 500, 100))
    sink.durable = marks[0]
    reader.held.get(TableName("db", "t1")).record_due = True  # type: ignore[union-attr]
    before = store.revision
    assert reader._report_durable() is False
    assert store.revision == before
    reader._last_report = 0.0
    reader._at_boundary()
    assert sink.flushes == 2
    assert progress_of(store, reader) == pos(400)
    assert recorded(store, 2)[1] == 400


def test_at_the_barrier_and_with_a_sink_that_cannot_tell_the_report_flushes() -> None:
    store = Store()
    reader, stream, sink = marked_reader(store, 2, MarkedSink())
    marks = written_through(reader, stream, range(200, 500, 100))
    sink.durable = marks[1]
    stream.barrier.barrier = Barrier(BarrierKind.DDL, pos(400))  # type: ignore[attr-defined]
    assert reader._report_durable() is False
    blind_store = Store()
    blind, blind_stream, _ = marked_reader(blind_store, 2, MarkedSink(tells=False))
    written_through(blind, blind_stream, range(200, 500, 100))
    assert blind._report_durable() is False
    assert progress_of(blind_store, blind) == pos(100)
