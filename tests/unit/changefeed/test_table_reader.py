"""The owner's table reader: one decode per change of a key, schemas and positions reused,
and the same entries as a fresh read."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.changefeed import (
    TableEntry,
    TableReader,
    TableRecord,
    TableState,
    TableTask,
    read_tables,
)
from cdc.changefeed import tables as tables_module
from cdc.changefeed.stream_progress import StreamProgress
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.store import Changes, KeySpace, Versioned
from cdc.store.codec import encode

CF = "cf"


class Keys:
    """Key-value pairs as a mirror holds them: a ``KeyReader`` without a server; with
    ``journal``, one that journals its changes as a mirror does (``changes_since``)."""

    def __init__(self, *, journal: bool = False) -> None:
        self.keys = KeySpace("/cdc/test")
        self.items: dict[str, Versioned] = {}
        self.revision = 0
        self.journal: list[str] | None = [] if journal else None

    def put(self, key: object, value: dict[str, Any]) -> None:
        self.revision += 1
        k = str(key)
        held = self.items.get(k)
        created = held.create_revision if held else self.revision
        self.items[k] = Versioned(k, encode(value), self.revision, created)
        if self.journal is not None:
            self.journal.append(k)

    def delete(self, key: object) -> None:
        self.revision += 1
        del self.items[str(key)]
        if self.journal is not None:
            self.journal.append(str(key))

    def changes_since(self, prefix: str, position: int) -> Changes | None:
        if self.journal is None:
            return None
        through = self.revision if self.through is None else self.through
        return Changes(self.journal[position:], len(self.journal), through)

    def journal_position(self, prefix: str) -> int | None:
        return None if self.journal is None else len(self.journal)

    def get(self, key: object) -> Versioned | None:
        return self.items.get(str(key))

    def get_prefix(self, prefix: str) -> list[Versioned]:
        return [v for k, v in sorted(self.items.items()) if k.startswith(prefix)]

    through: int | None = None

    def applied_through(self, prefix: str) -> int | None:
        return self.through


def schema(table: str, columns: int = 2) -> TableSchema:
    cols = tuple(Column(f"c{i}", "int", "int(11)", nullable=i > 0) for i in range(columns))
    return TableSchema(TableName("db", table), cols, ("c0",))


def record(offset: int, shape: TableSchema) -> dict[str, Any]:
    return TableRecord("c1", TableState.RUNNING, 1, Position("b.000001", offset), shape).to_dict()


def test_each_change_is_decoded_once_and_an_unchanged_schema_is_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Keys()
    for name in ("a", "b"):
        store.put(store.keys.task(CF, f"db.{name}"), TableTask("c1").to_dict())
        store.put(store.keys.table_checkpoint(CF, f"db.{name}"), record(100, schema(name)))
    decoded: list[str] = []
    real = TableSchema.from_dict

    def counting(data: Any) -> TableSchema:
        decoded.append(data["name"]["table"] if isinstance(data.get("name"), dict) else "?")
        return real(data)

    monkeypatch.setattr(tables_module.TableSchema, "from_dict", staticmethod(counting))
    reader = TableReader(store, CF)
    first = reader.read()
    assert len(decoded) == 2
    assert reader.read() == first and len(decoded) == 2  # nothing changed: nothing decoded
    store.put(store.keys.table_checkpoint(CF, "db.a"), record(200, schema("a")))
    second = reader.read()
    assert len(decoded) == 2  # a new checkpoint, the same schema: not decoded again
    assert second["db.a"].checkpoint == Position("b.000001", 200)
    assert second["db.a"].record is not None and second["db.a"].record.schema == schema("a")
    store.put(store.keys.table_checkpoint(CF, "db.a"), record(300, schema("a", 3)))
    third = reader.read()
    assert len(decoded) == 3
    assert third["db.a"].record is not None and third["db.a"].record.schema == schema("a", 3)
    assert third == read_tables(store, CF)


def test_tables_that_go_leave_the_reader() -> None:
    store = Keys()
    store.put(store.keys.task(CF, "db.a"), TableTask("c1").to_dict())
    store.put(store.keys.task(CF, "db.b"), TableTask("c2").to_dict())
    reader = TableReader(store, CF)
    assert list(reader.read()) == ["db.a", "db.b"]
    store.delete(store.keys.task(CF, "db.b"))
    assert list(reader.read()) == ["db.a"]
    store.put(store.keys.table_checkpoint(CF, "db.c"), record(5, schema("c")))
    entries = reader.read()
    assert list(entries) == ["db.a", "db.c"] and entries["db.c"].task is None


@pytest.mark.parametrize("journal", [False, True])
def test_a_table_being_removed_counts_only_for_its_removal(journal: bool) -> None:
    """Its stopped record's checkpoint holds no changefeed checkpoint back, its error
    fails nothing; the owner finds it among ``removing``."""
    store = Keys(journal=journal)
    reader = TableReader(store, CF)
    for name, offset in (("a", 500), ("gone", 100)):
        store.put(store.keys.task(CF, f"db.{name}"), TableTask("c1").to_dict())
        store.put(store.keys.table_checkpoint(CF, f"db.{name}"), record(offset, schema(name)))
    reader.read()
    assert reader.lowest_checkpoint() == Position("b.000001", 100)
    store.put(store.keys.task(CF, "db.gone"), TableTask("c1").removal().to_dict())
    entries = reader.read()
    assert list(reader.removing) == ["db.gone"] and entries["db.gone"].task is not None
    assert reader.lowest_checkpoint() == Position("b.000001", 500)
    failed = TableRecord("c1", TableState.ERROR, store.revision, None, schema("gone"), "boom")
    store.put(store.keys.table_checkpoint(CF, "db.gone"), failed.to_dict())
    reader.read()
    assert reader.failed == {} and list(reader.removing) == ["db.gone"]
    store.delete(store.keys.task(CF, "db.gone"))
    store.delete(store.keys.table_checkpoint(CF, "db.gone"))
    reader.read()
    assert reader.removing == {} and reader.lowest_checkpoint() == Position("b.000001", 500)


# --- stream progress: a reader's one key carries the tables whose records name it --------


def _progress_setup(
    *, reader: str | None = "r1", state: TableState = TableState.RUNNING
) -> tuple[Keys, Position]:
    store = Keys()
    store.put(store.keys.task(CF, "db.a"), TableTask("c1").to_dict())
    task_revision = store.revision
    rec = TableRecord(
        "c1", state, task_revision, Position("b.000001", 100), schema("a"), reader=reader
    )
    store.put(store.keys.table_checkpoint(CF, "db.a"), rec.to_dict())
    recorded_at = store.revision
    later = Position("b.000001", 900)
    store.put(
        store.keys.stream_progress(CF, "c1", "r1"),
        StreamProgress(later, records_through=recorded_at, updated_at=5e9).to_dict(),
    )
    return store, later


def test_a_running_record_naming_its_reader_is_carried_by_the_readers_progress() -> None:
    store, later = _progress_setup()
    entry = read_tables(store, CF)["db.a"]
    assert entry.checkpoint == later
    assert entry.updated_at == 5e9


@pytest.mark.parametrize(
    "change",
    ["no reader", "stopped", "task moved", "task rewritten", "other reader", "records behind"],
)
def test_progress_does_not_carry_a_table_it_may_not_speak_for(change: str) -> None:
    store, later = _progress_setup(
        reader=None if change == "no reader" else "r1",
        state=TableState.STOPPED if change == "stopped" else TableState.RUNNING,
    )
    if change == "task moved":
        store.put(store.keys.task(CF, "db.a"), TableTask("c2").to_dict())
    if change == "task rewritten":
        store.put(store.keys.task(CF, "db.a"), TableTask("c1").to_dict())
    if change == "other reader":
        store.items.pop(str(store.keys.stream_progress(CF, "c1", "r1")))
        store.put(
            store.keys.stream_progress(CF, "c1", "r2"), StreamProgress(later, 0).to_dict()
        )
    if change == "records behind":
        # the mirror of records has not applied the reader's last record write yet
        store.through = store.revision - 2
    entry = read_tables(store, CF)["db.a"]
    assert entry.checkpoint == Position("b.000001", 100)


def test_progress_never_takes_a_checkpoint_back() -> None:
    store, _ = _progress_setup()
    store.put(
        store.keys.stream_progress(CF, "c1", "r1"),
        StreamProgress(Position("b.000001", 50), records_through=0).to_dict(),
    )
    assert read_tables(store, CF)["db.a"].checkpoint == Position("b.000001", 100)


# --- reading what changed, and what the owner asks of all tables ---------------------------


def _table_keys(store: Keys, n: int, capture: str, reader: str | None, offset: int) -> None:
    table = f"db.t{n}"
    store.put(store.keys.task(CF, table), TableTask(capture).to_dict())
    revision = store.revision
    rec = TableRecord(
        capture,
        TableState.RUNNING,
        revision,
        Position("b.000001", offset),
        schema(f"t{n}"),
        reader=reader,
    )
    store.put(store.keys.table_checkpoint(CF, table), rec.to_dict())


def _brute_lowest(entries: dict[str, TableEntry]) -> Position | None:
    positions = [e.checkpoint for e in entries.values() if e.task is not None]
    if not positions or any(p is None for p in positions):
        return None
    return min((p for p in positions if p is not None), key=Position.key)


def test_reading_what_changed_gives_what_a_whole_read_gives() -> None:
    store = Keys(journal=True)
    for n in range(30):
        _table_keys(store, n, f"c{n % 3}", f"r{n % 3}" if n % 4 else None, 100 + 7 * n)
    reader = TableReader(store, CF)
    reader.read()
    steps = [
        lambda: store.put(
            store.keys.stream_progress(CF, "c1", "r1"),
            StreamProgress(Position("b.000001", 500), store.revision).to_dict(),
        ),
        lambda: _table_keys(store, 4, "c2", "r2", 50),
        lambda: store.delete(store.keys.task(CF, "db.t7")),
        lambda: store.delete(store.keys.table_checkpoint(CF, "db.t7")),
        lambda: _table_keys(store, 99, "c0", "r0", 20),
        lambda: store.put(
            store.keys.stream_progress(CF, "c0", "r0"),
            StreamProgress(Position("b.000001", 900), store.revision).to_dict(),
        ),
        lambda: store.put(
            store.keys.table_checkpoint(CF, "db.t5"),
            TableRecord("c2", TableState.ERROR, 1, Position("b.000001", 135)).to_dict(),
        ),
        lambda: store.delete(store.keys.stream_progress(CF, "c1", "r1")),
    ]
    for step in steps:
        step()
        fresh = TableReader(store, CF)
        whole = fresh.read()
        changed = reader.read()
        assert changed == whole and list(changed) == list(whole)
        assert [e.checkpoint for e in changed.values()] == [e.checkpoint for e in whole.values()]
        assert reader.lowest_checkpoint() == fresh.lowest_checkpoint() == _brute_lowest(whole)
        assert set(reader.failed) == set(fresh.failed) == {t for t, e in whole.items() if e.failed}


def test_a_read_with_nothing_changed_returns_the_same_entries_and_version() -> None:
    store = Keys(journal=True)
    _table_keys(store, 1, "c1", "r1", 100)
    reader = TableReader(store, CF)
    first = reader.read()
    version = reader.version
    store.put(
        store.keys.stream_progress(CF, "c1", "r1"),
        StreamProgress(Position("b.000001", 800), store.revision).to_dict(),
    )
    again = reader.read()
    assert again is first and reader.version == version
    assert reader.lowest_checkpoint() == Position("b.000001", 800)
    _table_keys(store, 1, "c1", "r1", 300)  # a new task revision: the scheduler's view moved
    assert reader.read() is not first and reader.version > version


@pytest.mark.parametrize("seed", range(5))
def test_the_lowest_checkpoint_per_reader_group_is_the_lowest_of_the_tables(seed: int) -> None:
    import random

    rng = random.Random(seed)
    store = Keys(journal=True)
    for n in range(40):
        capture = rng.choice(["c1", "c2"])
        reader = rng.choice([None, "r1", "r2"])
        _table_keys(store, n, capture, reader, rng.randint(1, 1000))
    for capture in ("c1", "c2"):
        for reader in ("r1", "r2"):
            through = rng.choice([0, store.revision, store.revision + 5])
            store.put(
                store.keys.stream_progress(CF, capture, reader),
                StreamProgress(Position("b.000001", rng.randint(1, 1000)), through).to_dict(),
            )
    table_reader = TableReader(store, CF)
    entries = table_reader.read()
    assert table_reader.lowest_checkpoint() == _brute_lowest(entries)
    recorded = [e.record.checkpoint for e in entries.values() if e.record is not None]
    assert table_reader.lowest_recorded() == min(
        (p for p in recorded if p is not None), key=Position.key
    )
