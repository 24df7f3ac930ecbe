"""Slots handed out in order to waiters that sleep until handed one or stopped."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from processor.fair_slots import FairSlots

WAIT = 5.0


class CountingEvent(threading.Event):
    """An event that counts how often its waiter woke up."""

    def __init__(self) -> None:
        super().__init__()
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return super().wait(timeout)


def until(check: Callable[[], bool], timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_waiter_sleeps_until_the_slot_is_handed_to_it() -> None:
    """Thousands of waiting pipelines must cost nothing while they wait: a waiter
    that polled (a semaphore asked again every 100 ms) starved a capture's lease."""
    slots = FairSlots(1)
    holder = slots.slot()
    assert holder.acquire(threading.Event(), threading.Event())
    wake, got = CountingEvent(), []
    waiter = slots.slot()
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(threading.Event(), wake)))
    thread.start()
    until(lambda: slots.awaited == 1)
    time.sleep(0.5)
    assert wake.waits == 1 and got == []
    holder.release()
    thread.join(WAIT)
    assert got == [True] and slots.held == 1 and slots.awaited == 0


def test_a_stopped_waiter_leaves_the_queue_and_is_not_handed_a_slot() -> None:
    released: list[int] = []
    slots = FairSlots(1, on_release=lambda: released.append(slots.held))
    holder = slots.slot()
    assert holder.acquire(threading.Event(), threading.Event())
    stop, wake, got = threading.Event(), threading.Event(), []
    waiter = slots.slot()
    thread = threading.Thread(target=lambda: got.append(waiter.acquire(stop, wake)))
    thread.start()
    until(lambda: slots.awaited == 1)
    stop.set()
    wake.set()  # the owner sets its waiter's wake with its stop
    thread.join(WAIT)
    assert got == [False] and slots.awaited == 0
    holder.release()
    assert slots.held == 0 and released == [0]


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_a_size_below_one_slot_is_refused(size: object) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FairSlots(size)  # type: ignore[arg-type]
