"""The lane-marker rule: which position is durable when lanes write in parallel.

DESIGN.md: a marker carrying a position is sent down every lane; the safe
position is the lowest marker every lane has passed. Here a marker is a
sequence number ``s``, one per ``write_rows`` call (and per flush / DDL)::

    driver:  call s hands rows to lanes ── each lane with rows for s gets an item tagged s
             after the call: position P(s) = highest position whose changes were all handed in
    lane L:  commits its items in queue order; an item done = "L has passed its tag"
    passed(L) = (tag of L's oldest unfinished item) - 1, or the newest s when L has nothing
                unfinished (a lane with nothing queued has passed every marker sent so far)
    flushed  = P(min over lanes of passed(L))

Sending a marker item down an idle lane would be passed at once, so only the
lanes that have rows carry tags; the result is the rule above.

P(s) is deliberately one transaction behind the newest change: all rows of a
source transaction share its commit position, and a ``write_rows`` call may
end in the middle of one, so a position counts as complete only when a
later position has been seen, or at ``flush`` (which hands the caller
everything handed in so far).
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from collections.abc import Callable

from cdc.model.position import Position

__all__ = ["MarkerBook"]


class MarkerBook:
    """Marker sequence numbers, the positions they stand for, and each lane's progress.

    Driver-side methods (``note``, ``close_group``, ``next_seq``, ``enqueued``,
    ``publish``) are called by the one thread driving the sink; ``passed`` by
    lane threads; ``flushed`` and ``wait`` by anyone.
    """

    def __init__(self, lanes: int) -> None:
        if lanes < 1:
            raise ValueError(f"a sink needs at least one lane, not {lanes}")
        self._cond = threading.Condition()
        self._unfinished: list[deque[int]] = [deque() for _ in range(lanes)]
        self._published = 0
        self._seqs: list[int] = []
        self._positions: list[Position] = []
        self._handed: Position | None = None
        self._complete: Position | None = None

    # --- driver side -------------------------------------------------------------------------

    def note(self, position: Position) -> None:
        """A change at ``position`` was handed in (changes arrive in position order)."""
        handed = self._handed
        if position is handed or position == handed:
            return
        if handed is None:
            self._handed = position
        elif position > handed:
            self._complete = handed
            self._handed = position

    def close_group(self) -> None:
        """Everything handed in counts as complete (``flush``: the caller says so)."""
        self._complete = self._handed

    def set_position(self, position: Position) -> None:
        """A change that is complete by itself (a DDL) was handed in at ``position``."""
        if self._handed is None or position > self._handed:
            self._handed = position
        self._complete = self._handed

    def next_seq(self) -> int:
        """The marker number of the call in progress."""
        return self._published + 1

    def enqueued(self, lane: int, seq: int) -> None:
        """An item tagged ``seq`` is about to be queued on ``lane`` (call before queueing)."""
        with self._cond:
            self._unfinished[lane].append(seq)

    def publish(self, seq: int) -> None:
        """Call ``seq`` has queued all its items; it stands for the complete position now."""
        with self._cond:
            self._published = seq
            position = self._complete
            if position is not None and (not self._positions or position > self._positions[-1]):
                self._seqs.append(seq)
                self._positions.append(position)
            self._cond.notify_all()

    # --- lane side ---------------------------------------------------------------------------

    def passed(self, lane: int, items: int) -> None:
        """``lane`` has made its ``items`` oldest unfinished items durable."""
        if items <= 0:
            return
        with self._cond:
            unfinished = self._unfinished[lane]
            for _ in range(items):
                unfinished.popleft()
            self._cond.notify_all()

    def wake(self) -> None:
        """Wakes waiters so they re-check their stop condition (a lane failed)."""
        with self._cond:
            self._cond.notify_all()

    # --- queries -------------------------------------------------------------------------------

    def _safe_seq(self) -> int:
        published = self._published
        return min(
            (unfinished[0] - 1 if unfinished else published) for unfinished in self._unfinished
        )

    @property
    def published(self) -> int:
        """The marker of the newest call that has queued all its items."""
        return self._published

    def safe(self) -> int:
        """The newest marker every lane has passed: the items tagged up to it are durable."""
        with self._cond:
            return self._safe_seq()

    def lane_passed(self, lane: int) -> int:
        """The newest marker ``lane`` has passed."""
        with self._cond:
            unfinished = self._unfinished[lane]
            return unfinished[0] - 1 if unfinished else self._published

    @property
    def handed(self) -> Position | None:
        """The position of the newest change handed in."""
        return self._handed

    def flushed(self) -> Position | None:
        """The highest position every lane has passed: all changes up to it are durable."""
        with self._cond:
            safe = self._safe_seq()
            index = bisect.bisect_right(self._seqs, safe) - 1
            if index < 0:
                return None
            if index > 0:
                del self._seqs[:index]
                del self._positions[:index]
            return self._positions[0]

    def wait(self, seq: int, stop: Callable[[], bool], timeout: float | None = None) -> bool:
        """Blocks until every lane has passed marker ``seq`` (True) or ``stop()`` holds or
        ``timeout`` runs out (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._safe_seq() >= seq or stop(), timeout) and (
                self._safe_seq() >= seq
            )
