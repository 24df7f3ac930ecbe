"""Reports as cdcctl prints them, and how tables line up."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from cdc.diff.report import (
    DISPLAY_LIMIT,
    DiffKind,
    DiffReport,
    RowDiff,
    TableReport,
    TableStatus,
    display_value,
)
from cdc.diff.schemas import CompareMode, pair_tables
from cdc.model.schema import Column, TableName, TableSchema
from cdc.typeconv import RawDate


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, None),
        (7, 7),
        (0.5, 0.5),
        (Decimal("1.50"), "1.50"),
        (b"\x00\xab", "0x00ab"),
        (datetime(2024, 1, 1, 1, 2, 3, 4), "2024-01-01 01:02:03.000004"),
        (datetime(2024, 1, 1, tzinfo=UTC), "2024-01-01 00:00:00+00:00"),
        (date(2024, 1, 1), "2024-01-01"),
        (timedelta(seconds=-1), "-00:00:01"),
        (RawDate(0, 0, 0), "0000-00-00"),
        (frozenset({"b", "a"}), ["a", "b"]),
    ],
)
def test_display_value(value: object, shown: object) -> None:
    assert display_value(value) == shown


def test_long_values_are_shortened() -> None:
    assert display_value("x" * 500) == "x" * DISPLAY_LIMIT + "... (500 characters)"
    assert display_value(b"\x01" * 300).endswith("... (300 bytes)")


def schema(columns: list[Column], key: tuple[str, ...] = (), unique: tuple = ()) -> TableSchema:
    return TableSchema(TableName("db", "t"), tuple(columns), key, unique)


ID = Column("id", "int", "int(11)", nullable=False)
V = Column("v", "varchar", "varchar(10)")


def test_columns_line_up_by_name_in_source_order() -> None:
    source = schema([ID, V, Column("gone", "int", "int")], ("id",))
    target = schema(
        [
            Column("V", "varchar", "varchar(20)"),
            Column("ID", "bigint", "bigint"),
            Column("new", "int", "int"),
        ],
        ("ID",),
    )
    pairing = pair_tables(source, target)
    assert pairing.column_names == ("id", "v")
    assert [c.name for c in pairing.target_columns] == ["ID", "V"]
    assert (pairing.missing_in_target, pairing.extra_in_target) == (("gone",), ("new",))
    assert [(d.column, d.source_type, d.target_type) for d in pairing.type_differences] == [
        ("id", "int(11)", "bigint"),
        ("v", "varchar(10)", "varchar(20)"),
    ]
    assert (pairing.mode, pairing.key) == (CompareMode.KEYED, (0,))


def test_integer_display_width_is_no_difference() -> None:
    source = schema([ID, Column("u", "int", "int(10) unsigned")])
    target = schema([Column("id", "int", "int"), Column("u", "int", "int unsigned")])
    assert pair_tables(source, target).type_differences == ()


def test_modes() -> None:
    keyless = schema([ID, V])
    assert pair_tables(keyless, keyless).mode is CompareMode.WHOLE
    by_unique = schema([ID, V], (), (("id",),))
    pairing = pair_tables(by_unique, by_unique)
    assert (pairing.mode, pairing.key_names) == (CompareMode.KEYED, ("id",))
    nullable_unique = schema([ID, V], (), (("v",),))
    assert pair_tables(nullable_unique, nullable_unique).mode is CompareMode.WHOLE
    key_missing = pair_tables(schema([ID, V], ("id",)), schema([V]))
    assert (key_missing.mode, key_missing.missing_in_target) == (CompareMode.WHOLE, ("id",))


def test_report_dicts() -> None:
    pairing = pair_tables(schema([ID, V], ("id",)), schema([ID, V], ("id",)))
    rows = (
        RowDiff(DiffKind.DIFFERENT, (1,), (1, None), (1, ""), ("v",)),
        RowDiff(DiffKind.EXTRA_IN_TARGET, (2,), None, (2, "x")),
    )
    different = TableReport(TableName("db", "t"), TableStatus.DIFFERENT, pairing, 3, 1, 5, 6, rows)
    missing = TableReport(TableName("db", "m"), TableStatus.MISSING_IN_TARGET)
    report = DiffReport("s", "t", ("db.*",), 100, 2, (different, missing), 1.23456)
    data = report.to_dict()
    assert data["equal"] is False
    assert data["summary"] == {
        "tables": 2,
        "tables_equal": 0,
        "tables_different": 2,
        "rows_checked": 5,
        "chunks": 3,
        "chunks_different": 1,
        "rows_different": 2,
    }
    assert data["elapsed_seconds"] == 1.235
    assert data["tables"][1] == {"table": "db.m", "status": "missing-in-target"}
    table = data["tables"][0]
    assert {k: table[k] for k in ("mode", "key", "chunks_equal", "rows_extra_in_target")} == {
        "mode": "keyed",
        "key": ["id"],
        "chunks_equal": 2,
        "rows_extra_in_target": 1,
    }
    assert table["differences"] == [
        {
            "kind": "different",
            "key": {"id": 1},
            "columns": ["v"],
            "source": {"v": None},
            "target": {"v": ""},
        },
        {"kind": "extra-in-target", "key": {"id": 2}},
    ]
    whole = RowDiff(DiffKind.MISSING_IN_TARGET, None, (1, "a"), None)
    assert whole.to_dict(("id", "v"), ()) == {
        "kind": "missing-in-target",
        "row": {"id": 1, "v": "a"},
    }
    equal = TableReport(TableName("db", "e"), TableStatus.EQUAL, pairing)
    assert DiffReport("s", "t", (), 1, 1, (equal,)).equal
