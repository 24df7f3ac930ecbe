"""The owner's table reader: one decode per change of a key, schemas and positions reused,
and the same entries as a fresh read."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.changefeed import TableReader, TableRecord, TableState, TableTask, read_tables
from cdc.changefeed import tables as tables_module
from cdc.changefeed.stream_progress import StreamProgress
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.store import KeySpace, Versioned
from cdc.store.codec import encode

CF = "cf"


class Keys:
    """Key-value pairs as a mirror holds them: a ``KeyReader`` without a server."""

    def __init__(self) -> None:
        self.keys = KeySpace("/cdc/test")
        self.items: dict[str, Versioned] = {}
        self.revision = 0

    def put(self, key: object, value: dict[str, Any]) -> None:
        self.revision += 1
        k = str(key)
        held = self.items.get(k)
        created = held.create_revision if held else self.revision
        self.items[k] = Versioned(k, encode(value), self.revision, created)

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
    del store.items[str(store.keys.task(CF, "db.b"))]
    assert list(reader.read()) == ["db.a"]
    store.put(store.keys.table_checkpoint(CF, "db.c"), record(5, schema("c")))
    entries = reader.read()
    assert list(entries) == ["db.a", "db.c"] and entries["db.c"].task is None


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
