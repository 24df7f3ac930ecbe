"""A fixed number of slots handed out first come, first served, to waiters that sleep.

A capture gives its thousands of table pipelines a few slots at a time (a source
connection to start, a snapshot's turn). Waiting by polling (a semaphore asked
again every 100 ms so that a stop is noticed) made 3,333 waiting pipelines of one
capture wake 33,000 times a second: on 2 cores they starved the lease's
keep-alive and the capture lost its lease again and again
(``bench/control_plane_real_bench.py --tables 10000``). Here a waiter sleeps on
its own ``wake`` event until a release hands it the slot, or its owner sets the
event with its stop: what a wait costs no longer follows the number of waiters.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FairSlots", "Slot"]


@dataclass
class _Waiter:
    """A waiter: ``granted`` once a release handed it a slot."""

    wake: threading.Event
    granted: bool = False


class FairSlots:
    """``size`` slots; ``held`` and ``awaited`` say how many are taken and waited for.
    ``on_release`` is called after each release (a scheduler that waits for its
    holders to be ready learns that one left)."""

    def __init__(self, size: int, on_release: Callable[[], None] | None = None) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"slots must be an int of at least 1, not {size!r}")
        self.size = size
        self._on_release = on_release
        self._lock = threading.Lock()
        self._held = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def held(self) -> int:
        return self._held

    @property
    def awaited(self) -> int:
        with self._lock:
            return len(self._waiters)

    def slot(self) -> Slot:
        """A handle for one user (not held until ``acquire``)."""
        return Slot(self)

    def _acquire(self, stop: threading.Event, wake: threading.Event) -> bool:
        if stop.is_set():
            return False
        with self._lock:
            if not self._waiters and self._held < self.size:
                self._held += 1
                return True
            waiter = _Waiter(wake)
            self._waiters.append(waiter)
        while True:
            wake.clear()
            with self._lock:
                if waiter.granted:
                    break
                if stop.is_set():
                    self._waiters.remove(waiter)
                    return False
            wake.wait()
        if stop.is_set():  # handed a slot as it stopped: passed on
            self._release()
            return False
        return True

    def _release(self) -> None:
        with self._lock:
            if self._waiters:
                waiter = self._waiters.popleft()
                waiter.granted = True  # handed over: held stays the same
                waiter.wake.set()
            else:
                self._held -= 1
        if self._on_release is not None:
            self._on_release()


class Slot:
    """One user's hold on a slot; ``release`` is idempotent."""

    def __init__(self, slots: FairSlots) -> None:
        self._slots = slots
        self.held = False

    def acquire(self, stop: threading.Event, wake: threading.Event) -> bool:
        """Waits for a slot (first come, first served); False if ``stop`` was set first.
        ``wake``: the waiter's own event, set by its owner with ``stop`` and by a release
        that hands it the slot (cleared while waiting)."""
        if not self.held:
            self.held = self._slots._acquire(stop, wake)
        return self.held

    def release(self) -> None:
        if self.held:
            self.held = False
            self._slots._release()
