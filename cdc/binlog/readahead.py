"""Read-ahead for a puller whose rows are decoded by worker processes.

    reading thread: committed transactions as row events' bytes, DDL, resolved marks
        │ a transaction joins the open unit (consecutive transactions); anything else
        │ closes the open unit and is queued behind it
        ▼
    queue, in binlog order:  unit · unit · Resolved · unit · DdlEvent · ...
        │ the open unit goes to a worker as soon as one is idle, else when one frees:
        │ units stay one transaction while workers keep up and grow while they are busy
        ▼
    consumer (``Puller.events()``): each unit's row changes, the commit's ``Resolved``
    after a transaction's last row; a decode error raised where its transaction stood

The reading thread waits while ``max_bytes`` of row events are queued or
``max_parts`` transactions, so a consumer stalled at the barrier holds a
bounded read-ahead. Consecutive resolved marks with nothing between them are
kept as the last one (a stalled consumer and an idle table see the newest
boundary; every boundary in between had no row for the reader's tables).

Hold. What a reader decodes is decided when its reading thread reads a
table map (``TableMatcher``), ahead of the consumer. A table may only join
the reader where the reading thread stands, or its rows in the read-ahead
would be missing. So a consumer that wants to change the tables ``hold()``s:
the reading thread stops at its next transaction boundary, and once the
consumer has taken everything queued, ``drained()`` is true and the reading
thread stands exactly at the consumer's boundary, as without read-ahead. The
reading thread resumes when the consumer asks for the next event.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from cdc.binlog.decode_pool import DecodePool, DecodeSlot, DecodeWorkerError
from cdc.binlog.decode_worker import Event, Part
from cdc.binlog.rowdecode import BinlogDecodeError
from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position

__all__ = ["RawEvent", "RawTxn", "ReadAhead", "ReadAheadClosed", "Resolved"]

#: Row-event bytes queued before the reading thread waits (about 20,000 sysbench rows).
MAX_BYTES = 4 << 20
#: Transactions queued before the reading thread waits.
MAX_PARTS = 20_000
#: Row-event bytes of a unit that goes to a worker whether one is idle or not.
UNIT_BYTES = 256 << 10

RawEvent = tuple[tuple[bytes, str], int, bytes, int]
"""(table map: its bytes after the id and the server kind, row event type, event bytes,
end position)"""


@dataclass(frozen=True)
class Resolved:
    """Every change up to `position` has been handed out.

    ``source_time``: when the source's state at `position` was current, for lag:
    after a commit its time (the binlog event's header, whole seconds of the
    source's clock, or the last heartbeat's arrival when later); after a heartbeat
    its arrival, the reader being at the binlog's end then (``cdc.binlog.puller``).
    ``idle``: a heartbeat's, the source having sent nothing for a heartbeat period; a
    stream that has just caught up reports its checkpoint then, not a whole
    checkpoint interval later (``processor.shared_stream``).
    """

    position: Position
    source_time: float | None = None
    idle: bool = False


@dataclass
class RawTxn:
    """A committed transaction's row events, not decoded yet."""

    position: Position
    txn_id: str | None
    when: float
    events: list[RawEvent] = field(default_factory=list)
    size: int = 0


class ReadAheadClosed(Exception):
    """The consumer closed the read-ahead: the reading thread ends."""


class _Unit:
    """Consecutive transactions (or one part of a large one) decoded by one worker."""

    __slots__ = ("ends", "parts", "sent", "size", "slot", "tables", "whens")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.ends: list[bool] = []
        self.whens: list[float] = []
        self.tables: dict[tuple[bytes, str], int] = {}
        self.size = 0
        self.slot = DecodeSlot()
        self.sent = False

    def add(self, txn: RawTxn, events: list[RawEvent], size: int, *, ends: bool) -> None:
        tables = self.tables
        part: list[Event] = []
        for table, event_type, body, end in events:
            index = tables.get(table)
            if index is None:
                index = tables[table] = len(tables)
            part.append((index, event_type, body, end))
        self.parts.append((txn.position, txn.txn_id, part))
        self.ends.append(ends)
        self.whens.append(txn.when)
        self.size += size


_Item = _Unit | Resolved | DdlEvent | BaseException


class ReadAhead:
    """See the module docstring. The reading thread calls ``put_*`` and ``at_boundary``;
    the consumer iterates ``items()`` and may ``hold()``; anyone may ``close()``."""

    def __init__(
        self,
        pool: DecodePool,
        *,
        max_bytes: int = MAX_BYTES,
        max_parts: int = MAX_PARTS,
        unit_bytes: int = UNIT_BYTES,
    ) -> None:
        self._pool = pool
        self._max_bytes = max_bytes
        self._max_parts = max_parts
        self._unit_bytes = unit_bytes
        self._cond = threading.Condition()
        self._queue: deque[_Item] = deque()
        self._waiting: deque[_Unit] = deque()
        self._open: _Unit | None = None
        self._bytes = 0
        self._parts = 0
        self._hold = False
        self._paused = False
        self._mid = False
        self._ended = False
        self._closed = False
        self._unlisten = pool.listen(self._worker_freed)

    # --- the reading thread -----------------------------------------------------------------

    def put_txn(self, txn: RawTxn) -> None:
        """Queues a committed transaction; waits while the read-ahead is full."""
        with self._cond:
            self._wait_for_room()
            if not txn.events and self._open is None:
                self._put_resolved(Resolved(txn.position, txn.when))
                return
            if txn.size <= self._unit_bytes:
                unit = self._open_unit()
                unit.add(txn, txn.events, txn.size, ends=True)
            else:
                self._split(txn)
            self._bytes += txn.size
            self._parts += 1
            if self._open is not None and self._open.size >= self._unit_bytes:
                self._seal()
            send = self._to_send()
        self._send(send)

    def put_event(self, item: Resolved | DdlEvent | BaseException) -> None:
        """Queues a DDL, a resolved mark or the reading thread's error behind what is there."""
        with self._cond:
            if self._closed:
                raise ReadAheadClosed
            self._seal()
            if isinstance(item, Resolved):
                self._put_resolved(item)
            else:
                self._queue.append(item)
                self._cond.notify_all()
            send = self._to_send()
        self._send(send)

    def at_boundary(self) -> None:
        """The reading thread is between transactions: it stays here while held."""
        with self._cond:
            if not self._hold or self._closed:
                return
            self._seal()
            send = self._to_send()
            self._paused = True
            self._cond.notify_all()
        self._send(send)
        with self._cond:
            while self._hold and not self._closed:
                self._cond.wait()
            self._paused = False

    def finish(self) -> None:
        """The reading thread ended; the consumer ends once it took what is queued."""
        with self._cond:
            self._seal()
            self._ended = True
            send = self._to_send()
            self._cond.notify_all()
        self._send(send)

    def _wait_for_room(self) -> None:
        while (self._bytes >= self._max_bytes or self._parts >= self._max_parts) and (
            not self._closed
        ):
            self._cond.wait()
        if self._closed:
            raise ReadAheadClosed

    def _put_resolved(self, item: Resolved) -> None:
        queue = self._queue
        if queue and type(queue[-1]) is Resolved:
            queue[-1] = item
        else:
            queue.append(item)
        self._cond.notify_all()

    def _open_unit(self) -> _Unit:
        if self._open is None:
            self._open = _Unit()
            self._queue.append(self._open)
            self._cond.notify_all()
        return self._open

    def _split(self, txn: RawTxn) -> None:
        """A transaction larger than a unit goes in parts to several workers at once."""
        self._seal()
        events = txn.events
        start = 0
        while start < len(events):
            size = 0
            stop = start
            while stop < len(events) and (stop == start or size < self._unit_bytes):
                size += len(events[stop][2])
                stop += 1
            unit = self._open_unit()
            unit.add(txn, events[start:stop], size, ends=stop == len(events))
            self._seal()
            start = stop

    def _seal(self) -> None:
        if self._open is not None:
            self._waiting.append(self._open)
            self._open = None

    def _to_send(self) -> list[_Unit]:
        """Under the lock: the units to hand to workers now, marked sent. A sealed unit
        as large as a unit goes at once; others go while some worker is idle (the open
        one too, sealed), else they wait for a worker to free."""
        send: list[_Unit] = []
        while self._waiting and (
            self._waiting[0].size >= self._unit_bytes or self._pool.idle() or self._closed
        ):
            send.append(self._waiting.popleft())
        if self._open is not None and not self._waiting and self._pool.idle():
            send.append(self._open)
            self._open = None
        for unit in send:
            unit.sent = True
        return send

    def _send(self, units: list[_Unit]) -> None:
        for unit in units:
            if self._closed:
                unit.slot.set(None, ReadAheadClosed())
                continue
            try:
                self._pool.submit((list(unit.tables), unit.parts), unit.slot)
            except DecodeWorkerError as exc:
                unit.slot.set(None, exc)

    def _worker_freed(self) -> None:
        with self._cond:
            send = self._to_send()
        self._send(send)

    # --- the consumer ---------------------------------------------------------------------

    def hold(self) -> None:
        """Asks the reading thread to stop at its next transaction boundary."""
        with self._cond:
            self._hold = True

    def drained(self) -> bool:
        """Whether the reading thread is held and the consumer has taken everything it
        read: the consumer's boundary is the reading thread's."""
        with self._cond:
            return self._paused and not self._queue and not self._mid

    def items(self) -> Iterator[RowChange | DdlEvent | Resolved]:
        """Everything queued, in order, until the reading thread ended or ``close()``."""
        while True:
            with self._cond:
                while not self._queue and not self._ended and not self._closed:
                    if self._paused:
                        self._hold = False
                        self._cond.notify_all()
                    self._cond.wait()
                if self._closed or not self._queue:
                    return
                item = self._queue.popleft()
                if isinstance(item, _Unit):
                    self._mid = True
                    if item is self._open:
                        self._open = None
                        item.sent = True
                        send = [item]
                    elif not item.sent and item in self._waiting:
                        # Nothing frees a worker for it if none is busy: take it now.
                        self._waiting.remove(item)
                        item.sent = True
                        send = [item]
                    else:
                        send = []
            if isinstance(item, _Unit):
                self._send(send)
                yield from self._unit_items(item)
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item

    def _unit_items(self, unit: _Unit) -> Iterator[RowChange | Resolved]:
        slot = unit.slot
        slot.done.wait()
        with self._cond:
            self._bytes -= unit.size
            self._parts -= sum(unit.ends)
            self._cond.notify_all()
            if self._closed:
                self._mid = False
                return
        if slot.error is not None:
            self._mid = False
            raise slot.error
        assert slot.result is not None
        rows, error = slot.result
        last = len(unit.parts) - 1
        for index, part_rows in enumerate(rows):
            yield from part_rows
            if unit.ends[index]:
                if index == last:
                    self._mid = False
                position = unit.parts[index][0]
                yield Resolved(position, unit.whens[index])
        self._mid = False
        if error is not None:
            raise BinlogDecodeError(error[1])

    def close(self) -> None:
        """Ends the reading thread's waits and the consumer's; queued units are dropped."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
            unsent = [u for u in self._queue if isinstance(u, _Unit) and not u.sent]
        self._unlisten()
        for unit in unsent:
            unit.slot.set(None, ReadAheadClosed())
