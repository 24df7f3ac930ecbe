"""Code that reads ``str(TableName)`` back: the owner's DDL effects and the etcd keys.

Each once split the string at its first dot, so a dotted database's tables were
followed under the wrong name or not at all.
"""

from __future__ import annotations

import pytest

from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.schema.ddl import parse_ddl
from cdc.store.keys import KeySpace, SnapshotChunkKey, TaskKey, parse_chunk_id
from owner.ddl import NEW, TableEffects, table_effects

AT = Position("binlog.000001", 100)
SHOP = "shop-eu.v2"


def key(schema: str, table: str) -> str:
    return str(TableName(schema, table))


def matches(schema: str, table: str) -> bool:
    return schema in (SHOP, "shop-eu") and not table.startswith("tmp")


def effects(statement: str, scheduled: set[str], match=matches) -> TableEffects:
    return table_effects(parse_ddl(statement, SHOP, AT), scheduled, match)


T = key(SHOP, "it's a.table")
OTHER = key("shop-eu", "v2.it's a.table")


@pytest.mark.parametrize(
    ("statement", "scheduled", "dropped", "created"),
    [
        ("CREATE TABLE `new.t` (id INT PRIMARY KEY)", set(), (), {key(SHOP, "new.t"): NEW}),
        ("CREATE TABLE `tmp.t` (id INT PRIMARY KEY)", set(), (), {}),
        (
            "RENAME TABLE `it's a.table` TO `b.c`",
            {T},
            (T,),
            {key(SHOP, "b.c"): T},
        ),
        # Only the dotted database's tables go, not those of `shop-eu` whose names
        # once joined to the same string.
        ("DROP DATABASE `shop-eu.v2`", {T, OTHER}, (T,), {}),
        ("DROP DATABASE `shop-eu`", {T, OTHER}, (OTHER,), {}),
        ("ALTER TABLE `it's a.table` ADD COLUMN `naïve.col` INT", {T}, (), {}),
    ],
)
def test_table_effects_of_dotted_names(
    statement: str, scheduled: set[str], dropped: tuple[str, ...], created: dict[str, str]
) -> None:
    result = effects(statement, scheduled)
    assert (result.dropped, dict(result.created)) == (dropped, created)


def test_a_table_outside_the_filter_is_dropped_not_matched_by_its_first_dot() -> None:
    # The filter is asked with the real parts: only `shop-eu.v2` is in it.
    result = effects("ALTER TABLE t ADD COLUMN c INT", {T, OTHER}, lambda s, _t: s == SHOP)
    assert result.dropped == (OTHER,)


@pytest.mark.parametrize(
    "name",
    [
        TableName(SHOP, "it's a.table"),
        TableName("a`b", "c.d"),
        TableName("商店 x", "表.y"),
        TableName("shop", "orders"),
    ],
)
def test_table_keys_and_chunk_ids_round_trip(name: TableName) -> None:
    keys = KeySpace("/cdc/t")
    task = keys.task("cf", str(name))
    parsed = keys.parse(str(task))
    assert isinstance(parsed, TaskKey) and TableName.parse(parsed.table) == name
    chunk = keys.snapshot_chunk("cf", str(name), 4)
    again = keys.parse(str(chunk))
    assert isinstance(again, SnapshotChunkKey) and again == chunk
    assert parse_chunk_id(chunk.chunk_id) == (name.schema, name.table, 4)
    # The range of one table's chunks holds no other table's.
    assert not str(keys.snapshot_chunk("cf", key("x", "y"), 0)).startswith(
        keys.prefix_of(SnapshotChunkKey, "cf", str(name))
    )
