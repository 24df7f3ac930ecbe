"""Snapshot chunks into a MySQL/MariaDB sink by ``LOAD DATA LOCAL INFILE`` (see ``loadfile``).

Statements stay the fallback: a downstream that refuses local files (MySQL 8's
default ``local_infile=OFF``, or a server built without it) is detected on the
first chunk, said once in the log with the setting to change, and every later
chunk of this loader goes as ``REPLACE`` statements of the sink's own
(``statements.TableWriter``) on the same connection instead. So does every chunk
of a sink URI with ``load-data-rows=0``. :class:`LoadOrStatements` is that
pairing, the MySQL sink kind's chunk sink (``SinkKind.chunk_sink``).

Every downstream transaction of a chunk written with a fence token begins with
the chunk's fence (``chunkfence``): a capture that lost the chunk to another
writes nothing of it.

A chunk may also come as lines (``cdc.snapshot.streamed``, the lean path):
:class:`LineLoad` loads each block of lines the source sent as one ``LOAD DATA``
and applies the window's binlog changes after them as statements by key. A
downstream refusing local files there raises :class:`LinesRefused`: the task reads
the chunk again the values way, which writes statements.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pymysql

from cdc.logs import get_logger
from cdc.model.events import Op, RowChange
from cdc.model.schema import TableSchema
from cdc.sink.base import SinkError
from cdc.sink.chunks import ChunkSink, LinesRefused
from cdc.sink.mysql.chunkfence import FENCE_TABLE, ChunkFenced, fence_setup, fence_statements
from cdc.sink.mysql.chunkrange import clear_statement
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.loadfile import LOCAL_FILE_NAME, TableLoad, load_statement
from cdc.sink.mysql.localfile import LocalFile, refuses_local_files
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.sink.mysql.statements import RowOp, Statement, TableWriter, plan
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.snapshot.chunk import Compare, SnapshotChunk
from cdc.snapshot.reader import ChunkResult
from cdc.snapshot.streamed import LineTarget
from cdc.snapshot.textlines import BARE_FORMAT
from cdc.typeconv import writable_columns

__all__ = ["ChunkLoader", "LineLoad", "LoadOrStatements"]

#: Rows per statement when a chunk's window changes are applied after its lines, and
#: when a chunk goes as statements.
_FOLD_ROWS = 256
#: What each write of a chunk begins with (``chunkfence``; empty: no fence token).
Fence = tuple[Statement, ...]
#: The server's errors for a database or table the user may not touch
#: (ER_DBACCESS_DENIED_ERROR, ER_TABLEACCESS_DENIED_ERROR), by code: their text follows
#: the server's ``lc_messages``.
_DENIED = frozenset({1044, 1142})


def _denied(exc: SinkError) -> bool:
    """Whether the server refused ``exc``'s statement for want of a privilege."""
    cause = exc.__cause__
    return (
        isinstance(cause, pymysql.err.MySQLError) and bool(cause.args) and cause.args[0] in _DENIED
    )


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
        self.changefeed_id = changefeed_id
        self._fence_ready = False

    def fence(self, chunk: SnapshotChunk, token: int | None) -> Fence:
        """What each write of ``chunk`` by ``token``'s holder begins with; nothing without
        a token. Makes the fence's table first, once per connection."""
        if token is None:
            return ()
        if not self._fence_ready:
            try:
                for statement in fence_setup():
                    self._downstream.run([statement], transaction=False)
            except SinkError as exc:
                if not _denied(exc):
                    raise
                raise SinkError(
                    f"{exc.reason}: the snapshot's chunk fence is a table the sink's user "
                    f"must be allowed to create and write (GRANT CREATE, INSERT, UPDATE, "
                    f"SELECT ON `{FENCE_TABLE.schema}`.* TO the sink's user)",
                    exc.statement,
                ) from exc
            self._fence_ready = True
        return fence_statements(self.changefeed_id, chunk.chunk_id, token)

    def load(
        self,
        schema: TableSchema,
        rows: Sequence[Mapping[str, Any]],
        *,
        where: str = "",
        fence: Fence = (),
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
        statement = load_statement(schema, rows, f"{len(rows)} row(s) of a snapshot chunk")
        return self.run_load(statement, where, fence)

    def run_load(self, statement: Statement, where: str = "", fence: Fence = ()) -> bool:
        """Runs one ``LOAD DATA`` statement after ``fence`` (see :meth:`load` for what it
        returns)."""
        if self.refused:
            return False
        try:
            self._downstream.run([*fence, statement], transaction=True)
        except ChunkFenced:
            raise
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

    def clear(self, schema: TableSchema, chunk: SnapshotChunk, fence: Fence = ()) -> None:
        """Empties ``chunk``'s key range downstream (see ``chunkrange``) after ``fence``."""
        self._downstream.run([*fence, clear_statement(schema, chunk)], transaction=True)

    def begin(self, schema: TableSchema, chunk: SnapshotChunk, fence: Fence, clear: bool) -> None:
        """A chunk's first write: its range cleared (``clear``), or else its fence raised
        alone, so that a chunk that writes nothing more (no rows) still holds back the
        late writes of a capture that lost it."""
        if clear:
            self.clear(schema, chunk, fence)
        elif fence:
            self._downstream.run(fence, transaction=True)

    def run(self, statements: Sequence[Statement], fence: Fence = ()) -> None:
        """Runs ``statements`` in one transaction, after ``fence``."""
        if statements:
            self._downstream.run([*fence, *statements], transaction=True)

    def close(self) -> None:
        self._downstream.close()


class LoadOrStatements(ChunkSink):
    """Each chunk as one LOAD DATA, or as statements in one transaction once the
    downstream refuses local files."""

    def __init__(self, loader: ChunkLoader) -> None:
        self.loader = loader

    def write(
        self,
        schema: TableSchema,
        result: ChunkResult,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> None:
        fence = self.loader.fence(result.chunk, token)
        self.loader.begin(schema, result.chunk, fence, clear_range)
        where = f"snapshot chunk {result.chunk.chunk_id} (high watermark {result.high_watermark})"
        if not self.loader.load(schema, result.rows, where=where, fence=fence):
            writer = TableWriter(schema, safe_mode=True)
            ops = [
                writer.upsert(c.after, writer.key_of(c.after, c.position), c.position)
                for c in result.row_changes()
                if c.after is not None
            ]
            self.loader.run(plan(ops, _FOLD_ROWS), fence)

    def lines(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> LineTarget | None:
        if self.loader.refused:
            return None
        return LineLoad(self.loader, schema, chunk, clear_range=clear_range, token=token)

    def close(self) -> None:
        self.loader.close()


class LineLoad(LineTarget):
    """One chunk's lines into the downstream through ``loader`` (see the module doc)."""

    def __init__(
        self,
        loader: ChunkLoader,
        schema: TableSchema,
        chunk: SnapshotChunk,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> None:
        self.loader = loader
        self.schema = schema
        self.chunk = chunk
        self.clear_range = clear_range
        self._fence = loader.fence(chunk, token)
        self._load = TableLoad(schema.name, writable_columns(schema.columns))
        self._bare_load: TableLoad | None = None
        self._blocks = 0

    def begin(self) -> None:
        self.loader.begin(self.schema, self.chunk, self._fence, self.clear_range)

    def block(self, data: bytes, rows: int, bare: bool) -> None:
        self._blocks += 1
        what = f"{rows} line(s) of snapshot chunk {self.chunk.chunk_id}, block {self._blocks}"
        load = self._load
        if bare:
            if self._bare_load is None:
                columns = writable_columns(self.schema.columns)
                self._bare_load = TableLoad(self.schema.name, columns, BARE_FORMAT)
            load = self._bare_load
        statement = Statement(
            load.sql,
            f"LOAD DATA LOCAL INFILE ... REPLACE INTO TABLE {self.schema.name.quoted()} [{what}]",
            local_file=LocalFile(LOCAL_FILE_NAME, data),
        )
        where = f"snapshot chunk {self.chunk.chunk_id}"
        if not self.loader.run_load(statement, where, self._fence):
            raise LinesRefused(
                f"the downstream refuses LOAD DATA LOCAL INFILE; chunk {self.chunk.chunk_id} "
                "is written with statements instead"
            )

    def fold(self, changes: Sequence[RowChange], compare: Compare | None) -> None:
        writer = TableWriter(self.schema, safe_mode=True)
        column = self.chunk.key_column
        ops: list[RowOp] = []
        for change in changes:
            before, after = change.before, change.after
            if (
                change.op in (Op.DELETE, Op.UPDATE)
                and before is not None
                and self.chunk.contains(before[column], compare)
            ):
                ops.append(writer.delete(writer.key_of(before, change.position), change.position))
            if (
                change.op in (Op.CREATE, Op.UPDATE)
                and after is not None
                and self.chunk.contains(after[column], compare)
            ):
                key = writer.key_of(after, change.position)
                ops.append(writer.upsert(after, key, change.position))
        self.loader.run(plan(ops, _FOLD_ROWS), self._fence)
