"""The one interface every sink implements, and the errors it may raise.

    write_rows(batch)  ──► may buffer, may write in parallel lanes
    apply_ddl(ddl)     ──► first makes every earlier row durable, then runs the DDL
    flush()            ──► blocks until everything handed in is durable; returns that position
    flushed            ──► the highest position durably written so far (never ahead of the truth)
    close()

The contract the checkpoint depends on: a position is reported by `flush` or
`flushed` only after every change at or before it is durable in the sink. A
sink that writes in parallel lanes reports the lowest position every lane has
passed (DESIGN.md, "Incremental pipeline"). Rows are delivered at least once
(after a crash the pipeline replays from the checkpoint), so writes must be
idempotent: replaying a batch converges to the same result.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema

SchemaLookup = Callable[[TableName], TableSchema]
"""The schema a sink must use for a table's rows (from the schema history)."""


class SinkError(RuntimeError):
    """A permanent failure: retrying will not help; the changefeed goes to state error.

    `statement` is what failed (SQL text or file name, secrets masked) and
    `reason` the server's or the OS's words. Nothing after the failed change is
    written.
    """

    def __init__(self, reason: str, statement: str = "") -> None:
        self.reason = reason
        self.statement = statement
        super().__init__(f"{reason}" + (f" (statement: {statement})" if statement else ""))


class SinkClosed(SinkError):
    """The sink was closed under a write or a flush because its process is stopping or
    lost its lease (a pull sink whose clients did not ack in time). Nothing is wrong with
    the changefeed: the table ends without a report, its last reported checkpoint stands,
    and the capture that takes it next delivers the rest."""


class Sink(abc.ABC):
    """Where a changefeed's changes go. Not thread-safe: one pipeline drives it."""

    @abc.abstractmethod
    def write_rows(self, changes: Sequence[RowChange]) -> None:
        """Hands in row changes in their order; they may be buffered until `flush`."""

    @abc.abstractmethod
    def apply_ddl(self, ddl: DdlEvent) -> None:
        """Makes all earlier rows durable, then applies the DDL (or records it)."""

    @abc.abstractmethod
    def flush(self) -> Position | None:
        """Blocks until all handed-in changes are durable; the highest such position."""

    @property
    @abc.abstractmethod
    def flushed(self) -> Position | None:
        """The highest position known durable now, without waiting."""

    def written_mark(self) -> int | None:
        """A mark that every change handed in so far lies behind, for ``durable_mark``;
        None: this sink cannot tell without a ``flush``.

        A driver that must name a durable position now and then (a binlog reader's
        checkpoint) need not stall on the downstream each time: it notes the mark at
        each position and later names the newest position whose mark is durable."""
        return None

    def durable_mark(self) -> int | None:
        """The newest mark whose changes are all durable now, without waiting; None when
        the sink cannot tell (see ``written_mark``)."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Releases connections and files; does not flush (call `flush` first)."""
