"""Where a snapshot task writes its chunks: kept open in a Spark Python worker for the
chunks it runs, closed when the worker goes idle (``sparkjobs.snapshot``).

Each sink kind says how its chunks go in (``SinkKind.chunk_sink``): through the
sink itself (:class:`ThroughSink`, the default), or another way (a database
sink loads a chunk as one file, a file sink writes it beside its change files).
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.snapshot.chunk import SnapshotChunk

if TYPE_CHECKING:  # the chunk readers, imported where chunks are read
    from cdc.snapshot.reader import ChunkResult
    from cdc.snapshot.repair import RepairOutcome, RepairRead
    from cdc.snapshot.streamed import LineTarget

__all__ = ["ChunkSink", "LinesRefused", "RangeRepairer", "ThroughSink"]


class LinesRefused(SinkError):
    """The sink cannot take this chunk as lines after all (a downstream refusing local
    files): the chunk is read again as rows, which the sink writes its other way."""


class ChunkSink(abc.ABC):
    """Writes snapshot chunks of one changefeed; used by one thread."""

    @abc.abstractmethod
    def write(
        self,
        schema: TableSchema,
        result: ChunkResult,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> None:
        """Writes ``result``'s rows and returns once they are durable.

        ``clear_range``: first remove what the chunk's key range holds downstream
        (a chunk read twice leaves exactly its second read), where the sink can.
        ``token``: the writer's fence token (from the etcd revision at which it proved
        it holds the chunk); a database sink refuses the write once a later holder wrote
        the chunk
        (``cdc.sink.mysql.chunkfence``), a file sink names the chunk's file by it and
        its readers take the largest (``cdc.sink.file.layout``); a broker has no check.
        """

    def lines(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> LineTarget | None:
        """Where ``chunk``'s rows may go as ``LOAD DATA`` lines, straight from the source
        (``cdc.snapshot.streamed``); None (the default): this sink takes rows only.
        ``token``: as for :meth:`write`."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Releases what is open; what ``write`` returned from is durable already."""


class RangeRepairer(abc.ABC):
    """Writes the chunks of a re-snapshot of a table whose stream keeps running
    (``SinkKind.range_repair``); used by one thread of a Spark worker."""

    @abc.abstractmethod
    def repair(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        predicate_sql: str | None,
        read: Callable[[], RepairRead],
        held: Callable[[Sequence[tuple[Any, ...]]], Sequence[bool]],
    ) -> RepairOutcome:
        """Runs ``read`` (the chunk's source window) and writes what it found, ordered
        against the stream's writes of the same rows; returns once durable. ``held``
        says which of some keys the source holds a row of now (``repair.keys_held``)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Releases the connection."""


class ThroughSink(ChunkSink):
    """A chunk's rows as READ row changes through a sink of the kind, flushed per chunk.

    The sink is opened by the first chunk (``open_sink`` with this writer's schema
    lookup), so a worker that runs none opens nothing. A range is not cleared:
    the rows go in by key.
    """

    def __init__(self, open_sink: Callable[[SchemaLookup], Sink]) -> None:
        self._open_sink = open_sink
        self._schemas: dict[TableName, TableSchema] = {}
        self._sink: Sink | None = None

    def write(
        self,
        schema: TableSchema,
        result: ChunkResult,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> None:
        if self._sink is None:
            self._sink = self._open_sink(self._schemas.__getitem__)
        self._schemas[schema.name] = schema
        self._sink.write_rows(list(result.row_changes()))
        self._sink.flush()

    def close(self) -> None:
        if self._sink is not None:
            self._sink.close()
