"""Decoded row images to ``RowChange`` values, in the reader's thread or a decode worker.

A row change carries its transaction's commit position and id, its table's
name, its images as name -> value mappings and its key; everything a
transaction's rows share (the table's names and key columns, the position)
is computed once and referenced by each row.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.binlog.rowdecode import (
    DELETE_EVENTS,
    UPDATE_EVENTS,
    WRITE_EVENTS,
    BinlogDecodeError,
    BinlogTable,
)
from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName

__all__ = ["TableShape", "op_of", "row_change", "shape_of"]


@dataclass(frozen=True)
class TableShape:
    """What a row change needs of its table, computed once per table map."""

    name: TableName
    columns: tuple[str, ...]
    key_index: tuple[int, ...]


def shape_of(table: BinlogTable) -> TableShape:
    names = tuple(c.name for c in table.columns)
    index = {n: i for i, n in enumerate(names)}
    return TableShape(
        TableName(table.schema, table.table), names, tuple(index[k] for k in table.primary_key)
    )


def op_of(event_type: int) -> Op:
    """The op of a row event's type code."""
    if event_type in WRITE_EVENTS:
        return Op.CREATE
    if event_type in UPDATE_EVENTS:
        return Op.UPDATE
    if event_type in DELETE_EVENTS:
        return Op.DELETE
    raise BinlogDecodeError(f"event type {event_type:#x} is not a row event")


def row_change(
    shape: TableShape,
    op: Op,
    before: tuple | None,
    after: tuple | None,
    position: Position,
    txn_id: str | None,
) -> RowChange:
    image = after if after is not None else before
    index = shape.key_index
    if image is None:
        key: tuple = ()
    elif len(index) == 1:
        key = (image[index[0]],)
    else:
        key = tuple([image[i] for i in index])
    return RowChange.decoded(shape.name, op, shape.columns, before, after, key, position, txn_id)
