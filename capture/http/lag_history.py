"""The last hour of each changefeed's lag, kept in the server's memory for the console's chart.

    LagSampler ──every `interval` s──► reader.lags() ──► LagHistory.add(now, {cf: lag})
    GET /api/v1/changefeeds/{id}/lag ──► LagHistory.series(cf, now): [[t, lag|null], ...]

In memory on purpose: the chart needs no Prometheus, survives nothing, and costs
one read of each changefeed's tables per interval (decoded once per change).
Every capture samples the whole cluster, so any capture's console shows the
same chart after it has run for an hour. A changefeed removed is forgotten once
its last point is older than the window; a null point is a time when no table
of the changefeed ran (paused, failed, not scheduled yet).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from cdc.logs import get_logger

__all__ = ["INTERVAL", "WINDOW", "LagHistory", "LagSampler"]

WINDOW = 3600.0
INTERVAL = 5.0

Point = tuple[float, float | None]


class LagHistory:
    """Per changefeed, ``(time, lag)`` points of the last ``window`` seconds."""

    def __init__(self, window: float = WINDOW, interval: float = INTERVAL) -> None:
        self.window = window
        self.interval = interval
        self._points: dict[str, deque[Point]] = {}
        self._lock = threading.Lock()

    def add(self, at: float, lags: Mapping[str, float | None]) -> None:
        """Records each changefeed's lag at ``at``; drops points older than the window."""
        horizon = at - self.window
        with self._lock:
            for changefeed, lag in lags.items():
                points = self._points.setdefault(changefeed, deque())
                points.append((at, lag))
            for changefeed in list(self._points):
                points = self._points[changefeed]
                while points and points[0][0] < horizon:
                    points.popleft()
                if not points:
                    del self._points[changefeed]

    def series(self, changefeed: str, now: float) -> list[Point]:
        """The points of ``changefeed`` within the window before ``now``, oldest first."""
        horizon = now - self.window
        with self._lock:
            return [p for p in self._points.get(changefeed, ()) if p[0] >= horizon]


class LagSampler:
    """Adds ``sample()`` to ``history`` every ``history.interval`` seconds on a daemon thread.

    A failed sample (etcd unreachable) is logged once per failure streak and
    retried at the next interval: a gap in the chart, never a dead thread.
    """

    def __init__(self, sample: Callable[[], Mapping[str, float | None]], history: LagHistory):
        self._sample = sample
        self.history = history
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-history", daemon=True)
        self.log = get_logger(__name__)

    def start(self) -> LagSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                self.history.add(time.time(), self._sample())
                failing = False
            except Exception as exc:
                if not failing:
                    self.log.warning("lag history: sample failed, retrying: %s", exc)
                failing = True
            self._stop.wait(self.history.interval)
