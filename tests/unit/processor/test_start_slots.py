"""A capture's start slots: how many starting pipelines hold a source connection at once."""

from __future__ import annotations

import threading

from processor.start_slots import StartSlots


def test_no_more_than_the_slots_are_held_and_a_release_is_idempotent() -> None:
    slots = StartSlots(2)
    stop = threading.Event()
    first, second, third = slots.slot(), slots.slot(), slots.slot()
    assert first.acquire(stop) and second.acquire(stop)
    stop.set()
    assert not third.acquire(stop)  # all held: it waits until stopped
    first.release()
    first.release()  # idempotent: a pipeline's finally releases what it may hold
    stop.clear()
    assert third.acquire(stop)
    assert not slots.slot().acquire(_set())


def test_a_waiting_start_gets_the_slot_given_back() -> None:
    slots = StartSlots(1)
    held, waiting = slots.slot(), slots.slot()
    stop = threading.Event()
    assert held.acquire(stop)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(waiting.acquire(stop)))
    waiter.start()
    held.release()
    waiter.join(5)
    assert got == [True]


def _set() -> threading.Event:
    event = threading.Event()
    event.set()
    return event
