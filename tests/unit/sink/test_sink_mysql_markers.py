"""The lane-marker rule (cdc.sink.mysql.markers) without threads or servers: the flushed
position is the lowest marker every lane has passed, one transaction behind the newest
change until a flush closes it."""

from __future__ import annotations

import threading
import time

import pytest

from cdc.model import Position
from cdc.sink.mysql.markers import MarkerBook


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def call(book: MarkerBook, positions: list[int], lanes: list[int]) -> int:
    """One write_rows call: changes at ``positions``, items queued on ``lanes``."""
    seq = book.next_seq()
    for lane in lanes:
        book.enqueued(lane, seq)
    for offset in positions:
        book.note(pos(offset))
    book.publish(seq)
    return seq


def test_nothing_flushed_before_anything_is_written() -> None:
    book = MarkerBook(3)
    assert book.flushed() is None
    call(book, [100], [0])
    assert book.flushed() is None  # 100 is the newest position: it may continue


def test_a_position_counts_once_a_later_one_was_seen_or_the_group_is_closed() -> None:
    book = MarkerBook(1)
    call(book, [100, 100], [0])
    book.passed(0, 1)
    assert book.flushed() is None
    call(book, [100, 200], [0])  # the transaction at 100 spanned two calls
    book.passed(0, 1)
    assert book.flushed() == pos(100)
    seq = book.next_seq()
    book.close_group()
    book.publish(seq)
    assert book.flushed() == pos(200)


def test_flushed_is_the_minimum_over_lanes() -> None:
    book = MarkerBook(3)
    call(book, [100], [0, 1])  # seq 1
    call(book, [200], [1])  # seq 2: complete = 100
    call(book, [300], [1, 2])  # seq 3: complete = 200
    call(book, [400], [2])  # seq 4: complete = 300
    assert book.flushed() is None
    book.passed(1, 3)  # lane 1 done with seqs 1, 2, 3
    book.passed(2, 2)  # lane 2 done with seqs 3, 4
    assert book.flushed() is None  # lane 0 still holds seq 1
    assert book.lane_passed(0) == 0
    assert book.lane_passed(1) == 4  # nothing unfinished: passed every marker
    book.passed(0, 1)
    assert book.flushed() == pos(300)


def test_a_slow_lane_holds_the_position_where_its_oldest_item_was_queued() -> None:
    book = MarkerBook(2)
    call(book, [100], [0, 1])  # seq 1
    call(book, [200], [0])  # seq 2 (complete 100)
    call(book, [300], [1])  # seq 3 (complete 200)
    call(book, [400], [0])  # seq 4 (complete 300)
    book.passed(0, 3)
    assert book.flushed() is None  # lane 1 has not finished seq 1
    book.passed(1, 1)
    assert book.flushed() == pos(100)  # lane 1 still holds seq 3: P(2) = 100
    book.passed(1, 1)
    assert book.flushed() == pos(300)  # P(4)


def test_flushed_never_goes_back_and_ddl_positions_count_at_once() -> None:
    book = MarkerBook(1)
    call(book, [100], [0])
    call(book, [200], [0])
    book.passed(0, 2)
    assert book.flushed() == pos(100)
    seq = book.next_seq()
    book.set_position(pos(250))
    book.publish(seq)
    assert book.flushed() == pos(250)
    call(book, [90], [0])  # an older position (never expected) does not move it back
    book.passed(0, 1)
    assert book.flushed() == pos(250)


def test_wait_returns_when_every_lane_passed_or_when_told_to_stop() -> None:
    book = MarkerBook(2)
    seq = call(book, [100], [0, 1])
    assert book.wait(seq, lambda: False, timeout=0.05) is False
    stop = threading.Event()

    def release() -> None:
        time.sleep(0.05)
        book.passed(0, 1)
        time.sleep(0.05)
        book.passed(1, 1)

    thread = threading.Thread(target=release)
    thread.start()
    assert book.wait(seq, stop.is_set, timeout=5) is True
    thread.join()
    seq = call(book, [200], [0])
    stop.set()
    book.wake()
    assert book.wait(seq, stop.is_set, timeout=5) is False


def test_a_book_needs_a_lane() -> None:
    with pytest.raises(ValueError, match="at least one lane"):
        MarkerBook(0)
