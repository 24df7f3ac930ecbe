"""Which downstream warnings mean a changed value (cdc.sink.mysql.strict), and which cells of
a statement or load file write the invalid ENUM value '' on purpose."""

from __future__ import annotations

import pytest

from cdc.model import Column, Position, TableName, TableSchema
from cdc.sink.mysql.loadfile import load_statement
from cdc.sink.mysql.statements import TableWriter
from cdc.sink.mysql.strict import (
    RELAXED_SQL_MODE,
    STRICT_SQL_MODE,
    ServerWarning,
    ValueChanged,
    changed_values,
    parse_warning,
    session_sql,
)

TABLE = TableName("db", "t")


def warning(level: str, code: int, message: str) -> ServerWarning:
    return parse_warning((level, code, message))


@pytest.mark.parametrize(
    ("message", "column", "row"),
    [
        ("Data truncated for column 'v' at row 2", "v", 2),
        ("Data too long for column 'long name' at row 17", "long name", 17),
        ("Out of range value for column 'ti' at row 1", "ti", 1),
        ("Incorrect string value: '\\xF0\\x9F' for column `db`.`t`.`c` at row 3", "c", 3),
        ("Incorrect string value: '\\xF0' for column `d``b`.`t`.`we``ird` at row 1", "we`ird", 1),
        ("Column 'nn' cannot be null", "nn", None),
        ("Unknown table 'db.gone'", None, None),
    ],
)
def test_a_warning_names_its_column_and_row(
    message: str, column: str | None, row: int | None
) -> None:
    parsed = warning("Warning", 1265, message)
    assert (parsed.column, parsed.row) == (column, row)


@pytest.mark.parametrize(
    ("level", "code", "changed"),
    [
        ("Warning", 1265, True),  # data truncated
        ("Note", 1265, True),  # DECIMAL rounded: a Note even in strict mode, still a change
        ("Warning", 1264, True),
        ("Warning", 1366, True),
        ("Warning", 1292, True),
        ("Warning", 1406, True),
        ("Warning", 1048, True),
        ("Warning", 1263, True),
        ("Warning", 9999, True),  # an unknown warning is not assumed harmless
        ("Note", 1051, False),  # unknown table on DROP ... IF EXISTS
        ("Warning", 1287, False),  # deprecated VALUES() in ON DUPLICATE KEY UPDATE
        ("Warning", 1592, False),  # unsafe for a statement-format binlog
        ("Note", 9999, False),
    ],
)
def test_value_changing_warnings_are_told_from_harmless_ones(
    level: str, code: int, changed: bool
) -> None:
    parsed = warning(level, code, "Data truncated for column 'v' at row 1")
    assert (changed_values([parsed]) == [parsed]) is changed


def test_only_the_expected_invalid_enum_cells_are_forgiven() -> None:
    expected = frozenset({(2, "en")})
    forgiven = warning("Warning", 1265, "Data truncated for column 'EN' at row 2")
    other_row = warning("Warning", 1265, "Data truncated for column 'en' at row 3")
    other_column = warning("Warning", 1265, "Data truncated for column 'v' at row 2")
    too_long = warning("Warning", 1406, "Data too long for column 'en' at row 2")
    got = changed_values([forgiven, other_row, other_column, too_long], expected)
    assert got == [other_row, other_column, too_long]


def test_the_failure_names_the_columns_and_what_to_do() -> None:
    error = ValueChanged(
        [
            warning("Warning", 1265, "Data truncated for column 'v' at row 2"),
            warning("Note", 1265, "Data truncated for column 'de' at row 1"),
        ],
        hidden=4,
    )
    text = str(error)
    assert "column(s) de, v" in text
    assert "Data truncated for column 'v' at row 2 (Warning 1265)" in text
    assert "4 warning(s) the server did not list" in text
    assert "nothing of this transaction was committed" in text
    assert "widen the downstream column" in text


def test_row_sessions_are_strict_and_keep_what_faithful_replication_needs() -> None:
    modes = set(STRICT_SQL_MODE.split(","))
    assert "STRICT_ALL_TABLES" in modes
    assert {"ALLOW_INVALID_DATES", "NO_AUTO_VALUE_ON_ZERO"} <= modes
    assert not modes & {"NO_ZERO_DATE", "NO_ZERO_IN_DATE", "NO_BACKSLASH_ESCAPES", "ANSI_QUOTES"}
    assert "STRICT" not in RELAXED_SQL_MODE
    assert STRICT_SQL_MODE in session_sql(strict=True)[0]
    assert "max_error_count" in session_sql(strict=True)[0]
    assert "STRICT" not in session_sql(strict=False)[0]


SCHEMA = TableSchema(
    TABLE,
    (
        Column("id", "int", "int(11)", nullable=False),
        Column("en", "enum", "enum('a','b')", elements=("a", "b")),
        Column("blank", "enum", "enum('','x')", elements=("", "x")),
        Column("v", "varchar", "varchar(5)"),
    ),
    ("id",),
)


def test_a_statement_names_its_rows_writing_the_invalid_enum_value() -> None:
    writer = TableWriter(SCHEMA, safe_mode=True)
    images = [
        {"id": 1, "en": "a", "blank": "", "v": ""},  # '' is a member of `blank`
        {"id": 2, "en": "", "blank": "x", "v": "x"},
        {"id": 3, "en": None, "blank": None, "v": None},
        {"id": 4, "en": "", "blank": "", "v": ""},
    ]
    pos = Position("b.000001", 4)
    rows = [writer.upsert(image, writer.key_of(image, pos), pos).params for image in images]
    (statement,) = writer.upsert_statements(rows)
    assert statement.enum_errors == {(2, "en"), (4, "en")}
    (plain,) = writer.upsert_statements(rows[:1])
    assert plain.enum_errors == frozenset()


def test_a_load_file_names_its_lines_writing_the_invalid_enum_value() -> None:
    rows = [
        {"id": 1, "en": "b", "blank": "", "v": "a"},
        {"id": 2, "en": "", "blank": "", "v": ""},
    ]
    assert load_statement(SCHEMA, rows, "2 rows").enum_errors == {(2, "en")}
