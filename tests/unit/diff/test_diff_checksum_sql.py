"""The canonical-text SQL of each column type, and the checksum statement around it."""

from __future__ import annotations

import pytest

from cdc.diff.checksum import NULL_TEXT, checksum_sql, column_text_sql, row_hash_sql
from cdc.model.schema import Column, TableName


def col(data_type: str, column_type: str | None = None, **kw: object) -> Column:
    return Column("c", data_type, column_type or data_type, **kw)


@pytest.mark.parametrize(
    ("column", "expected"),
    [
        (col("int", "int(11)"), "IFNULL(CAST(`c` AS CHAR), 'N')"),
        (col("bigint", "bigint unsigned"), "IFNULL(CAST(`c` AS CHAR), 'N')"),
        (col("year", "year(4)"), "IFNULL(CAST(`c` AS CHAR), 'N')"),
        (col("double"), "IFNULL(CAST(`c` AS CHAR), 'N')"),
        (col("date"), "IFNULL(CAST(`c` AS CHAR), 'N')"),
        (col("float"), "IFNULL(CAST(CAST(`c` AS DOUBLE) AS CHAR), 'N')"),
        (col("bit", "bit(12)"), "IFNULL(CAST(CAST(`c` AS UNSIGNED) AS CHAR), 'N')"),
        (col("varchar", "varchar(10)"), "IFNULL(HEX(CONVERT(`c` USING utf8mb4)), 'N')"),
        (col("enum", "enum('a')"), "IFNULL(HEX(CONVERT(`c` USING utf8mb4)), 'N')"),
        (col("json", "json"), "IFNULL(HEX(CONVERT(`c` USING utf8mb4)), 'N')"),
        (col("blob"), "IFNULL(HEX(`c`), 'N')"),
        (col("binary", "binary(4)"), "IFNULL(HEX(`c`), 'N')"),
        (col("point"), "IFNULL(HEX(`c`), 'N')"),
        (col("uuid"), "IFNULL(HEX(`c`), 'N')"),
    ],
)
def test_column_text_per_type(column: Column, expected: str) -> None:
    assert column_text_sql(column) == expected


def test_decimal_text_drops_trailing_fraction_zeros() -> None:
    sql = column_text_sql(col("decimal", "decimal(10,2)", precision=10, scale=2))
    assert sql == "IFNULL(TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM CAST(`c` AS CHAR))), 'N')"
    # scale 0 prints no point: 100 keeps its zeros
    assert column_text_sql(col("decimal", "decimal(10,0)", scale=0)) == (
        "IFNULL(CAST(`c` AS CHAR), 'N')"
    )
    # scale unknown: cut only after a point
    assert column_text_sql(col("decimal", "decimal(10,2)")) == (
        "IFNULL(IF(INSTR(CAST(`c` AS CHAR), '.') > 0, "
        "TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM CAST(`c` AS CHAR))), "
        "CAST(`c` AS CHAR)), 'N')"
    )


@pytest.mark.parametrize(
    ("column", "suffix"),
    [
        (col("datetime", "datetime", fsp=0), "'.000000'"),
        (col("timestamp", "timestamp(3)", fsp=3), "'000'"),
        (col("time", "time(5)"), "'0'"),  # fsp read off the type when the schema lacks it
    ],
)
def test_temporal_text_is_padded_to_six_fraction_digits(column: Column, suffix: str) -> None:
    assert column_text_sql(column) == f"IFNULL(CONCAT(CAST(`c` AS CHAR), {suffix}), 'N')"


def test_six_fraction_digits_need_no_padding() -> None:
    assert column_text_sql(col("datetime", "datetime(6)", fsp=6)) == (
        "IFNULL(CAST(`c` AS CHAR), 'N')"
    )


def test_the_null_text_is_no_canonical_text() -> None:
    # hex digits, numbers and dates never spell 'N'; nor contain the ',' separator
    assert NULL_TEXT == "N"
    assert row_hash_sql([col("int"), Column("d", "text", "text")]) == (
        "MD5(CONCAT_WS(',', IFNULL(CAST(`c` AS CHAR), 'N'), "
        "IFNULL(HEX(CONVERT(`d` USING utf8mb4)), 'N')))"
    )


def test_a_row_hash_needs_a_column() -> None:
    with pytest.raises(ValueError, match="at least one column"):
        row_hash_sql([])


def test_checksum_statement_doubles_percent_in_names_but_not_in_the_where_clause() -> None:
    sql = checksum_sql(
        TableName("d%b", "t`x"), [Column("a%", "int", "int")], "`k%%` >= %s AND `k%%` < %s"
    )
    assert sql == (
        "SELECT COUNT(*), SUM(CAST(CONV(LEFT(MD5(CONCAT_WS(',', "
        "IFNULL(CAST(`a%%` AS CHAR), 'N'))), 16), 16, 10) AS UNSIGNED)) FROM `d%%b`.`t``x` "
        "WHERE `k%%` >= %s AND `k%%` < %s"
    )
    assert sql % ("1", "2")  # a valid PyMySQL template: every other % is doubled
