"""Fix-SQL literals and statements, built from hand-made reports (no server)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from cdc.diff.fixsql import fix_statements, sql_literal, write_fix_sql
from cdc.diff.report import DiffKind, DiffReport, RowDiff, TableReport, TableStatus
from cdc.diff.schemas import pair_tables
from cdc.model.schema import Column, TableName, TableSchema
from cdc.typeconv import RawDate, RawDateTime


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (None, "NULL"),
        (42, "42"),
        (-(2**63), "-9223372036854775808"),
        (0.1, "0.1"),
        (1e300, "1e+300"),
        (Decimal("-12.50"), "-12.50"),
        (Decimal("1E+3"), "1000"),
        ("plain text, 100% ok", "'plain text, 100% ok'"),
        ("", "''"),
        ("it's", "_utf8mb4 X'69742773'"),
        ("back\\slash", "_utf8mb4 X'6261636B5C736C617368'"),
        ("new\nline", "_utf8mb4 X'6E65770A6C696E65'"),
        ("😀", "_utf8mb4 X'F09F9880'"),
        (b"\x00\xff", "X'00FF'"),
        (b"", "X''"),
        (date(2024, 2, 29), "'2024-02-29'"),
        (datetime(2024, 1, 1, 10, 0, 0, 5), "'2024-01-01 10:00:00.000005'"),
        (timedelta(hours=-838, minutes=-59, seconds=-59), "'-838:59:59'"),
    ],
)
def test_sql_literal(value: object, literal: str) -> None:
    assert sql_literal(value) == literal


@pytest.mark.parametrize(
    "value", [float("inf"), float("nan"), datetime(2024, 1, 1, tzinfo=UTC), object()]
)
def test_values_without_a_literal_are_refused(value: object) -> None:
    with pytest.raises((ValueError, TypeError)):
        sql_literal(value)


def schema(name: str, columns: list[Column], key: tuple[str, ...] = ()) -> TableSchema:
    return TableSchema(TableName("db", name), tuple(columns), key)


ID = Column("id", "int", "int", nullable=False)
TS = Column("ts", "timestamp", "timestamp(6)", fsp=6)
DAY = Column("day", "date", "date")
TAGS = Column("tags", "set", "set('a','b')", elements=("a", "b"))
GEN = Column("gen", "int", "int", generated=True)


def report_of(*tables: TableReport) -> DiffReport:
    return DiffReport(
        "mysql://u:******@src:3306/", "mysql://u:******@dst:3306/", ("db.*",), 10, 1, tables
    )


def test_keyed_table_deletes_first_then_replaces() -> None:
    source = schema("t", [ID, TS, DAY, TAGS, GEN], ("id",))
    pairing = pair_tables(source, source)
    ts = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
    rows = (
        RowDiff(
            DiffKind.MISSING_IN_TARGET,
            (1,),
            (1, ts, RawDate(0, 0, 0), frozenset({"b", "a"}), 2),
            None,
        ),
        RowDiff(DiffKind.EXTRA_IN_TARGET, (9,), None, (9, None, None, frozenset(), 18)),
        RowDiff(
            DiffKind.DIFFERENT,
            (2,),
            (2, RawDateTime(0, 0, 0), None, frozenset(), 4),
            (2, None, None, frozenset(), 4),
            ("ts",),
        ),
    )
    table = TableReport(TableName("db", "t"), TableStatus.DIFFERENT, pairing, 1, 1, 2, 2, rows)
    lines = list(fix_statements(report_of(table)))
    assert lines[:6] == [
        "-- cdcctl diff: statements that make mysql://u:******@dst:3306/ equal to "
        "mysql://u:******@src:3306/",
        "-- apply them to the target, then run cdcctl diff again",
        "SET NAMES utf8mb4;",
        "SET SESSION time_zone = '+00:00';",
        "SET SESSION sql_mode = "
        "'NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES,NO_ENGINE_SUBSTITUTION';",
        "SET SESSION foreign_key_checks = 0;",
    ]
    assert lines[6:] == [
        "-- db.t: 3 differing row(s)",
        "DELETE FROM `db`.`t` WHERE `id` = 9;",
        "REPLACE INTO `db`.`t` (`id`, `ts`, `day`, `tags`) "
        "VALUES (1, '2024-01-01 12:00:00', '0000-00-00', 'a,b');",
        "REPLACE INTO `db`.`t` (`id`, `ts`, `day`, `tags`) "
        "VALUES (2, '0000-00-00 00:00:00', NULL, '');",
    ]


def test_whole_table_deletes_one_copy_by_every_column() -> None:
    source = schema("n", [ID, DAY])
    pairing = pair_tables(source, source)
    rows = (
        RowDiff(DiffKind.EXTRA_IN_TARGET, None, None, (1, None)),
        RowDiff(DiffKind.MISSING_IN_TARGET, None, (2, date(2024, 1, 2)), None),
    )
    table = TableReport(TableName("db", "n"), TableStatus.DIFFERENT, pairing, 1, 1, 1, 1, rows)
    assert list(fix_statements(report_of(table)))[6:] == [
        "-- db.n: 2 differing row(s)",
        "DELETE FROM `db`.`n` WHERE `id` <=> 1 AND `day` <=> NULL LIMIT 1;",
        "INSERT INTO `db`.`n` (`id`, `day`) VALUES (2, '2024-01-02');",
    ]


def test_tables_and_columns_on_one_side_get_comments_only(tmp_path: Path) -> None:
    wide = schema("w", [ID, DAY], ("id",))
    narrow = schema("w", [ID, Column("extra", "int", "int")], ("id",))
    tables = (
        TableReport(TableName("db", "a"), TableStatus.MISSING_IN_TARGET),
        TableReport(TableName("db", "b"), TableStatus.EXTRA_IN_TARGET),
        TableReport(TableName("db", "w"), TableStatus.DIFFERENT, pair_tables(wide, narrow)),
        TableReport(TableName("db", "e"), TableStatus.EQUAL, pair_tables(wide, wide)),
    )
    path = tmp_path / "fix.sql"
    assert write_fix_sql(report_of(*tables), path) == 0
    body = path.read_text().splitlines()[6:]
    assert body == [
        "-- db.a: missing on the target; create it there (and copy its rows) first",
        "-- db.b: exists on the target only; drop it by hand if it should not be there",
        "-- db.w: column(s) day missing on the target; add them, then check again "
        "(the statements below write the other columns)",
        "-- db.w: column(s) extra exist on the target only (left as they are)",
    ]
