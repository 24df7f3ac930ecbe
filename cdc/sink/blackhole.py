"""A sink that discards everything and counts it: for benchmarks of the upstream half
and for tests that need a sink without a server.

Counts rows per table and op, and nothing more per row: benchmarks read it to
measure everything before the sink (bytes are in ``cdc_bytes_total`` for every
sink). Everything handed in is "durable" at once, so ``flushed`` is always the
last position seen. Its URI is ``blackhole://``, nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.kind import BareSinkURI, SinkKind

__all__ = ["BLACKHOLE", "BlackholeKind", "BlackholeSink", "BlackholeSinkURI"]


@dataclass(frozen=True)
class BlackholeSinkURI(BareSinkURI):
    """Discards every change; for benchmarks and tests of the upstream half."""

    kind = "blackhole"


class BlackholeSink(Sink):
    """Counts and discards. ``counts[(table, op)]`` (rows) and ``ddl_count`` say what it saw."""

    def __init__(
        self,
        uri: BlackholeSinkURI | None = None,
        schemas: SchemaLookup | None = None,
        changefeed_id: str = "",
    ) -> None:
        self._log = get_logger(__name__, changefeed=changefeed_id, sink="blackhole")
        self._counts: dict[tuple[TableName, Op], int] = {}
        self._ddl_count = 0
        self._last: Position | None = None
        self._closed = False

    @property
    def counts(self) -> Mapping[tuple[TableName, Op], int]:
        """Rows per (table, op), read-only."""
        return MappingProxyType(self._counts)

    @property
    def ddl_count(self) -> int:
        """How many DDL events were applied (discarded)."""
        return self._ddl_count

    @property
    def total_rows(self) -> int:
        return sum(self._counts.values())

    def _check(self) -> None:
        if self._closed:
            raise SinkError("the blackhole sink is closed")

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        self._check()
        counts = self._counts
        seen = None
        for change in changes:
            if not isinstance(change, RowChange):
                raise SinkError(f"write_rows takes RowChange objects, not {change!r:.80}")
            slot = (change.table, change.op)
            counts[slot] = counts.get(slot, 0) + 1
            if change.position is not seen:
                # the rows of one transaction share their Position object
                seen = change.position
                self._advance(seen)

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


class BlackholeKind(SinkKind[BlackholeSinkURI]):
    """The blackhole sink kind (``blackhole://``): see ``cdc.sink.kind``."""

    name = "blackhole"
    schemes = ("blackhole",)
    uri_type = BlackholeSinkURI

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> BlackholeSinkURI:
        return BlackholeSinkURI.parse(text, field)

    def open(
        self,
        uri: BlackholeSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        return BlackholeSink(uri, schemas, changefeed_id)


BLACKHOLE = BlackholeKind()
