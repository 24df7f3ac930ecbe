"""The consumer's merge of partitions by watermark, and the joining of fragments."""

from __future__ import annotations

import pytest

from cdc.model.events import DdlEvent, DdlKind
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.sink.kafka.consumer.events import RowMessage, Watermark
from cdc.sink.kafka.consumer.merge import Merger
from cdc.sink.kafka.fragments import FRAGMENT_HEADER, FragmentError, Joiner, split

T = TableName("db", "t")
P0, P1 = ("t", 0), ("t", 1)


def at(offset: int) -> Position:
    return Position("binlog.000001", offset)


def row(offset: int, key: str) -> RowMessage:
    return RowMessage(T, "INSERT", {"id": key}, None, {"id": "int"}, ("id",), at(offset))


def keys(actions: tuple[object, ...]) -> list[str]:
    return [a.data["id"] if isinstance(a, RowMessage) else "DDL" for a in actions]  # type: ignore[union-attr]


def test_nothing_is_applied_until_every_partition_has_a_watermark() -> None:
    merger = Merger([P0, P1], None)
    merger.add(P0, 0, row(10, "a"))
    merger.add(P0, 1, Watermark(at(20)))
    assert merger.step() is None
    merger.add(P1, 0, row(15, "b"))
    merger.add(P1, 1, Watermark(at(12)))
    step = merger.step()
    assert step is not None and step.watermark == at(12)
    assert keys(step.actions) == ["a"]
    merger.done(step)
    assert merger.step() is None
    merger.add(P1, 2, Watermark(at(30)))
    step = merger.step()
    assert step is not None and keys(step.actions) == ["b"] and step.watermark == at(20)


def test_rows_keep_partition_order_and_wait_past_the_watermark() -> None:
    merger = Merger([P0], None)
    for offset, (position, key) in enumerate([(30, "late"), (10, "x"), (12, "y")]):
        merger.add(P0, offset, row(position, key))
    merger.add(P0, 3, Watermark(at(20)))
    step = merger.step()
    assert step is not None and keys(step.actions) == ["x", "y"]
    merger.done(step)
    assert merger.commit_offsets({}) == {P0: 0}


def test_a_ddl_comes_after_the_rows_before_it_and_before_the_rows_after_it() -> None:
    merger = Merger([P0, P1], None)
    ddl = DdlEvent(at(50), "db", (T,), DdlKind.ADD_COLUMN, "ALTER TABLE t ADD c int")
    merger.add(P0, 0, row(40, "a"))
    merger.add(P0, 1, ddl)
    merger.add(P0, 2, row(60, "c"))
    merger.add(P1, 0, row(45, "b"))
    merger.add(P1, 1, ddl)
    merger.add(P0, 3, Watermark(at(70)))
    merger.add(P1, 2, Watermark(at(70)))
    step = merger.step()
    assert step is not None
    assert keys(step.actions) == ["a", "b", "DDL", "c"]


def test_what_was_applied_is_dropped_when_it_comes_again() -> None:
    merger = Merger([P0], at(100))
    merger.add(P0, 0, row(90, "old"))
    merger.add(P0, 1, row(110, "new"))
    merger.add(P0, 2, Watermark(at(120)))
    step = merger.step()
    assert step is not None and keys(step.actions) == ["new"]
    assert merger.skipped == 1


def test_fragments_join_in_order_and_hold_back_the_commit_offset() -> None:
    value = bytes(range(256)) * 10
    pieces = list(split(value, 1000, "m.1"))
    assert len(pieces) == 3 and all(h is not None for _, h in pieces)
    joiner = Joiner()
    got = [
        joiner.add([h] if h else [], piece, 5 + i, "t[0]") for i, (piece, h) in enumerate(pieces)
    ]
    assert got[:2] == [None, None] and got[2] == value
    assert joiner.first_offset is None
    joiner.add([pieces[0][1]] if pieces[0][1] else [], pieces[0][0], 9, "t[0]")
    assert joiner.first_offset == 9
    assert list(split(b"small", 1000, "m.2")) == [(b"small", None)]


def test_a_fragment_without_its_first_fails_closed() -> None:
    with pytest.raises(FragmentError, match="without its first"):
        Joiner().add([(FRAGMENT_HEADER, b"m.1:1:3")], b"x", 0, "t[0]@0")
    with pytest.raises(FragmentError, match="bad cdc-fragment header"):
        Joiner().add([(FRAGMENT_HEADER, b"nonsense")], b"x", 0, "t[0]@0")
