"""One pull client of a changefeed: its filter, its ring, and how far it has acked.

Events reach a subscription mostly in binlog order; the changes of one
transaction share one position, so a batch may end in the middle of a
position. Three positions follow the stream (``<`` compares ``Position.key()``)::

    offered   q q q | p p p p | r        (every event, wanted by the filter or not)
    complete  the highest position whose events have all been offered:
              q becomes complete when an event at p > q arrives (or resolve(q))
    acked     the highest complete position whose wanted events are all acked:
              the `complete` seen when the first unacked entry was put,
              or `complete` itself when nothing is unacked

``acked`` is what the client is told, what is persisted and what the pull
sink reports as ``flushed``. It is a progress marker in the order events
were offered, and it only grows. It is not a promise about every event
before it in the binlog: a table that joins a capture's stream behind the
others (one created by a DDL while the stream ran on, or restarted after its
own failure) hands in changes at positions the stream has passed, after
later ones of other tables. So nothing is ever dropped because of ``acked``:
after a restart the changefeed replays each table from its own checkpoint,
which the pull sink only lets pass what every client acked
(``PullSink.flush``), and the subscription takes everything offered again.
Acked changes between a table's checkpoint and the restart come again: at
least once, never lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cdc.errors import ConfigError
from cdc.filter.event_filter import schema_of as schema_of_ddl
from cdc.filter.table_filter import TableFilter
from cdc.model.events import DdlEvent, DdlKind, RowChange
from cdc.model.position import Position
from cdc.subscription.errors import InvalidRequestError
from cdc.subscription.ring import Ring

__all__ = ["Event", "EventBatch", "Subscription", "parse_rules"]

Event = RowChange | DdlEvent

_SCHEMA_KINDS = frozenset(
    {DdlKind.CREATE_SCHEMA, DdlKind.DROP_SCHEMA, DdlKind.MODIFY_SCHEMA_CHARSET_AND_COLLATE}
)


@dataclass(frozen=True)
class EventBatch:
    """Events handed out together; ack ``batch_id`` once they are processed.

    The empty batch (``batch_id`` 0) needs no ack.
    """

    batch_id: int
    events: tuple[Event, ...]

    def __len__(self) -> int:
        return len(self.events)


@dataclass(frozen=True)
class _Item:
    event: Event
    complete: Position | None
    size: int


_SIZED = (str, bytes)
#: Bytes counted for any value that is not a string (a number, a date...).
_OTHER_VALUE_BYTES = 8


def event_bytes(event: Event) -> int:
    """About how many bytes ``event`` takes on the wire: string and bytes values by length,
    every other value 8. A Get's batch is cut by this sum (``PullSink.get``)."""
    if isinstance(event, DdlEvent):
        return 64 + len(event.statement)
    size = 64
    for image in (event.before, event.after):
        if image is None:
            continue
        for name, value in image.items():
            size += len(name) + (len(value) if isinstance(value, _SIZED) else _OTHER_VALUE_BYTES)
    return size


def parse_rules(rules: Sequence[str], field: str = "filter_rules") -> TableFilter:
    """The table filter of a subscription; a bad rule is ``InvalidRequestError`` naming it."""
    try:
        parsed = TableFilter.parse(rules, field=field)
    except ConfigError as exc:
        raise InvalidRequestError(exc.field, exc.message) from None
    if not any(r.strip(" \t") and not r.strip(" \t").startswith("#") for r in parsed.rules):
        raise InvalidRequestError(
            field, "give at least one table filter rule, e.g. 'shop.*' (or '*.*' for all tables)"
        )
    return parsed


def _later(a: Position | None, b: Position | None) -> bool:
    """Whether ``a`` lies after ``b`` in the binlog (None lies before everything)."""
    if a is None:
        return False
    return b is None or a.key() > b.key()


class Subscription:
    """A client's filter, ring and positions (module docstring). Thread-safe.

    The pipeline calls :meth:`offer` and :meth:`resolve` from one thread;
    the client's requests call :meth:`get`, :meth:`ack` and :meth:`rollback`
    from others.
    """

    def __init__(
        self,
        client_id: str,
        rules: Sequence[str],
        ring: Ring[_Item],
        acked: Position | None = None,
    ) -> None:
        self.client_id = client_id
        self._filter = parse_rules(rules)
        self.ring = ring
        self._last = acked
        self._complete = acked
        self._acked = acked
        self._lock = threading.Lock()

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(self._filter.rules)

    def set_rules(self, rules: Sequence[str]) -> None:
        """New rules for events offered from now on; entries already in the ring stay."""
        self._filter = parse_rules(rules)

    @property
    def acked(self) -> Position | None:
        """Every event at or before this position has been acked (module docstring)."""
        return self._acked

    def wants(self, event: Event) -> bool:
        """Whether the filter selects ``event``: a row of a matching table; a DDL touching
        a matching table, or acting on a schema the filter could match."""
        table_filter = self._filter
        if isinstance(event, RowChange):
            return table_filter.matches(event.table.schema, event.table.table)
        if event.tables:
            return any(table_filter.matches(t.schema, t.table) for t in event.tables)
        schema = schema_of_ddl(event) if event.kind in _SCHEMA_KINDS else event.schema
        return bool(schema) and table_filter.matches_schema(schema)

    def offer(
        self,
        event: Event,
        timeout: float | None = None,
        check: Callable[[], None] | None = None,
    ) -> bool:
        """Take ``event`` if wanted, waiting while the ring is full; whether it was taken.

        Raises ``RingFullError`` after ``timeout`` and ``RingClosedError``
        once the subscription is closed; while it waits, ``check()`` may end
        the wait by raising (``Ring.put``).
        """
        position = event.position
        with self._lock:
            if _later(position, self._last):
                if self._last is not None:
                    self._complete = self._last
                self._last = position
            complete = self._complete
        taken = self.wants(event)
        if taken:
            self.ring.put(_Item(event, complete, event_bytes(event)), timeout, check)
        self._refresh()
        return taken

    def resolve(self, position: Position) -> None:
        """Every event at or before ``position`` has been offered."""
        with self._lock:
            if not _later(self._last, position):
                self._last = position
            if _later(position, self._complete):
                self._complete = position
        self._refresh()

    def get(self, max_events: int, timeout: float, max_bytes: int | None = None) -> EventBatch:
        """Up to ``max_events`` events (and about ``max_bytes``, one event at least)."""
        if max_bytes is None:
            batch = self.ring.get(max_events, timeout)
        else:
            batch = self.ring.get(max_events, timeout, _size, max_bytes)
        return EventBatch(batch.batch_id, tuple(entry.item.event for entry in batch.entries))

    def ack(self, batch_id: int) -> Position | None:
        """Ack the oldest outstanding batch; the acked position after it."""
        self.ring.ack(batch_id)
        return self._refresh()

    def rollback(self) -> int:
        return self.ring.rollback()

    def close(self) -> None:
        self.ring.close()

    def _refresh(self) -> Position | None:
        # Read `complete` before the ring: if the ring is then empty, every
        # event put before `complete` was read has been acked.
        with self._lock:
            complete = self._complete
        first = self.ring.first_unacked()
        candidate = first.item.complete if first is not None else complete
        with self._lock:
            if _later(candidate, self._acked):
                self._acked = candidate
            return self._acked


def _size(item: _Item) -> int:
    return item.size
