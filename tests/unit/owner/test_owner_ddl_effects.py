"""How a DDL changes the set of captured tables (owner/ddl.py), a pure function."""

from __future__ import annotations

import pytest

from cdc.changefeed import TableRecord, TableState
from cdc.config import load_changefeed_config
from cdc.logs import get_logger
from cdc.model.position import Position
from cdc.schema.ddl import parse_ddl
from owner.ddl import NEW, OUTSIDE, TableEffects, anchored_tables, new_tasks, table_effects

AT = Position("binlog.000001", 100)


def matches(schema: str, table: str) -> bool:
    return schema == "shop" and not table.startswith("tmp")


def effects(statement: str, scheduled: set[str], schema: str = "shop") -> TableEffects:
    return table_effects(parse_ddl(statement, schema, AT), scheduled, matches)


@pytest.mark.parametrize(
    ("statement", "scheduled", "dropped", "created"),
    [
        ("CREATE TABLE t (id INT PRIMARY KEY)", set(), (), {"shop.t": NEW}),
        ("CREATE TABLE tmp1 (id INT PRIMARY KEY)", set(), (), {}),
        ("CREATE TABLE other.t (id INT PRIMARY KEY)", set(), (), {}),
        ("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)", {"shop.t"}, (), {}),
        ("CREATE TABLE d LIKE a", {"shop.a"}, (), {"shop.d": NEW}),
        ("DROP TABLE a, b", {"shop.a", "shop.b", "shop.c"}, ("shop.a", "shop.b"), {}),
        ("RENAME TABLE a TO b", {"shop.a"}, ("shop.a",), {"shop.b": "shop.a"}),
        ("RENAME TABLE a TO tmp_a", {"shop.a"}, ("shop.a",), {}),
        ("RENAME TABLE tmp_x TO x", set(), (), {"shop.x": OUTSIDE}),
        ("ALTER TABLE a RENAME TO b", {"shop.a"}, ("shop.a",), {"shop.b": "shop.a"}),
        ("ALTER TABLE a ADD COLUMN c INT", {"shop.a"}, (), {}),
        ("TRUNCATE TABLE a", {"shop.a"}, (), {}),
        ("DROP DATABASE shop", {"shop.a", "shop.b"}, ("shop.a", "shop.b"), {}),
    ],
)
def test_table_effects(
    statement: str, scheduled: set[str], dropped: tuple[str, ...], created: dict[str, str]
) -> None:
    result = effects(statement, scheduled)
    assert (result.dropped, dict(result.created)) == (dropped, created)


def test_a_swap_through_a_temporary_name_replaces_both_tables() -> None:
    result = effects("RENAME TABLE a TO tmp, b TO a, tmp TO b", {"shop.a", "shop.b"})
    assert result.dropped == ("shop.a", "shop.b")
    assert dict(result.created) == {"shop.a": "shop.b", "shop.b": "shop.a"}


def test_no_effect_is_falsy() -> None:
    assert not effects("ALTER TABLE a ADD INDEX (v)", {"shop.a"})


def _record(snapshot_at: Position | None) -> TableRecord:
    return TableRecord("c1", TableState.RUNNING, 1, AT, snapshot_at=snapshot_at)


@pytest.mark.parametrize(
    ("anchors", "statement", "anchored"),
    [
        ({"shop.a": Position("binlog.000001", 100)}, "TRUNCATE TABLE a", ["shop.a"]),
        ({"shop.a": Position("binlog.000001", 500)}, "ALTER TABLE a ADD c INT", ["shop.a"]),
        ({"shop.a": Position("binlog.000001", 99)}, "TRUNCATE TABLE a", []),
        ({"shop.a": None}, "TRUNCATE TABLE a", []),
        ({}, "TRUNCATE TABLE a", []),
        (
            {"shop.a": Position("binlog.000001", 500), "shop.b": None},
            "RENAME TABLE a TO x, b TO y",
            [],
        ),
    ],
)
def test_a_ddl_at_or_before_a_snapshot_anchor_is_already_downstream(
    anchors: dict[str, Position | None], statement: str, anchored: list[str]
) -> None:
    records = {t: _record(p) for t, p in anchors.items()}
    assert anchored_tables(parse_ddl(statement, "shop", AT), records) == anchored


def test_a_table_renamed_while_its_snapshot_is_unsettled_is_snapshotted_again() -> None:
    ddl = parse_ddl("RENAME TABLE a TO b", "shop", AT)
    found = table_effects(ddl, {"shop.a"}, matches)
    config = load_changefeed_config(
        None, {"changefeed_id": "cf", "source_uri": "mysql://u@h/", "sink_uri": "blackhole://"}
    )
    log = get_logger(__name__)
    settled = new_tasks(ddl, found, {}, config, log)
    assert settled["shop.b"].start == AT
    assert not settled["shop.b"].replace_downstream
    unsettled = new_tasks(ddl, found, {}, config, log, frozenset({"shop.a"}))
    assert unsettled["shop.b"].start is None and unsettled["shop.b"].schema is None
    assert unsettled["shop.b"].replace_downstream
    outside = new_tasks(ddl, table_effects(ddl, set(), matches), {}, config, log)
    assert outside["shop.b"].start is None and not outside["shop.b"].replace_downstream
