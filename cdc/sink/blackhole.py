"""A sink that discards everything and counts it: for benchmarks of the upstream half
and for tests that need a sink without a server.

Counts are per table and op: rows and a rough byte size (the length of each
value's text form, what a text protocol would roughly carry). Everything handed
in is "durable" at once, so ``flushed`` is always the last position seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from cdc.config.uri import BlackholeSinkURI
from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.sink.base import SchemaLookup, Sink, SinkError

__all__ = ["BlackholeSink", "Tally"]


@dataclass
class Tally:
    """Rows and approximate bytes of one (table, op)."""

    rows: int = 0
    bytes: int = 0


def _rough_size(image: Mapping[str, Any] | None) -> int:
    if image is None:
        return 0
    size = 0
    for name, value in image.items():
        size += len(name)
        if value is None:
            size += 4
        elif isinstance(value, bytes | str):
            size += len(value)
        else:
            size += len(str(value))
    return size


class BlackholeSink(Sink):
    """Counts and discards. ``counts[(table, op)]`` and ``ddl_count`` say what it saw."""

    def __init__(
        self,
        uri: BlackholeSinkURI | None = None,
        schemas: SchemaLookup | None = None,
        changefeed_id: str = "",
    ) -> None:
        self._log = get_logger(__name__, changefeed=changefeed_id, sink="blackhole")
        self._counts: dict[tuple[TableName, Op], Tally] = {}
        self._ddl_count = 0
        self._last: Position | None = None
        self._closed = False

    @property
    def counts(self) -> Mapping[tuple[TableName, Op], Tally]:
        """Rows and rough bytes per (table, op), read-only."""
        return MappingProxyType(self._counts)

    @property
    def ddl_count(self) -> int:
        """How many DDL events were applied (discarded)."""
        return self._ddl_count

    @property
    def total_rows(self) -> int:
        return sum(t.rows for t in self._counts.values())

    def _check(self) -> None:
        if self._closed:
            raise SinkError("the blackhole sink is closed")

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        self._check()
        counts = self._counts
        for change in changes:
            if not isinstance(change, RowChange):
                raise SinkError(f"write_rows takes RowChange objects, not {change!r:.80}")
            slot = (change.table, change.op)
            tally = counts.get(slot)
            if tally is None:
                tally = counts[slot] = Tally()
            tally.rows += 1
            tally.bytes += _rough_size(change.before) + _rough_size(change.after)
            self._advance(change.position)

    def _advance(self, position: Position) -> None:
        if self._last is None or position > self._last:
            self._last = position

    def apply_ddl(self, ddl: DdlEvent) -> None:
        self._check()
        self._ddl_count += 1
        self._advance(ddl.position)

    def flush(self) -> Position | None:
        self._check()
        return self._last

    @property
    def flushed(self) -> Position | None:
        return self._last

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._log.info(
            "blackhole sink closed: %d rows, %d DDL, last position %s",
            self.total_rows,
            self._ddl_count,
            self._last,
        )
