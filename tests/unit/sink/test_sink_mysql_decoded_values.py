"""A decoded row change goes to the MySQL sink from its values, not its images
(``RowChange.decoded_values``, ``TableWriter.columns_at``): the operations must be those
of the image path, whatever the decoder's column order, and a row the schema does not
fit must still be refused by the image path's message."""

from __future__ import annotations

import pytest

from cdc.binlog.rowchanges import TableShape, row_change
from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.sink import _image_ops, _value_ops
from cdc.sink.mysql.statements import RowOp, TableWriter

T = TableName("shop", "items")
P = Position("binlog.000001", 100)


def col(name: str, data_type: str = "int", column_type: str | None = None, **kw) -> Column:
    return Column(name, data_type, column_type or data_type, **kw)


SCHEMA = TableSchema(
    T,
    (
        col("id", nullable=False),
        col("name", "varchar", "varchar(20)"),
        col("total", "int", generated=True),
        col("flag", "bit", "bit(1)"),
        col("at", "timestamp"),
    ),
    ("id",),
)


def decoded(names: tuple[str, ...], op: Op, before: tuple | None, after: tuple | None) -> RowChange:
    key_of = after if after is not None else before
    assert key_of is not None
    return row_change(TableShape(T, names, (names.index("id"),)), op, before, after, P, "0-1-1")


def ops_both_ways(writer: TableWriter, change: RowChange) -> tuple[list[RowOp], list[RowOp]]:
    values = change.decoded_values()
    assert values is not None
    at = writer.columns_at(values[0])
    assert at is not None, "the value path was not taken"
    by_values: list[RowOp] = []
    _value_ops(writer, at, change.op, values[1], values[2], change.position, by_values)
    by_images: list[RowOp] = []
    plain = RowChange(change.table, change.op, change.before, change.after, change.key, P)
    assert plain.decoded_values() is None
    _image_ops(writer, plain, by_images)
    return by_values, by_images


@pytest.mark.parametrize(
    "names",
    [("id", "name", "total", "flag", "at"), ("at", "flag", "total", "name", "id")],
    ids=["schema order", "another order"],
)
@pytest.mark.parametrize(
    ("op", "before", "after"),
    [
        (Op.CREATE, None, {"id": 1, "name": "a", "total": 2, "flag": 1, "at": None}),
        (
            Op.UPDATE,
            {"id": 1, "name": "a", "total": 2, "flag": 1, "at": None},
            {"id": 1, "name": "b", "total": 2, "flag": 0, "at": None},
        ),
        (
            Op.UPDATE,
            {"id": 1, "name": "a", "total": 2, "flag": 1, "at": None},
            {"id": 7, "name": "a", "total": 2, "flag": 1, "at": None},
        ),
        (Op.DELETE, {"id": 1, "name": "a", "total": 2, "flag": 1, "at": None}, None),
    ],
    ids=["insert", "update", "update of the key", "delete"],
)
def test_values_give_the_operations_the_images_give(
    names: tuple[str, ...], op: Op, before: dict | None, after: dict | None
) -> None:
    writer = TableWriter(SCHEMA, safe_mode=True)
    change = decoded(
        names,
        op,
        None if before is None else tuple(before[n] for n in names),
        None if after is None else tuple(after[n] for n in names),
    )
    by_values, by_images = ops_both_ways(writer, change)
    assert by_values == by_images
    assert len(by_values) == (2 if op is Op.UPDATE and after and after["id"] == 7 else 1)


def test_a_decoded_change_is_the_change_its_images_make() -> None:
    names = ("id", "name", "total", "flag", "at")
    change = decoded(names, Op.UPDATE, (1, "a", 2, 1, None), (1, "b", 2, 1, None))
    plain = RowChange(
        T,
        Op.UPDATE,
        dict(zip(names, (1, "a", 2, 1, None), strict=True)),
        dict(zip(names, (1, "b", 2, 1, None), strict=True)),
        (1,),
        P,
        "0-1-1",
    )
    assert change == plain and repr(change) == repr(plain)
    assert change.row_after["name"] == "b"
    with pytest.raises(AttributeError):
        _ = change.nothing_of_the_kind  # type: ignore[attr-defined]


def test_names_that_are_not_the_schemas_take_the_image_path_and_its_error() -> None:
    writer = TableWriter(SCHEMA, safe_mode=True)
    fewer = ("id", "name", "total", "flag")
    assert writer.columns_at(fewer) is None
    other = ("id", "name", "total", "flag", "when")
    assert writer.columns_at(other) is None
    change = decoded(other, Op.CREATE, None, (1, "a", 2, 1, None))
    with pytest.raises(SinkError, match=r"lacks column\(s\) \['at'\] of schema version"):
        _image_ops(writer, change, [])


def test_a_writer_remembers_few_column_orders() -> None:
    writer = TableWriter(SCHEMA, safe_mode=True)
    orders = [tuple(n for n in ("id", "name", "total", "flag", "at")) for _ in range(40)]
    for names in orders:
        assert writer.columns_at(names) is not None
    assert len(writer._columns_at) <= 16
