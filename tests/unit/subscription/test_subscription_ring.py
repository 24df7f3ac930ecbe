"""The ring: its cursors, in-order acks, rollback, back-pressure and waiting, with threads."""

from __future__ import annotations

import random
import threading
import time

import pytest

from cdc.subscription.ring import (
    Cursors,
    OutOfOrderAckError,
    Ring,
    RingClosedError,
    RingFullError,
    UnknownBatchError,
)


def items(batch) -> list:
    return [entry.item for entry in batch.entries]


def test_get_hands_out_in_order_and_ack_frees_slots() -> None:
    ring: Ring[str] = Ring(4)
    for item in "abc":
        ring.put(item)
    first = ring.get(2)
    assert first.batch_id == 1 and items(first) == ["a", "b"]
    assert [e.seq for e in first.entries] == [0, 1]
    second = ring.get(10)
    assert second.batch_id == 2 and items(second) == ["c"]
    assert ring.cursors() == Cursors(ack=0, get=3, put=3)
    assert ring.outstanding() == (1, 2)
    assert items(ring.ack(1)) == ["a", "b"]
    assert ring.cursors() == Cursors(ack=2, get=3, put=3)
    assert ring.first_unacked().item == "c"
    ring.ack(2)
    assert ring.first_unacked() is None
    assert ring.outstanding() == ()


def test_empty_get_returns_batch_zero_after_waiting() -> None:
    ring: Ring[int] = Ring(2)
    started = time.monotonic()
    batch = ring.get(5, timeout=0.2)
    assert batch.batch_id == 0 and len(batch) == 0
    assert time.monotonic() - started >= 0.19
    assert ring.get(5).batch_id == 0


def test_get_wakes_when_an_entry_arrives() -> None:
    ring: Ring[int] = Ring(2)
    threading.Timer(0.1, ring.put, args=(7,)).start()
    started = time.monotonic()
    batch = ring.get(5, timeout=5)
    assert items(batch) == [7]
    assert time.monotonic() - started < 2


def test_acks_must_come_in_order() -> None:
    ring: Ring[int] = Ring(8)
    for n in range(4):
        ring.put(n)
    one, two = ring.get(2), ring.get(2)
    with pytest.raises(OutOfOrderAckError) as caught:
        ring.ack(two.batch_id)
    assert caught.value.expected == one.batch_id
    assert f"ack {one.batch_id} first" in str(caught.value)
    assert ring.cursors().ack == 0
    ring.ack(one.batch_id)
    ring.ack(two.batch_id)
    assert ring.cursors() == Cursors(4, 4, 4)


@pytest.mark.parametrize("bad", [0, -1, 99])
def test_ack_of_a_batch_never_handed_out_is_refused(bad: int) -> None:
    ring: Ring[int] = Ring(8)
    ring.put(1)
    batch = ring.get(1)
    with pytest.raises(UnknownBatchError) as caught:
        ring.ack(bad)
    assert caught.value.outstanding == (batch.batch_id,)
    assert "outstanding batches: 1" in str(caught.value)


def test_double_ack_is_refused() -> None:
    ring: Ring[int] = Ring(8)
    ring.put(1)
    batch = ring.get(1)
    ring.ack(batch.batch_id)
    with pytest.raises(UnknownBatchError, match="outstanding batches: none"):
        ring.ack(batch.batch_id)


def test_rollback_hands_out_again_under_new_ids_and_voids_the_old() -> None:
    ring: Ring[int] = Ring(8)
    for n in range(5):
        ring.put(n)
    one = ring.get(2)
    ring.ack(one.batch_id)
    two, three = ring.get(2), ring.get(2)
    assert ring.rollback() == 3
    assert ring.cursors() == Cursors(2, 2, 5)
    again = ring.get(10)
    assert items(again) == [2, 3, 4]
    assert again.batch_id > three.batch_id
    for stale in (two.batch_id, three.batch_id):
        with pytest.raises(UnknownBatchError):
            ring.ack(stale)
    ring.ack(again.batch_id)
    assert ring.rollback() == 0


def test_first_batch_id_is_honoured() -> None:
    ring: Ring[int] = Ring(2, first_batch_id=1_000)
    ring.put(1)
    assert ring.get(1).batch_id == 1_000
    ring.rollback()
    assert ring.get(1).batch_id == 1_001


def test_put_blocks_when_full_and_resumes_after_an_ack() -> None:
    ring: Ring[int] = Ring(3)
    for n in range(3):
        ring.put(n)
    with pytest.raises(RingFullError, match="3 entries not acked"):
        ring.put(99, timeout=0.1)
    done = threading.Event()

    def producer() -> None:
        ring.put(3)
        done.set()

    thread = threading.Thread(target=producer)
    thread.start()
    assert not done.wait(0.3)
    batch = ring.get(1)
    assert not done.wait(0.2), "handing out frees no slot; only an ack does"
    ring.ack(batch.batch_id)
    assert done.wait(2)
    thread.join()
    assert ring.cursors() == Cursors(1, 1, 4)


def test_close_wakes_every_waiter() -> None:
    ring: Ring[int] = Ring(1)
    ring.put(0)
    errors: list[BaseException] = []
    batches = []

    def producer() -> None:
        try:
            ring.put(1)
        except RingClosedError as exc:
            errors.append(exc)

    ring.get(1)
    consumer = threading.Thread(target=lambda: batches.append(ring.get(1, timeout=30)))
    waiter = threading.Thread(target=lambda: batches.append(ring.wait_acked()))
    threads = [threading.Thread(target=producer), consumer, waiter]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    ring.close()
    for thread in threads:
        thread.join(2)
        assert not thread.is_alive()
    assert len(errors) == 1
    assert sorted(map(repr, batches)) == sorted([repr(False), repr(ring.get(1))])
    with pytest.raises(RingClosedError):
        ring.put(2)


def test_wait_acked_times_out_and_succeeds() -> None:
    ring: Ring[int] = Ring(2)
    assert ring.wait_acked(0)
    ring.put(1)
    assert not ring.wait_acked(0.05)
    batch = ring.get(1)
    threading.Timer(0.1, ring.ack, args=(batch.batch_id,)).start()
    assert ring.wait_acked(5)


@pytest.mark.parametrize("capacity", [0, -1, True, 1.5])
def test_bad_capacity(capacity: object) -> None:
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        Ring(capacity)  # type: ignore[arg-type]


def test_bad_max_entries() -> None:
    with pytest.raises(ValueError, match="max_entries must be a positive int"):
        Ring(2).get(0)


def test_threads_with_random_acks_and_rollbacks_deliver_everything_in_order() -> None:
    """A producer pushes 2000 items through a ring of 16 while a consumer acks,
    acks out of order, acks stale ids and rolls back at random (seeded)."""
    total = 2000
    ring: Ring[int] = Ring(16)
    rng = random.Random(20240607)
    confirmed: list[int] = []
    received: list[int] = []

    def producer() -> None:
        for n in range(total):
            ring.put(n, timeout=10)

    thread = threading.Thread(target=producer)
    thread.start()
    outstanding: list = []
    stale: list[int] = []
    while len(confirmed) < total:
        choice = rng.random()
        if choice < 0.5 or not outstanding:
            batch = ring.get(rng.randint(1, 7), timeout=0.01)
            if batch.batch_id:
                received.extend(items(batch))
                outstanding.append(batch)
        elif choice < 0.8:
            batch = outstanding.pop(0)
            ring.ack(batch.batch_id)
            confirmed.extend(items(batch))
        elif choice < 0.88 and len(outstanding) > 1:
            with pytest.raises(OutOfOrderAckError):
                ring.ack(outstanding[1].batch_id)
        elif choice < 0.93 and stale:
            with pytest.raises(UnknownBatchError):
                ring.ack(rng.choice(stale))
        else:
            expected = sum(len(b) for b in outstanding)
            assert ring.rollback() == expected
            stale.extend(b.batch_id for b in outstanding)
            outstanding.clear()
        cursors = ring.cursors()
        assert cursors.ack <= cursors.get <= cursors.put <= cursors.ack + 16
    thread.join(5)
    assert confirmed == list(range(total))
    deduped = list(dict.fromkeys(received))
    assert deduped == list(range(total))
