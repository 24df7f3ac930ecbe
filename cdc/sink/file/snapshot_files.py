"""Snapshot chunks into a file sink's root: one file per chunk, written by the Spark task.

The sink itself (:class:`cdc.sink.file.sink.FileSink`) has one writer per root
and a checkpoint that only moves forward; chunks run in parallel, each at its
own high watermark, so they go beside it, under ``<root>/snapshot/`` (see
``layout``), never through it:

* a chunk's file is complete or absent (temporary file, fsync, rename), and
  named by the chunk and the writer's fence token (``cdc.sink.mysql.chunkfence``):
  a chunk that runs again replaces its own file; a capture that took the chunk
  over writes a file of a larger token, which readers take instead (``layout.
  snapshot_files``), so a late file of the capture that lost the chunk is never
  read. The smaller ones stay (only a takeover leaves one): removing them could
  pull a file from under a reader that listed the folder before;
* temporary names are unique per writer (``.<name>.<random>.part``), since
  tasks of one table write the same ``schema.json`` side by side, and the
  sink's repair (which removes ``*.tmp`` files when a sink opens the root)
  leaves them alone;
* whether a chunk counts is decided in etcd, as for every sink: a file
  without its chunk recorded as done is rewritten when the chunk runs again.

Readers place each chunk's rows at its high watermark among the root's change
files and DDL files: the binlog changes the sink records are, per key, later
than the chunk that holds the key, and a DDL of the table before the watermark
is already in the rows' schema (see ``cdc.sink.file.reader``). :class:`ChunkFiles` is the
file sink kind's chunk sink (``SinkKind.chunk_sink``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from cdc.model.events import RowChange
from cdc.model.schema import TableSchema
from cdc.sink.base import SinkError
from cdc.sink.chunks import ChunkSink
from cdc.sink.file.codec import FileFormatError
from cdc.sink.file.layout import (
    SCHEMA_FILE,
    SNAPSHOT_DIR,
    make_dirs,
    snapshot_file_name,
    version_dir,
    write_atomic,
)
from cdc.sink.file.manifest import read_schema_file, schema_file_bytes
from cdc.sink.file.sink import codec_for
from cdc.sink.file.uri import FileSinkURI
from cdc.snapshot.reader import ChunkResult

__all__ = ["ChunkFiles", "snapshot_folder", "write_chunk"]


def snapshot_folder(root: Path, schema: TableSchema) -> Path:
    """``<root>/snapshot/<schema>/<table>/<version>``."""
    return version_dir(root / SNAPSHOT_DIR, schema.name, schema.version)


def _ensure_schema(folder: Path, schema: TableSchema) -> None:
    path = folder / SCHEMA_FILE
    if path.exists():
        try:
            held = read_schema_file(path).schema
        except FileFormatError as exc:
            raise SinkError(str(exc), str(path)) from exc
        if held != schema:
            raise SinkError(
                f"the snapshot of {schema.name} version {schema.version} was started with "
                f"other columns ({list(held.column_names)} vs {list(schema.column_names)}); "
                "remove the snapshot folder and snapshot the table again",
                str(path),
            )
        return
    write_atomic(path, schema_file_bytes(schema, None), shared=True)


def write_chunk(
    uri: FileSinkURI,
    schema: TableSchema,
    chunk_id: str,
    rows: Sequence[RowChange],
    token: int | None = None,
) -> Path:
    """Writes one chunk's READ row changes as ``snapshot/.../chunk-<id>.t<token>.<ext>``
    and returns its path once it is durable; ``SinkError`` on a file system error."""
    codec = codec_for(uri.protocol)
    folder = snapshot_folder(Path(uri.path), schema)
    path = folder / snapshot_file_name(chunk_id, codec.extension, token)
    encode = codec.encoder(schema)
    now_ms = int(time.time() * 1000)
    data = b"".join(encode(row, now_ms) for row in rows)
    try:
        make_dirs(folder)
        _ensure_schema(folder, schema)
        write_atomic(path, data, shared=True)
    except OSError as exc:
        raise SinkError(f"file system error: {exc}", str(path)) from exc
    return path


class ChunkFiles(ChunkSink):
    """Chunks as files beside the sink's change files (:func:`write_chunk`)."""

    def __init__(self, uri: FileSinkURI) -> None:
        self.uri = uri

    def write(
        self,
        schema: TableSchema,
        result: ChunkResult,
        *,
        clear_range: bool,
        token: int | None = None,
    ) -> None:
        """A chunk's file replaces the file of an earlier read of it: nothing to clear."""
        rows = list(result.row_changes())
        write_chunk(self.uri, schema, result.chunk.chunk_id, rows, token)

    def close(self) -> None:
        """Nothing stays open between chunks."""
