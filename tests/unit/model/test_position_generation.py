"""Positions across a failover of the source: generations order first, GTID sets decide
whether a transaction read again on the new server is one an old position covers."""

from __future__ import annotations

import pytest

from cdc.model.gtid import GtidSet
from cdc.model.position import Position


def _pos(file: str, offset: int, gtid: str | None, gen: int = 0) -> Position:
    return Position(file, offset, None if gtid is None else GtidSet.parse(gtid), gen)


def test_a_later_generation_orders_after_every_earlier_position() -> None:
    old = _pos("binlog.000900", 99_999, "0-1-500")
    new = _pos("binlog.000001", 4, "0-2-10", gen=1)
    assert new > old and old < new
    assert max(old, new) is new and min(old, new) is old
    assert new.key() > old.key()


def test_generation_zero_keeps_the_old_key_and_text() -> None:
    position = _pos("binlog.000003", 1234, "0-1-7")
    assert position.key() == (3, 1234)
    assert str(position) == "binlog.000003:1234 gtid=0-1-7"
    assert "gen" not in position.to_dict()


def test_generation_round_trips_through_text_and_json() -> None:
    position = _pos("replica-bin.000002", 88, "0-1-7", gen=2)
    assert str(position) == "replica-bin.000002:88 gtid=0-1-7 gen=2"
    assert Position.parse(str(position)) == position
    assert Position.from_dict(position.to_dict()) == position
    assert Position.from_json(position.to_json()) == position
    assert Position.parse("replica-bin.000002:88 gen=3").gen == 3


def test_positions_of_other_binlog_names_compare_across_generations_only() -> None:
    old = _pos("mysql-bin.000004", 10, None)
    with pytest.raises(ValueError, match="different binlogs"):
        _ = old < _pos("replica-bin.000001", 10, None)
    assert old < _pos("replica-bin.000001", 10, None, gen=1)


@pytest.mark.parametrize(
    ("new_gtid", "covered"),
    [("0-1-90", True), ("0-1-100", True), ("0-1-101", False), ("0-2-101", False)],
)
def test_within_decides_by_gtid_across_generations(new_gtid: str, covered: bool) -> None:
    floor = _pos("binlog.000007", 5000, "0-1-100")
    read_again = _pos("binlog.000001", 300, new_gtid, gen=1)
    assert read_again.within(floor) is covered


def test_within_is_position_order_on_one_server() -> None:
    a, b = _pos("binlog.000001", 10, "0-1-1"), _pos("binlog.000001", 20, "0-1-2")
    assert a.within(b) and not b.within(a) and a.within(a)


def test_within_proves_nothing_without_gtid_sets() -> None:
    assert not _pos("binlog.000001", 4, None, gen=1).within(_pos("binlog.000009", 4, None))


@pytest.mark.parametrize("bad", [-1, True, "1"])
def test_a_bad_generation_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="generation"):
        Position("binlog.000001", 4, None, bad)  # type: ignore[arg-type]


def test_stored_positions_keep_their_generation_through_the_decoding_cache() -> None:
    from cdc.changefeed.points import position_from, position_to

    position = _pos("binlog.000001", 134_771, "0-21-325", gen=1)
    same_place_before = _pos("binlog.000001", 134_771, "0-21-325")
    assert position_from(position_to(same_place_before)) == same_place_before
    assert position_from(position_to(position)) == position
