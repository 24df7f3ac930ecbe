"""A table resuming on the server a failover led to: rows of transactions its checkpoint
(read on the old server) holds are dropped by GTID, the rest delivered, and its checkpoint
never claims what it did not deliver."""

from __future__ import annotations

from typing import Any, cast

from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.metrics import TableMetrics
from cdc.model.events import Op, RowChange
from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from processor.streamed_table import StreamedTable
from processor.table_records import RecordWriter

NAME = TableName("shop", "t")
SCHEMA = TableSchema(NAME, (Column("id", "int", "int"),), ("id",))


def _table(floor: Position) -> StreamedTable:
    return StreamedTable(
        NAME,
        SCHEMA,
        None,
        floor=floor,
        records=cast(RecordWriter, None),
        metrics=TableMetrics("cf", "shop.t"),
        events=EventFilter([], True),
        flavor=Flavor.MARIADB,
        case_sensitive=True,
        log=get_logger(__name__),
    )


def _new(offset: int, seq: int) -> Position:
    """A position read on the new server (generation 1) after transaction 0-1-<seq>."""
    return Position("replica-bin.000001", offset, GtidSet.parse(f"0-1-{seq}"), 1)


def _row(position: Position, key: int) -> RowChange:
    after: dict[str, Any] = {"id": key}
    return RowChange(NAME, Op.CREATE, None, after, (key,), position)


OLD_CHECKPOINT = Position("binlog.000042", 9000, GtidSet.parse("0-1-100"))


def test_rows_the_old_checkpoint_holds_are_dropped_the_rest_delivered() -> None:
    table = _table(OLD_CHECKPOINT)
    out: list[RowChange] = []
    for seq in range(98, 104):
        table.admit(_row(_new(seq * 10, seq), seq), out)
    assert [c.key for c in out] == [(101,), (102,), (103,)]


def test_the_checkpoint_stays_the_old_one_until_the_reader_passed_it() -> None:
    table = _table(OLD_CHECKPOINT)
    assert table.position(_new(990, 99)) == OLD_CHECKPOINT
    passed = _new(1010, 101)
    assert table.position(passed) == passed
    # the floor moved to the new server: rows compare by position again
    assert table.floor == passed
    out: list[RowChange] = []
    table.admit(_row(_new(1010, 101), 1), out)
    table.admit(_row(_new(1020, 102), 2), out)
    assert [c.key for c in out] == [(2,)]


def test_the_same_place_on_the_new_server_becomes_the_checkpoint() -> None:
    """A reader stalled at a barrier read on the new server whose limit is the old
    checkpoint's place reports the limit: the owner compares it with that limit."""
    table = _table(OLD_CHECKPOINT)
    same = _new(1000, 100)
    assert table.position(same) == same and table.floor == same


def test_a_ddl_the_old_checkpoint_holds_is_not_followed_again() -> None:
    from cdc.schema.ddl import parse_ddl

    table = _table(OLD_CHECKPOINT)
    ddl = parse_ddl("ALTER TABLE t ADD COLUMN v INT", "shop", _new(500, 50))
    assert table.ddl(ddl) is False
    assert table.schema == SCHEMA
