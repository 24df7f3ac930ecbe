"""The blackhole sink counts rows per table and op, and discards them."""

from __future__ import annotations

import pytest

from cdc.model import DdlEvent, DdlKind, Op, Position, RowChange, TableName
from cdc.sink.base import SinkError
from cdc.sink.blackhole import BlackholeSink
from cdc.sink.factory import open_sink
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

A, B = TableName("shop", "a"), TableName("shop", "b")


def pos(offset: int) -> Position:
    return Position("binlog.000002", offset)


def test_counts_per_table_and_op_and_flushes_to_the_last_position() -> None:
    sink = open_sink(parse_sink_uri("blackhole://"), lambda _: None, "bh")  # type: ignore[arg-type,return-value]
    assert isinstance(sink, BlackholeSink)
    assert sink.flush() is None and sink.flushed is None
    row = {"id": 1, "name": "abcd", "blob": b"\x00" * 10, "missing": None}
    sink.write_rows(
        [
            RowChange(A, Op.CREATE, None, row, (1,), pos(10)),
            RowChange(A, Op.CREATE, None, {**row, "id": 2}, (2,), pos(10)),
            RowChange(A, Op.UPDATE, row, {**row, "name": "x"}, (1,), pos(20)),
            RowChange(B, Op.DELETE, row, None, (1,), pos(30)),
            RowChange(B, Op.READ, None, row, (1,), pos(5)),
        ]
    )
    counts = sink.counts
    assert dict(counts) == {
        (A, Op.CREATE): 2,
        (A, Op.UPDATE): 1,
        (B, Op.DELETE): 1,
        (B, Op.READ): 1,
    }
    assert sink.total_rows == 5
    assert sink.flush() == pos(30)  # an older position does not move it back
    sink.apply_ddl(DdlEvent(pos(40), "shop", (A,), DdlKind.ADD_COLUMN, "ALTER TABLE a ADD c INT"))
    assert sink.ddl_count == 1 and sink.flushed == pos(40)
    sink.close()
    with pytest.raises(SinkError, match="closed"):
        sink.write_rows([])
