"""A capture's start slots: how many starting pipelines hold a source connection at once."""

from __future__ import annotations

import threading

from processor.start_slots import StartSlots


def test_no_more_than_the_slots_are_held_and_a_release_is_idempotent() -> None:
    slots = StartSlots(2)
    stop, wake = threading.Event(), threading.Event()
    first, second, third = slots.slot(), slots.slot(), slots.slot()
    assert first.acquire(stop, wake) and second.acquire(stop, wake)
    stop.set()
    assert not third.acquire(stop, wake)  # all held: it waits until stopped
    first.release()
    first.release()  # idempotent: a pipeline's finally releases what it may hold
    stop.clear()
    assert third.acquire(stop, wake)
    assert not slots.slot().acquire(_set(), wake)


def test_a_waiting_start_gets_the_slot_given_back() -> None:
    slots = StartSlots(1)
    held, waiting = slots.slot(), slots.slot()
    stop = threading.Event()
    assert held.acquire(stop, threading.Event())
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(waiting.acquire(stop, threading.Event())))
    waiter.start()
    held.release()
    waiter.join(5)
    assert got == [True]


def _set() -> threading.Event:
    event = threading.Event()
    event.set()
    return event
