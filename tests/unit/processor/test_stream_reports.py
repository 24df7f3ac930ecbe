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
