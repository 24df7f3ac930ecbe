"""A bounded ring with Canal's three cursors: put (written), get (handed out), ack (confirmed).

    seq:   0    1    2    3    4    5    6    7
          [a]  [a]  [g]  [g]  [g]  [p]  [ ]  [ ]     capacity 8
                ^ack      ^get           ^put
          ack <= get <= put;  put - ack <= capacity

1. ``put(item)`` appends at ``put`` and blocks while ``put - ack == capacity``:
   a consumer that does not ack stops the producer (back-pressure). A blocked
   producer may be asked, every ``CHECK_INTERVAL`` seconds, whether to give up
   (``check``: its capture lost its lease, say).
2. ``get(n)`` hands out up to ``n`` entries from ``get`` as one ``Batch`` with
   a fresh id and moves ``get`` past them; it waits for at least one. With a
   ``weigh`` function it stops before ``max_weight`` (bytes on the wire), but
   always hands out one entry, however heavy.
3. ``ack(batch_id)`` confirms a batch and moves ``ack`` to its end, freeing
   its slots. As in Canal, batches must be acked in the order they were handed
   out: acking the second outstanding batch before the first is refused
   (``OutOfOrderAckError``), never taken to ack both, because a client that
   skips a batch by mistake would otherwise lose it silently.
4. ``rollback()`` moves ``get`` back to ``ack``: every outstanding batch is
   void (acking it is refused) and its entries are handed out again under new
   batch ids.

Batch ids only grow, also across rollbacks, so a stale id can never ack a
batch handed out later. Thread-safe: one ``Condition`` guards the cursors.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = [
    "CHECK_INTERVAL",
    "Batch",
    "Cursors",
    "Entry",
    "OutOfOrderAckError",
    "Ring",
    "RingClosedError",
    "RingFullError",
    "UnknownBatchError",
]

T = TypeVar("T")

#: Seconds between two calls of a blocked ``put``'s ``check``.
CHECK_INTERVAL = 0.5


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One item of the ring and its sequence number (0, 1, 2, ... in put order)."""

    seq: int
    item: T


@dataclass(frozen=True)
class Batch(Generic[T]):
    """Entries handed out together; ``batch_id`` 0 is the empty batch, which needs no ack."""

    batch_id: int
    entries: tuple[Entry[T], ...]

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Cursors:
    """The three cursors at one moment: next seq to ack, to hand out and to write."""

    ack: int
    get: int
    put: int


class RingClosedError(RuntimeError):
    """The ring was closed while waiting, or before the call."""


class RingFullError(TimeoutError):
    """``put`` waited its whole timeout for a free slot."""


class UnknownBatchError(ValueError):
    """The batch id is not outstanding: never handed out, already acked, or voided."""

    def __init__(self, batch_id: int, outstanding: tuple[int, ...]) -> None:
        self.batch_id = batch_id
        self.outstanding = outstanding
        listed = ", ".join(map(str, outstanding)) if outstanding else "none"
        super().__init__(
            f"batch {batch_id} is not outstanding (it was never handed out, was already "
            f"acked, or was voided by a rollback or a new subscribe); outstanding batches: "
            f"{listed}"
        )


class OutOfOrderAckError(ValueError):
    """An outstanding batch was acked before an older one."""

    def __init__(self, batch_id: int, expected: int) -> None:
        self.batch_id = batch_id
        self.expected = expected
        super().__init__(
            f"batch {batch_id} cannot be acked before batch {expected}: batches are acked "
            f"in the order they were handed out; ack {expected} first, or roll back"
        )


@dataclass(frozen=True)
class _Handed:
    batch_id: int
    start: int
    end: int


class Ring(Generic[T]):
    """The ring of the module docstring; ``first_batch_id`` is the id of the first batch."""

    def __init__(self, capacity: int, first_batch_id: int = 1) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"ring capacity must be a positive int, not {capacity!r}")
        if isinstance(first_batch_id, bool) or not isinstance(first_batch_id, int):
            raise ValueError(f"first batch id must be an int, not {first_batch_id!r}")
        if first_batch_id < 1:
            raise ValueError(
                f"first batch id must be >= 1 (0 is the empty batch), not {first_batch_id}"
            )
        self.capacity = capacity
        self._slots: list[Entry[T] | None] = [None] * capacity
        self._ack = 0
        self._get = 0
        self._put = 0
        self._next_batch = first_batch_id
        self._handed: deque[_Handed] = deque()
        self._closed = False
        self._cond = threading.Condition()

    def put(
        self,
        item: T,
        timeout: float | None = None,
        check: Callable[[], None] | None = None,
    ) -> Entry[T]:
        """Append ``item``; waits for a free slot up to ``timeout`` seconds (None: forever).

        Raises ``RingFullError`` when the time is up and ``RingClosedError``
        when the ring is or gets closed. While it waits, ``check()`` is called
        every ``CHECK_INTERVAL`` seconds; what it raises ends the wait.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed and self._put - self._ack >= self.capacity:
                wait = CHECK_INTERVAL if check is not None else None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise RingFullError(
                            f"the ring stayed full ({self.capacity} entries not acked) "
                            f"for {timeout}s"
                        )
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)
                if check is not None and not self._closed:
                    check()
            if self._closed:
                raise RingClosedError("the ring is closed")
            entry = Entry(self._put, item)
            self._slots[self._put % self.capacity] = entry
            self._put += 1
            self._cond.notify_all()
            return entry

    def get(
        self,
        max_entries: int,
        timeout: float = 0.0,
        weigh: Callable[[T], int] | None = None,
        max_weight: int = 0,
    ) -> Batch[T]:
        """Hand out up to ``max_entries`` entries as a new batch.

        Waits up to ``timeout`` seconds for the first one; returns the empty
        batch (id 0) when none came or the ring is closed. With ``weigh``, the
        batch ends before the entry that would take its weight past
        ``max_weight`` (the first entry is always taken).
        """
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries must be a positive int, not {max_entries!r}")
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            while not self._closed and self._get == self._put:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._closed or self._get == self._put:
                return Batch(0, ())
            start = self._get
            end = min(self._put, start + max_entries)
            entries = [self._slot(start)]
            weight = weigh(entries[0].item) if weigh is not None else 0
            for seq in range(start + 1, end):
                entry = self._slot(seq)
                if weigh is not None:
                    weight += weigh(entry.item)
                    if weight > max_weight:
                        break
                entries.append(entry)
            end = start + len(entries)
            batch_id = self._next_batch
            self._next_batch += 1
            self._handed.append(_Handed(batch_id, start, end))
            self._get = end
            return Batch(batch_id, tuple(entries))

    def ack(self, batch_id: int) -> Batch[T]:
        """Confirm the oldest outstanding batch; returns it (its entries are released)."""
        with self._cond:
            outstanding = tuple(h.batch_id for h in self._handed)
            if batch_id not in outstanding:
                raise UnknownBatchError(batch_id, outstanding)
            oldest = self._handed[0]
            if oldest.batch_id != batch_id:
                raise OutOfOrderAckError(batch_id, oldest.batch_id)
            self._handed.popleft()
            entries = tuple(self._slot(seq) for seq in range(oldest.start, oldest.end))
            for seq in range(oldest.start, oldest.end):
                self._slots[seq % self.capacity] = None
            self._ack = oldest.end
            self._cond.notify_all()
            return Batch(batch_id, entries)

    def rollback(self) -> int:
        """Void every outstanding batch; returns how many entries will be handed out again."""
        with self._cond:
            again = self._get - self._ack
            self._handed.clear()
            self._get = self._ack
            if again:
                self._cond.notify_all()
            return again

    def first_unacked(self) -> Entry[T] | None:
        """The entry at the ack cursor (handed out or not), or None when all are acked."""
        with self._cond:
            return self._slot(self._ack) if self._ack < self._put else None

    def wait_acked(self, timeout: float | None = None) -> bool:
        """Wait until every entry is acked; False when the time is up or the ring closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._closed and self._ack < self._put:
                if deadline is None:
                    self._cond.wait()
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return self._ack == self._put

    def cursors(self) -> Cursors:
        with self._cond:
            return Cursors(self._ack, self._get, self._put)

    def outstanding(self) -> tuple[int, ...]:
        """Ids of the batches handed out and not yet acked, oldest first."""
        with self._cond:
            return tuple(h.batch_id for h in self._handed)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Wake every waiter: ``put`` raises, ``get`` returns the empty batch. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _slot(self, seq: int) -> Entry[T]:
        entry = self._slots[seq % self.capacity]
        assert entry is not None and entry.seq == seq
        return entry
