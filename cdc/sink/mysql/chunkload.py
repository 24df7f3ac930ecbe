"""Snapshot chunks into a MySQL/MariaDB sink by ``LOAD DATA LOCAL INFILE`` (see ``loadfile``).

The statement path (:class:`cdc.sink.mysql.MySQLSink`) stays the fallback: a
downstream that refuses local files (MySQL 8's default ``local_infile=OFF``,
or a server built without it) is detected on the first chunk, said once in
the log with the setting to change, and every later chunk of this loader
returns ``False`` so the caller writes it with statements instead.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pymysql

from cdc.config.uri import MySQLSinkURI
from cdc.logs import get_logger
from cdc.model.schema import TableSchema
from cdc.sink.base import SinkError
from cdc.sink.mysql.chunkrange import clear_statement
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.loadfile import LoadFile, encode_rows, enum_errors, load_statement
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.snapshot.chunk import SnapshotChunk

__all__ = ["LOCAL_INFILE_REFUSED", "ChunkLoader"]

LOCAL_INFILE_REFUSED = frozenset({1148, 2068, 3948, 4166})
"""ER_NOT_ALLOWED_COMMAND, CR_LOAD_DATA_LOCAL_INFILE_REJECTED, MySQL 8's
ER_CLIENT_LOCAL_FILES_DISABLED, MariaDB's ER_LOAD_INFILE_CAPABILITY_DISABLED."""


def _refused(error: SinkError) -> bool:
    cause = error.__cause__
    return (
        isinstance(cause, pymysql.err.MySQLError)
        and bool(cause.args)
        and cause.args[0] in LOCAL_INFILE_REFUSED
    )


class ChunkLoader:
    """One connection and one load file, used by one thread (a Spark Python worker)."""

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
        self._file: LoadFile | None = None
        self.refused = False

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
        if self._file is None:
            self._file = LoadFile()
        path = self._file.write(encode_rows(schema, rows))
        try:
            statement = load_statement(schema, path, enum_errors(schema, rows))
            self._downstream.run([statement], transaction=False)
        except SinkError as exc:
            if not _refused(exc):
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
        if self._file is not None:
            self._file.remove()
