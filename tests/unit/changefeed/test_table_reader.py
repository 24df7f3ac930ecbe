"""The owner's table reader: one decode per change of a key, schemas and positions reused,
and the same entries as a fresh read."""

from __future__ import annotations

from typing import Any

import pytest

from cdc.changefeed import TableReader, TableRecord, TableState, TableTask, read_tables
from cdc.changefeed import tables as tables_module
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
