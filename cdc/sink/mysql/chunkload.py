"""Snapshot chunks into a MySQL/MariaDB sink by ``LOAD DATA LOCAL INFILE`` (see ``loadfile``).

The statement path (:class:`cdc.sink.mysql.MySQLSink`) stays the fallback: a
downstream that refuses local files (MySQL 8's default ``local_infile=OFF``,
or a server built without it) is detected on the first chunk, said once in
the log with the setting to change, and every later chunk of this loader
returns ``False`` so the caller writes it with statements instead. So does
every chunk of a sink URI with ``load-data-rows=0``. :class:`LoadOrStatements`
is that pairing, the MySQL sink kind's chunk sink (``SinkKind.chunk_sink``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from cdc.logs import get_logger
from cdc.model.schema import TableSchema
from cdc.sink.base import SinkError
from cdc.sink.chunks import ChunkSink
from cdc.sink.mysql.chunkrange import clear_statement
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.loadfile import load_statement
from cdc.sink.mysql.localfile import refuses_local_files
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.reader import ChunkResult

__all__ = ["ChunkLoader", "LoadOrStatements"]


class ChunkLoader:
    """One connection, used by one thread (a Spark Python worker)."""

    def __init__(
        self, uri: MySQLSinkURI, changefeed_id: str, options: MySQLSinkOptions | None = None
    ) -> None:
        options = options or MySQLSinkOptions()
        self._log = get_logger(__name__, changefeed=changefeed_id)
        self._downstream = Downstream(
            uri.connection,
            options,
            self._log,
            threading.Event(),
            read_timeout=options.read_timeout,
            local_infile=True,
        )
        self.refused = uri.load_data_rows == 0

    def load(
        self, schema: TableSchema, rows: Sequence[Mapping[str, Any]], *, where: str = ""
    ) -> bool:
        """Loads ``rows`` (canonical values by column name) into ``schema``'s table and
        returns once they are committed; ``False`` if the downstream refuses local
        files (write them another way). Other failures raise ``SinkError``, a value the
        downstream would change included (nothing of the chunk is then committed);
        ``where`` (the chunk's id and high watermark) leads its message."""
        if self.refused:
            return False
        if not rows:
            return True
        try:
            statement = load_statement(schema, rows, f"{len(rows)} row(s) of a snapshot chunk")
            self._downstream.run([statement], transaction=False)
        except SinkError as exc:
            if not refuses_local_files(exc):
                if not where:
                    raise
                raise SinkError(f"{where}: {exc.reason}", exc.statement) from exc
            self.refused = True
            self._log.warning(
                "the downstream refuses LOAD DATA LOCAL INFILE (%s); snapshot chunks are "
                "written with REPLACE statements instead, about half as fast: set "
                "local_infile=ON on the downstream server to load them",
                exc,
            )
            return False
        return True

    def clear(self, schema: TableSchema, chunk: SnapshotChunk) -> None:
        """Empties ``chunk``'s key range downstream (see ``chunkrange``)."""
        self._downstream.run([clear_statement(schema, chunk)], transaction=False)

    def close(self) -> None:
        self._downstream.close()


class LoadOrStatements(ChunkSink):
    """Each chunk as one LOAD DATA, or through ``statements`` (a sink's chunk writer) once
    the downstream refuses local files; ``statements`` opens its sink only then."""

    def __init__(self, loader: ChunkLoader, statements: ChunkSink) -> None:
        self.loader = loader
        self.statements = statements

    def write(self, schema: TableSchema, result: ChunkResult, *, clear_range: bool) -> None:
        if clear_range:
            self.loader.clear(schema, result.chunk)
        where = f"snapshot chunk {result.chunk.chunk_id} (high watermark {result.high_watermark})"
        if not self.loader.load(schema, result.rows, where=where):
            self.statements.write(schema, result, clear_range=False)

    def close(self) -> None:
        self.loader.close()
        self.statements.close()
