"""The lease clock a capture's writes and snapshot shares ask before they act."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from capture.liveness import LeaseClock
from cdc.store import Lease


class _ScriptedLease(Lease):
    """A lease whose remaining TTL follows a script, then stays at its last value."""

    def __init__(self, answers: list[int]) -> None:
        self.id = 0xC0FFEE
        self.ttl = 3
        self._answers: Iterator[int] = iter(answers)
        self._last = answers[-1]
        self.asked = threading.Event()

    def remaining_ttl(self) -> int:
        self.asked.set()
        self._last = next(self._answers, self._last)
        return self._last


def _wait(condition: object, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_a_lease_read_at_zero_seconds_left_is_fresh_again_once_refreshed() -> None:
    """etcd rounds the TTL down: a live lease read just before its keep-alive says 0.
    The clock used to stop asking then, and the capture could never prove it again."""
    clock = LeaseClock(_ScriptedLease([3, 0, 0, 3]), margin=0.1).start()
    try:
        assert _wait(lambda: not clock.fresh())
        assert _wait(clock.fresh)
    finally:
        clock.stop()


def test_an_expired_lease_stays_not_fresh() -> None:
    clock = LeaseClock(_ScriptedLease([3, -1]), margin=0.1).start()
    try:
        assert _wait(lambda: not clock.fresh())
        time.sleep(1.5)
        assert not clock.fresh()
    finally:
        clock.stop()
