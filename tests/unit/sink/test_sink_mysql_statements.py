"""Row changes as SQL (cdc.sink.mysql.statements): which upsert form, what a batch plans to,
literal rendering identical to PyMySQL's, and clear errors for rows that cannot be written."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from pymysql.converters import escape_item

from cdc.model import Column, Position, TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.statements import Kind, TableWriter, literal, plan

T = TableName("shop", "items")
P = Position("binlog.000001", 100)


def col(name: str, data_type: str = "int", column_type: str | None = None, **kw) -> Column:
    return Column(name, data_type, column_type or data_type, **kw)


def schema(**kw) -> TableSchema:
    columns = kw.pop(
        "columns",
        (
            col("id", nullable=False),
            col("name", "varchar", "varchar(20)", collation="utf8mb4_general_ci"),
            col("total", "int", generated=True),
        ),
    )
    return TableSchema(T, columns, kw.pop("primary_key", ("id",)), **kw)


def row(i: int, name: str = "x") -> dict:
    return {"id": i, "name": name, "total": i * 2}


def test_safe_mode_upserts_with_replace_and_leaves_generated_columns_out() -> None:
    writer = TableWriter(schema(), safe_mode=True)
    assert writer.uses_replace and not writer.serial
    ops = [writer.upsert(row(1, "secret's"), (1,), P), writer.upsert(row(2), (2,), P)]
    [statement] = plan(ops, 100)
    assert statement.sql == (
        "REPLACE INTO `shop`.`items` (`id`, `name`) VALUES (1,'secret\\'s'),(2,'x')"
    )
    assert "secret" not in statement.description
    assert statement.description == (
        "REPLACE INTO `shop`.`items` (`id`, `name`) VALUES (...) [2 row(s)]"
    )


def test_without_safe_mode_a_key_only_table_uses_on_duplicate_key_update() -> None:
    writer = TableWriter(schema(), safe_mode=False)
    [statement] = plan([writer.upsert(row(1), (1,), P)], 100)
    assert statement.sql == (
        "INSERT INTO `shop`.`items` (`id`, `name`) VALUES (1,'x') "
        "ON DUPLICATE KEY UPDATE `name` = VALUES(`name`)"
    )


def test_another_unique_key_means_replace_and_one_lane_even_without_safe_mode() -> None:
    columns = (col("id", nullable=False), col("email", "varchar", "varchar(50)", nullable=False))
    writer = TableWriter(schema(columns=columns, unique_keys=(("email",),)), safe_mode=False)
    assert writer.serial and writer.uses_replace
    # a unique key on the row key's own columns is no other key
    same = TableWriter(schema(columns=columns, unique_keys=(("ID",),)), safe_mode=False)
    assert not same.serial and not same.uses_replace


def test_a_not_null_unique_key_serves_as_the_row_key_when_there_is_no_primary_key() -> None:
    columns = (col("code", "char", "char(4)", nullable=False), col("v"))
    writer = TableWriter(
        schema(columns=columns, primary_key=(), unique_keys=(("code",),)), safe_mode=True
    )
    assert writer.key_names == ("code",) and not writer.serial
    [statement] = plan([writer.delete(("ab",), P)], 10)
    assert statement.sql == "DELETE FROM `shop`.`items` WHERE `code` IN ('ab')"


def test_a_table_without_a_usable_key_is_refused_with_what_to_do() -> None:
    columns = (col("a"), col("b", nullable=True))
    with pytest.raises(SinkError, match="no primary key and no NOT NULL unique key.*filter"):
        TableWriter(schema(columns=columns, primary_key=(), unique_keys=(("b",),)), safe_mode=True)


def test_a_batch_keeps_each_keys_last_operation_deletes_first() -> None:
    writer = TableWriter(schema(), safe_mode=True)
    ops = [
        writer.upsert(row(1, "a"), (1,), P),
        writer.delete((2,), P),
        writer.upsert(row(1, "b"), (1,), P),
        writer.upsert(row(2, "c"), (2,), P),
        writer.delete((3,), P),
    ]
    statements = plan(ops, 100)
    assert [s.sql for s in statements] == [
        "DELETE FROM `shop`.`items` WHERE `id` IN (3)",
        "REPLACE INTO `shop`.`items` (`id`, `name`) VALUES (1,'b'),(2,'c')",
    ]


def test_keys_equal_under_the_collation_keep_their_order() -> None:
    columns = (col("name", "varchar", "varchar(20)", nullable=False), col("v"))
    writer = TableWriter(schema(columns=columns, primary_key=("name",)), safe_mode=True)
    # UPDATE renaming 'abc' to 'ABC ' (one row under a _ci, PAD SPACE collation)
    ops = [writer.delete(("abc",), P), writer.upsert({"name": "ABC ", "v": 1}, ("ABC ",), P)]
    assert ops[0].folded == ops[1].folded
    statements = plan(ops, 100)
    assert [s.sql.split(" ")[0] for s in statements] == ["DELETE", "REPLACE"]
    # in the other order too: a REPLACE of 'abc' then a DELETE of 'ABC' deletes it
    ops = [writer.upsert({"name": "abc", "v": 1}, ("abc",), P), writer.delete(("ABC",), P)]
    assert [s.sql.split(" ")[0] for s in plan(ops, 100)] == ["REPLACE", "DELETE"]


def test_statements_hold_at_most_max_rows_and_about_a_megabyte() -> None:
    writer = TableWriter(schema(), safe_mode=True)
    ops = [writer.upsert(row(i), (i,), P) for i in range(10)]
    assert [s.description.endswith("[4 row(s)]") for s in plan(ops, 4)] == [True, True, False]
    big = [writer.upsert(row(i, "x" * 20_000), (i,), P) for i in range(120)]
    statements = plan(big, 1000)
    assert len(statements) == 3
    assert all(len(s.sql) < (1 << 20) + 30_000 for s in statements)
    assert sum(s.sql.count("),(") + 1 for s in statements) == 120


def test_composite_keys_delete_with_row_constructors() -> None:
    columns = (col("a", nullable=False), col("b", "varchar", "varchar(5)", nullable=False))
    writer = TableWriter(schema(columns=columns, primary_key=("a", "b")), safe_mode=True)
    [statement] = plan([writer.delete((1, "x"), P), writer.delete((2, "y"), P)], 10)
    assert statement.sql == "DELETE FROM `shop`.`items` WHERE (`a`, `b`) IN ((1,'x'),(2,'y'))"
    assert statement.description.startswith("DELETE FROM `shop`.`items` WHERE (`a`, `b`) IN (...)")


def test_values_are_converted_for_the_column_type() -> None:
    columns = (
        col("id", nullable=False),
        col("ts", "timestamp", "timestamp(6)", fsp=6),
        col("tags", "set", "set('a','b','c')", elements=("a", "b", "c")),
        col("t", "time", "time"),
    )
    writer = TableWriter(schema(columns=columns), safe_mode=True)
    image = {
        "id": 1,
        "ts": datetime(2024, 5, 31, 12, 0, 0, 5, tzinfo=UTC),
        "tags": frozenset({"c", "a"}),
        "t": -timedelta(hours=1, microseconds=1),
    }
    op = writer.upsert(image, (1,), P)
    assert op.kind is Kind.UPSERT
    assert op.params == (1, datetime(2024, 5, 31, 12, 0, 0, 5), "a,c", "-01:00:00.000001")


def test_rows_that_do_not_match_the_schema_are_refused_by_name() -> None:
    writer = TableWriter(schema(), safe_mode=True)
    with pytest.raises(SinkError, match=r"lacks column\(s\) \['name'\]"):
        writer.upsert({"id": 1, "total": 2}, (1,), P)
    with pytest.raises(SinkError, match=r"has column\(s\) \['colour'\] that schema version 0"):
        writer.upsert({"id": 1, "name": "x", "colour": "red"}, (1,), P)
    with pytest.raises(SinkError, match=r"lacks column\(s\) \['id'\]"):
        writer.key_of({"name": "x", "total": 2}, P)


def test_an_unwritable_value_names_the_column_and_position() -> None:
    columns = (col("id", nullable=False), col("tags", "set", "set('a')", elements=("a",)))
    writer = TableWriter(schema(columns=columns), safe_mode=True)
    with pytest.raises(SinkError, match=r"at binlog.000001:100: column 'tags' \(set\('a'\)\)"):
        writer.upsert({"id": 1, "tags": frozenset({"zz"})}, (1,), P)


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "quote ' double \" back \\ nul \x00 nl \n cr \r ctrl-z \x1a tab \t",
        "😀 é € ß",
        "",
        0,
        -(2**63),
        2**64 - 1,
        None,
        True,
        1.5,
        0.1,
        1e300,
        Decimal("-12.50"),
        date(2024, 2, 29),
        datetime(2024, 1, 1, 0, 0, 0, 123),
        b"\x00\x01'\\",
        b"",
    ],
)
def test_literals_are_those_pymysql_would_send(value: object) -> None:
    assert literal(value) == escape_item(value, "utf8mb4")
