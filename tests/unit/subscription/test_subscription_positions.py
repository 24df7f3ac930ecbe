"""One subscription: which events its filter takes, and how its acked position follows acks.

The acked position names a position whose events, as offered, were all acked;
it only grows. It never makes the subscription drop an event: a table that
joins the stream behind the others hands in older positions after newer ones.
"""

from __future__ import annotations

import threading

import pytest

from cdc.model import DdlEvent, DdlKind, Op, Position, RowChange, TableName
from cdc.subscription.errors import InvalidRequestError
from cdc.subscription.ring import Ring, RingClosedError, RingFullError
from cdc.subscription.subscription import Subscription, event_bytes, parse_rules

SHOP, CRM = TableName("shop", "orders"), TableName("crm", "people")


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def change(table: TableName, offset: int, key: int = 1) -> RowChange:
    return RowChange(table, Op.CREATE, None, {"id": key}, (key,), pos(offset))


def subscription(
    rules: list[str] | None = None, capacity: int = 64, acked: Position | None = None
) -> Subscription:
    return Subscription("c1", rules or ["shop.*"], Ring(capacity), acked)


def test_a_batch_ending_inside_a_transaction_does_not_ack_its_position() -> None:
    sub = subscription()
    for key in range(3):
        sub.offer(change(SHOP, 100, key))
    for key in range(2):
        sub.offer(change(SHOP, 200, key))
    assert sub.acked is None
    first = sub.get(2, 0)
    assert sub.ack(first.batch_id) is None, "only 2 of the 3 changes at 100 are acked"
    second = sub.get(2, 0)
    assert [e.position.offset for e in second.events] == [100, 200]
    assert sub.ack(second.batch_id) == pos(100)
    last = sub.get(10, 0)
    assert sub.ack(last.batch_id) == pos(100), "nothing proves that 200 is complete yet"
    sub.resolve(pos(200))
    assert sub.acked == pos(200)


def test_the_next_transaction_proves_the_last_one_complete() -> None:
    sub = subscription()
    sub.offer(change(SHOP, 100))
    sub.ack(sub.get(10, 0).batch_id)
    assert sub.acked is None
    sub.offer(change(SHOP, 200))
    assert sub.acked == pos(100)


def test_events_other_tables_move_the_acked_position_of_an_idle_client() -> None:
    sub = subscription()
    sub.offer(change(SHOP, 100))
    sub.ack(sub.get(10, 0).batch_id)
    assert sub.offer(change(CRM, 200)) is False
    assert sub.acked == pos(100)
    sub.offer(change(CRM, 300))
    assert sub.acked == pos(200)
    assert sub.ring.cursors().put == 1


def test_unacked_entries_hold_the_position_back_whatever_comes_later() -> None:
    sub = subscription()
    sub.offer(change(SHOP, 100))
    sub.offer(change(SHOP, 200))
    held = sub.get(1, 0)
    for offset in (300, 400, 500):
        sub.offer(change(CRM, offset))
    sub.resolve(pos(600))
    assert sub.acked is None
    sub.ack(held.batch_id)
    assert sub.acked == pos(100), "the change at 200 is not acked"
    sub.ack(sub.get(10, 0).batch_id)
    assert sub.acked == pos(600)


def test_rollback_does_not_move_the_acked_position() -> None:
    sub = subscription()
    for offset in (100, 200, 300):
        sub.offer(change(SHOP, offset))
    sub.ack(sub.get(1, 0).batch_id)
    assert sub.acked == pos(100)
    sub.get(5, 0)
    assert sub.rollback() == 2
    assert sub.acked == pos(100)
    again = sub.get(5, 0)
    assert [e.position.offset for e in again.events] == [200, 300]
    sub.ack(again.batch_id)
    assert sub.acked == pos(200)


def test_a_restored_subscription_drops_nothing_and_its_acked_position_never_goes_back() -> None:
    sub = subscription(acked=pos(200))
    assert sub.acked == pos(200)
    for offset in (100, 200, 200, 300):
        sub.offer(change(SHOP, offset))
    batch = sub.get(10, 0)
    assert [e.position.offset for e in batch.events] == [100, 200, 200, 300]
    sub.ack(batch.batch_id)
    assert sub.acked == pos(200), "300 is not known complete yet"
    sub.resolve(pos(150))
    assert sub.acked == pos(200)
    sub.resolve(pos(300))
    assert sub.acked == pos(300)


def test_a_table_joining_behind_the_stream_is_delivered_whatever_was_acked() -> None:
    sub = subscription(rules=["*.*"])
    for offset in (100, 200, 300):
        sub.offer(change(SHOP, offset))
    sub.ack(sub.get(10, 0).batch_id)
    sub.offer(change(CRM, 400))
    assert sub.acked == pos(300)
    late = change(CRM, 150, key=2)
    assert sub.offer(late) is True
    got = sub.get(10, 0)
    assert late in got.events and [e.position.offset for e in got.events] == [400, 150]


@pytest.mark.parametrize(
    ("event", "wanted"),
    [
        (change(SHOP, 1), True),
        (change(CRM, 1), False),
        (change(TableName("shop", "tmp_x"), 1), False),
        (DdlEvent(pos(1), "shop", (SHOP,), DdlKind.ADD_COLUMN, "ALTER TABLE orders ADD c"), True),
        (DdlEvent(pos(1), "crm", (CRM,), DdlKind.ADD_COLUMN, "ALTER TABLE people ADD c"), False),
        (
            DdlEvent(pos(1), "", (CRM, SHOP), DdlKind.RENAME_TABLE, "RENAME TABLE crm.people TO x"),
            True,
        ),
        (DdlEvent(pos(1), "", (), DdlKind.CREATE_SCHEMA, "CREATE DATABASE `shop`"), True),
        (DdlEvent(pos(1), "shop", (), DdlKind.DROP_SCHEMA, "DROP DATABASE crm"), False),
        (DdlEvent(pos(1), "", (), DdlKind.OTHER, "FLUSH PRIVILEGES"), False),
    ],
)
def test_filter_selects_rows_and_ddl(event: RowChange | DdlEvent, wanted: bool) -> None:
    sub = subscription(["shop.*", "!shop.tmp_*"])
    assert sub.wants(event) is wanted
    assert sub.offer(event) is wanted
    assert sub.ring.cursors().put == int(wanted)


def test_new_rules_apply_to_later_events() -> None:
    sub = subscription()
    sub.offer(change(SHOP, 100))
    sub.set_rules(["crm.*"])
    assert sub.rules == ("crm.*",)
    sub.offer(change(SHOP, 200))
    sub.offer(change(CRM, 300))
    assert [e.position.offset for e in sub.get(10, 0).events] == [100, 300]


def test_bad_rules_name_the_field() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_rules(["shop.*", "shop"])
    assert caught.value.field == "filter_rules[1]"
    assert "shop" in str(caught.value) and str(caught.value).startswith("filter_rules[1]: ")
    for empty in ([], ["", "# only a comment"]):
        with pytest.raises(InvalidRequestError, match="at least one table filter rule") as caught:
            parse_rules(empty)
        assert caught.value.field == "filter_rules"


def test_a_full_ring_blocks_offer_until_an_ack_or_close() -> None:
    sub = subscription(capacity=2)
    sub.offer(change(SHOP, 100))
    sub.offer(change(SHOP, 200))
    with pytest.raises(RingFullError):
        sub.offer(change(SHOP, 300), timeout=0.05)
    outcome: list[object] = []

    def producer() -> None:
        try:
            outcome.append(sub.offer(change(SHOP, 400)))
        except RingClosedError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=producer)
    thread.start()
    thread.join(0.2)
    assert thread.is_alive()
    sub.close()
    thread.join(2)
    assert isinstance(outcome[0], RingClosedError)


def test_a_blocked_offer_gives_up_when_its_check_raises() -> None:
    sub = subscription(capacity=1)
    sub.offer(change(SHOP, 100))
    calls: list[int] = []

    def check() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        sub.offer(change(SHOP, 200), check=check)
    assert len(calls) == 2
    assert sub.ring.cursors().put == 1


def test_event_bytes_counts_strings_and_bytes_by_length() -> None:
    small = change(SHOP, 1)
    big = RowChange(SHOP, Op.CREATE, None, {"id": 1, "note": "x" * 1000}, (1,), pos(1))
    assert event_bytes(big) - event_bytes(small) == len("note") + 1000
    ddl = DdlEvent(pos(2), "shop", (SHOP,), DdlKind.ADD_COLUMN, "ALTER TABLE orders ADD c INT")
    assert event_bytes(ddl) > len(ddl.statement)


def test_a_batch_is_cut_by_bytes_but_holds_one_event_however_large() -> None:
    sub = subscription()
    for n in range(4):
        sub.offer(RowChange(SHOP, Op.CREATE, None, {"v": "x" * 100}, (n,), pos(100 + n)))
    size = event_bytes(sub.get(1, 0).events[0])
    sub.rollback()
    assert len(sub.get(10, 0, max_bytes=2 * size + 1)) == 2
    assert len(sub.get(10, 0, max_bytes=1)) == 1
    assert len(sub.get(10, 0, max_bytes=10 * size)) == 1
