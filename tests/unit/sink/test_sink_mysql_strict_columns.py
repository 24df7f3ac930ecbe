"""Which downstream column types can hold every value of a source column's type
(cdc.sink.mysql.tables.column_type_problem), table-driven: a narrower downstream is
a problem with a reason, an equal or wider one is not."""

from __future__ import annotations

import re

import pytest

from cdc.model import Column
from cdc.schema.columns import parse_elements
from cdc.sink.mysql.tables import column_type_problem

_CHARACTER = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set")


def col(column_type: str, charset: str | None = None) -> Column:
    """A column as information_schema shows it, from its COLUMN_TYPE text."""
    data_type = re.match(r"[a-z]+", column_type).group(0)
    fsp = None
    if data_type in ("datetime", "timestamp", "time"):
        match = re.search(r"\((\d+)\)", column_type)
        fsp = int(match.group(1)) if match else 0
    if data_type in _CHARACTER and charset is None:
        charset = "utf8mb4"
    return Column(
        name="c",
        data_type=data_type,
        column_type=column_type,
        unsigned=" unsigned" in column_type,
        charset=charset,
        fsp=fsp,
        elements=parse_elements(column_type) if data_type in ("enum", "set") else (),
    )


FITS = [
    ("varchar(40)", "varchar(40)"),
    ("varchar(40)", "varchar(200)"),
    ("char(10)", "varchar(10)"),
    ("char(10)", "char(20)"),
    ("varchar(60)", "tinytext"),  # 60 characters x 4 bytes = 240 <= 255
    ("varchar(1000)", "text"),
    ("text", "mediumtext"),
    ("tinytext", "varchar(255)"),
    ("binary(4)", "binary(4)"),
    ("binary(4)", "varbinary(4)"),
    ("varbinary(10)", "blob"),
    ("blob", "longblob"),
    ("tinyint(4)", "int(11)"),
    ("int(10) unsigned", "bigint(20)"),
    ("int(10) unsigned", "int(10) unsigned"),
    ("smallint(6)", "smallint(5)"),  # display width means nothing
    ("decimal(12,3)", "decimal(12,3)"),
    ("decimal(12,3)", "decimal(15,4)"),
    ("decimal(5,2) unsigned", "decimal(5,2)"),
    ("float", "double"),
    ("datetime(3)", "datetime(6)"),
    ("time", "time(2)"),
    ("timestamp(6)", "timestamp(6)"),
    ("enum('a','b')", "enum('b','a','c')"),
    ("set('x','y')", "set('x','y','z')"),
    ("enum('a','😀')", "enum('a','?')"),  # MariaDB's information_schema shows 4-byte as '?'
    ("bit(4)", "bit(12)"),
    ("json", "longtext"),
    ("year(4)", "year(4)"),
    ("date", "date"),
]

TOO_NARROW = [
    ("varchar(40)", "varchar(10)", "do not fit in 10"),
    ("char(10)", "char(5)", "do not fit in 5"),
    ("varchar(10)", "char(10)", "trailing spaces"),
    ("varchar(100)", "tinytext", "may not fit in a TINYTEXT"),
    ("text", "varchar(255)", "do not fit in 255"),
    ("mediumtext", "text", "may not fit in a TEXT"),
    ("binary(4)", "binary(8)", "pads"),
    ("varbinary(4)", "binary(4)", "pads"),
    ("varbinary(10)", "varbinary(5)", "10 bytes do not fit in 5"),
    ("longblob", "blob", "may not fit in a BLOB"),
    ("varbinary(10)", "varchar(10)", "cannot hold bytes"),
    ("varchar(10)", "varbinary(40)", "cannot hold characters"),
    ("int(11)", "smallint(6)", "INT values do not fit in a SMALLINT"),
    ("bigint(20)", "int(11)", "do not fit"),
    ("int(11)", "int(10) unsigned", "negative values"),
    ("int(10) unsigned", "int(11)", "UNSIGNED INT values do not fit in a signed INT"),
    ("tinyint(3) unsigned", "tinyint(4)", "signed TINYINT"),
    ("decimal(12,3)", "decimal(12,2)", "3 decimal place(s) would be rounded to 2"),
    ("decimal(12,3)", "decimal(10,3)", "9 integer digit(s) do not fit in 7"),
    ("decimal(5,2)", "decimal(5,2) unsigned", "negative values"),
    ("double", "float", "FLOAT column cannot hold DOUBLE"),
    ("double", "double unsigned", "negative values"),
    ("datetime(6)", "datetime(3)", "6 fractional digit(s) of seconds would be cut to 3"),
    ("time(2)", "time", "cut to 0"),
    ("timestamp(6)", "timestamp", "cut to 0"),
    ("timestamp", "datetime", "DATETIME column cannot hold TIMESTAMP"),
    ("enum('a','b','c')", "enum('a','b')", "'c' are missing"),
    ("set('x','y')", "set('x')", "'y' are missing"),
    ("enum('a')", "varchar(10)", "VARCHAR column cannot hold ENUM"),
    ("bit(12)", "bit(8)", "BIT(12) values do not fit in BIT(8)"),
    ("int(11)", "varchar(20)", "VARCHAR column cannot hold INT"),
    ("date", "datetime", "DATETIME column cannot hold DATE"),
]


@pytest.mark.parametrize(("source", "downstream"), FITS)
def test_an_equal_or_wider_downstream_column_holds_the_source_values(
    source: str, downstream: str
) -> None:
    assert column_type_problem(col(source), col(downstream)) is None


@pytest.mark.parametrize(("source", "downstream", "reason"), TOO_NARROW)
def test_a_narrower_or_other_downstream_column_is_a_problem_with_its_reason(
    source: str, downstream: str, reason: str
) -> None:
    problem = column_type_problem(col(source), col(downstream))
    assert problem is not None and reason in problem


CHARSETS = [
    ("utf8mb4", "utf8mb4", None),
    ("latin1", "utf8mb4", None),
    ("utf8mb3", "utf8mb4", None),
    ("utf8mb3", "utf8mb3", None),
    ("latin1", "utf8mb3", None),
    ("ascii", "latin1", None),
    ("utf8", "utf8mb3", None),  # the alias
    ("utf8mb4", "utf16", None),
    ("utf8mb4", "latin1", "character set latin1 cannot hold every character of utf8mb4"),
    ("utf8mb4", "utf8mb3", "character set utf8mb3 cannot hold every character of utf8mb4"),
    ("latin1", "ascii", "character set ascii cannot hold every character of latin1"),
    ("cp1251", "latin1", "cannot hold"),
]


@pytest.mark.parametrize(("source", "downstream", "reason"), CHARSETS)
def test_a_downstream_charset_must_hold_every_character_of_the_source_one(
    source: str, downstream: str, reason: str | None
) -> None:
    problem = column_type_problem(col("varchar(10)", source), col("varchar(10)", downstream))
    assert problem is None if reason is None else reason in (problem or "")


def test_an_unknown_source_charset_is_not_guessed_at() -> None:
    """A column added by ALTER without a charset takes the table's, which the schema
    history does not keep: nothing to compare."""
    source = Column("c", "varchar", "varchar(10)", charset=None)
    assert column_type_problem(source, col("varchar(10)", "latin1")) is None
