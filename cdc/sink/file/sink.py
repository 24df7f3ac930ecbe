"""The file sink: row changes as canal-json or csv files under one folder (TiCDC's storage sink).

Layout and formats: :mod:`cdc.sink.file.layout`, :mod:`cdc.sink.file.canal_json`,
:mod:`cdc.sink.file.csv_format`, :mod:`cdc.sink.file.manifest`.

How a change becomes durable::

    write_rows(change)
      ├─ schema = lookup(table)          version folder <schema>/<table>/<version>/,
      │                                  schema.json written (atomically) on first use
      ├─ append to the table's open file .CDC0000000n.<ext>.tmp
      │    rolled when it reaches file-size, only between two positions, so
      │    one transaction's rows of one table are never split by a roll
      └─ once flush-interval has passed since the last flush, at the next
         position boundary: flush()
    flush()
      1. every open file: flush, fsync, rename to CDC0000000n.<ext>, fsync folder
      2. then metadata: each table's checkpoint = the highest position of its rows
         handed in (atomic rewrite)
    apply_ddl(ddl)
      flush(), then record_ddl: ddl/<position>.json (atomic); the next rows of the
      table go to the version folder the lookup names

So no checkpoint runs ahead of what is on disk, and a crash leaves only
whole files plus temporary ones. Opening the root again (:mod:`.repair`)
removes the temporaries and every table's changes past its checkpoint;
changes at or before it that the restarted changefeed sends again are
dropped on arrival. Every change is thus in the files once.

Checkpoints are per table because tables do not move through the binlog
together: a table that joins a running changefeed is read by a catch-up
reader behind the others (processor/shared_stream.py), so its rows arrive at
positions the other tables passed long ago. A position is complete for a
table once its rows are handed in: the shared stream hands a transaction's
rows in one call, never split across calls.

In cdc-server the owner records DDL (``FileKind.apply_ddl`` calls
:func:`record_ddl`) while the capture's sink holds the root: a DDL file is
written once every table reached the DDL, under a name of its own, so it
needs no lock and is never removed by a repair.

A flock on ``<root>/.lock`` keeps a second sink out of the same root: the
owner schedules all of a file-sink changefeed's tables on one capture
(``FileKind.one_writer``).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO

from cdc.logs import get_logger
from cdc.model.events import DdlEvent, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.file.canal_json import CanalJsonCodec, encode_ddl
from cdc.sink.file.codec import FileFormatError, RowCodec, RowEncoder
from cdc.sink.file.csv_format import CsvCodec
from cdc.sink.file.layout import (
    DDL_DIR,
    LOCK_FILE,
    SCHEMA_FILE,
    SNAPSHOT_DIR,
    data_file_name,
    data_files,
    ddl_file_name,
    fsync_dir,
    is_temp,
    make_dirs,
    temp_path,
    version_dir,
    write_atomic,
)
from cdc.sink.file.manifest import (
    Metadata,
    read_metadata,
    read_schema_file,
    schema_file_bytes,
    write_metadata,
)
from cdc.sink.file.repair import RepairReport, remove_temp_files, truncate_to_checkpoint
from cdc.sink.file.uri import FileProtocol, FileSinkURI

__all__ = ["FileSink", "codec_for", "record_ddl"]

_CODECS: dict[FileProtocol, Callable[[], RowCodec]] = {
    FileProtocol.CANAL_JSON: CanalJsonCodec,
    FileProtocol.CSV: CsvCodec,
}


def codec_for(protocol: FileProtocol) -> RowCodec:
    """The codec of a protocol; SinkError for one the file sink does not write."""
    factory = _CODECS.get(protocol)
    if factory is None:
        supported = ", ".join(f"protocol={p.value}" for p in _CODECS)
        raise SinkError(
            f"the file sink does not write protocol={protocol.value} yet; use {supported}"
        )
    return factory()


def record_ddl(root: Path, ddl: DdlEvent) -> Path:
    """Writes ``ddl`` to ``<root>/ddl/<position>.json`` (atomically); its path.

    Idempotent: the same DDL gives the same file. Needs no lock: nothing else
    writes that name, and readers see the whole file or none.
    """
    folder = root / DDL_DIR
    path = folder / ddl_file_name(ddl.position)
    try:
        if not folder.is_dir():
            make_dirs(folder)
        write_atomic(path, encode_ddl(ddl, int(time.time() * 1000)))
    except OSError as exc:
        raise SinkError(f"file system error: {exc}", str(path)) from exc
    return path


class _OpenFile:
    """The file a table's rows go to now, under its temporary name."""

    __slots__ = ("encoder", "final", "handle", "last_key", "schema", "size", "tmp")

    def __init__(self, final: Path, schema: TableSchema, encoder: RowEncoder) -> None:
        self.final = final
        self.tmp = temp_path(final)
        self.schema = schema
        self.encoder = encoder
        self.handle: IO[bytes] = open(self.tmp, "wb")  # noqa: SIM115 - closed by finish/abandon
        self.size = 0
        self.last_key: tuple[int, int] | None = None

    def write(self, data: bytes, key: tuple[int, int]) -> None:
        self.handle.write(data)
        self.size += len(data)
        self.last_key = key

    def finish(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.tmp, self.final)
        fsync_dir(self.final.parent)

    def abandon(self) -> None:
        self.handle.close()
        self.tmp.unlink(missing_ok=True)


class FileSink(Sink):
    """Writes a changefeed's changes as files under ``uri.path`` (see the module docstring).

    ``clock`` (monotonic seconds) decides when ``flush-interval`` has passed;
    tests pass their own.
    """

    def __init__(
        self,
        uri: FileSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(uri, FileSinkURI):
            raise SinkError(f"FileSink needs a FileSinkURI (file:///path), not {uri!r}")
        if not isinstance(changefeed_id, str) or not changefeed_id.strip():
            raise SinkError(f"changefeed id must be a non-empty string, not {changefeed_id!r}")
        if not callable(schemas):
            raise SinkError("schemas must be a callable TableName -> TableSchema")
        self.codec = codec_for(uri.protocol)
        self.root = Path(uri.path)
        self.uri = uri
        self.changefeed_id = changefeed_id
        self._schemas = schemas
        self._clock = clock
        self._log = get_logger(__name__, changefeed=changefeed_id)
        self._files: dict[TableName, _OpenFile] = {}
        self._encoders: dict[tuple[TableName, int], tuple[TableSchema, RowEncoder]] = {}
        self._ready: dict[Path, TableSchema] = {}
        self._next_seq: dict[Path, int] = {}
        self._ddl_of: dict[TableName, DdlEvent] = {}
        self._last_key: tuple[int, int] | None = None
        self._closed = False
        self._lock_fd = -1
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._lock()
            metadata = self._open_root()
        except OSError as exc:
            self._release()
            raise SinkError(f"cannot open the file sink root: {exc}", str(self.root)) from exc
        except (SinkError, FileFormatError) as exc:
            self._release()
            if isinstance(exc, SinkError):
                raise
            raise SinkError(f"cannot repair the file sink root: {exc}", exc.where) from exc
        self._flushed: Position | None = metadata.checkpoint
        self._high: Position | None = metadata.checkpoint
        #: Per table: the checkpoint written, the highest position handed in (the
        #: checkpoint until a row comes), and (until its first row past it) the position
        #: resent rows are dropped up to.
        self._flushed_of: dict[TableName, Position] = dict(metadata.tables or {})
        self._high_of: dict[TableName, Position] = dict(self._flushed_of)
        self._skip_of: dict[TableName, Position] = dict(self._flushed_of)
        self._last_flush = clock()

    # --- opening -------------------------------------------------------------------

    def _lock(self) -> None:
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise SinkError(
                "another file sink is writing to this folder (its lock is held); stop it "
                "or give this changefeed its own path",
                str(self.root),
            ) from None
        self._lock_fd = fd

    def _release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _open_root(self) -> Metadata:
        """The root's metadata after a repair; its ``tables`` filled in for an older root."""
        metadata = read_metadata(self.root)
        if metadata is None:
            strangers = sorted(
                entry.name
                for entry in self.root.iterdir()
                if entry.name not in (LOCK_FILE, SNAPSHOT_DIR, DDL_DIR) and not is_temp(entry.name)
            )
            if strangers:
                raise SinkError(
                    f"the folder holds {', '.join(strangers[:5])} but no metadata file, so it is "
                    "not a file sink's output; give the sink an empty or new folder",
                    str(self.root),
                )
            created = Metadata(self.changefeed_id, self.uri.protocol, None)
            write_metadata(self.root, created)
            self._log.info("file sink created %s (%s)", self.root, self.uri.protocol.value)
            return created
        if metadata.changefeed != self.changefeed_id:
            raise SinkError(
                f"the folder belongs to changefeed {metadata.changefeed!r}, not "
                f"{self.changefeed_id!r}; give each changefeed its own path",
                str(self.root),
            )
        if metadata.protocol is not self.uri.protocol:
            raise SinkError(
                f"the folder holds protocol={metadata.protocol.value} files, but the sink URI "
                f"says protocol={self.uri.protocol.value}; keep the protocol or use a new path",
                str(self.root),
            )
        report = RepairReport()
        remove_temp_files(self.root, report)
        kept = truncate_to_checkpoint(self.root, self.codec, metadata.checkpoint_of, report)
        if report:
            self._log.warning(
                "file sink %s reopened at checkpoint %s: removed %d temporary and %d data "
                "files, cut %d files (%d row records past their table's checkpoint)",
                self.root,
                metadata.checkpoint,
                report.temp_files,
                report.data_files,
                report.cut_files,
                report.records,
            )
        else:
            self._log.info("file sink reopened %s at checkpoint %s", self.root, metadata.checkpoint)
        if metadata.tables is None and metadata.checkpoint is not None:
            tables = {table: metadata.checkpoint for table in kept}
            return replace(metadata, tables=tables)
        return metadata

    # --- the Sink interface -----------------------------------------------------

    @property
    def flushed(self) -> Position | None:
        return self._flushed

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        self._check_open()
        now_ms = int(time.time() * 1000)
        schemas: dict[TableName, TableSchema] = {}
        for change in changes:
            if not isinstance(change, RowChange):
                raise SinkError(f"write_rows takes RowChange values, not {type(change).__name__}")
            position = change.position
            table = change.table
            if self._skip_of:
                skip = self._skip_of.get(table)
                if skip is not None:
                    if self._at_or_before(position, skip):
                        continue
                    del self._skip_of[table]
            key = position.key()
            boundary = key != self._last_key
            if boundary:
                if (
                    self._last_key is not None
                    and self._clock() - self._last_flush >= self.uri.flush_interval
                ):
                    self.flush()
                self._last_key = key
            schema = schemas.get(table)
            if schema is None:
                schema = schemas[table] = self._lookup(table)
            out = self._file_for(table, schema)
            try:
                data = out.encoder(change, now_ms)
            except ValueError as exc:
                raise SinkError(str(exc), str(out.final)) from exc
            self._io(out.write, out.final, data, key)
            if boundary:
                self._advance(position)
            self._high_of[table] = position

    def apply_ddl(self, ddl: DdlEvent) -> None:
        self._check_open()
        if not isinstance(ddl, DdlEvent):
            raise SinkError(f"apply_ddl takes a DdlEvent, not {type(ddl).__name__}")
        self.flush()
        record_ddl(self.root, ddl)
        for table in ddl.tables:
            self._ddl_of[table] = ddl
        self._advance(ddl.position)
        self._write_checkpoint()
        self._last_key = ddl.position.key()

    def flush(self) -> Position | None:
        self._check_open()
        while self._files:
            _table, out = self._files.popitem()
            self._io(out.finish, out.final)
        self._write_checkpoint()
        self._last_flush = self._clock()
        return self._flushed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for out in self._files.values():
            try:
                out.abandon()
            except OSError as exc:
                self._log.warning("could not remove %s: %s", out.tmp, exc)
        self._files.clear()
        self._release()

    # --- internals ---------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise SinkError("the file sink is closed", str(self.root))

    def _io(self, action: Callable[..., object], path: Path, *args: object) -> None:
        try:
            action(*args)
        except OSError as exc:
            raise SinkError(f"file system error: {exc}", str(path)) from exc

    @staticmethod
    def _at_or_before(position: Position, bound: Position) -> bool:
        if position.gen != bound.gen:
            # read again on the source a failover led to: by GTID (Position.within)
            return position.within(bound)
        try:
            return position <= bound
        except ValueError as exc:
            raise SinkError(f"cannot place {position} against the checkpoint: {exc}") from exc

    def _advance(self, position: Position) -> None:
        if self._high is None or not self._at_or_before(position, self._high):
            self._high = position

    def _write_checkpoint(self) -> None:
        if self._high == self._flushed and self._high_of == self._flushed_of:
            return
        metadata = Metadata(self.changefeed_id, self.uri.protocol, self._high, dict(self._high_of))
        self._io(write_metadata, self.root, self.root, metadata)
        self._flushed = self._high
        self._flushed_of = dict(self._high_of)

    def _lookup(self, table: TableName) -> TableSchema:
        try:
            schema = self._schemas(table)
        except Exception as exc:  # any lookup failure stops the sink the same way
            raise SinkError(f"no schema for {table}: {exc}") from exc
        if not isinstance(schema, TableSchema) or schema.name != table:
            raise SinkError(f"the schema lookup for {table} returned {schema!r:.120}")
        return schema

    def _file_for(self, table: TableName, schema: TableSchema) -> _OpenFile:
        out = self._files.get(table)
        if out is not None:
            same = out.schema is schema or out.schema == schema
            if same and (out.size < self.uri.file_size or out.last_key == self._last_key):
                return out
            self._files.pop(table)
            self._io(out.finish, out.final)
        folder = version_dir(self.root, table, schema.version)
        self._io(self._prepare, folder, folder, schema)
        cached = self._encoders.get((table, schema.version))
        if cached is None or cached[0] != schema:
            cached = self._encoders[(table, schema.version)] = (
                schema,
                self.codec.encoder(schema),
            )
        seq = self._next_seq[folder]
        self._next_seq[folder] = seq + 1
        final = folder / data_file_name(seq, self.codec.extension)
        try:
            out = _OpenFile(final, schema, cached[1])
        except OSError as exc:
            raise SinkError(f"file system error: {exc}", str(final)) from exc
        self._files[table] = out
        return out

    def _prepare(self, folder: Path, schema: TableSchema) -> None:
        """Makes the version folder and its schema.json, or checks the existing ones."""
        known = self._ready.get(folder)
        if known is not None:
            if known != schema:
                raise self._version_conflict(folder, known, schema)
            return
        make_dirs(folder)
        path = folder / SCHEMA_FILE
        if path.exists():
            try:
                existing = read_schema_file(path).schema
            except FileFormatError as exc:
                raise SinkError(str(exc), str(path)) from exc
            if existing != schema:
                raise self._version_conflict(folder, existing, schema)
        else:
            write_atomic(path, schema_file_bytes(schema, self._ddl_of.get(schema.name)))
        self._ready[folder] = schema
        numbers = [seq for seq, _ in data_files(folder)]
        self._next_seq[folder] = max(numbers, default=0) + 1

    @staticmethod
    def _version_conflict(folder: Path, held: TableSchema, given: TableSchema) -> SinkError:
        return SinkError(
            f"schema version {given.version} of {given.name} differs from the one already "
            f"written for it (columns {list(held.column_names)} vs {list(given.column_names)}); "
            "one version number must name one table shape",
            str(folder / SCHEMA_FILE),
        )
