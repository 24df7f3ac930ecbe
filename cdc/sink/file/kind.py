"""The file sink kind (``file:///path``): see ``cdc.sink.kind``.

The sink's machinery is imported by the methods that use it: parsing a URI (every
``cdcctl`` command that reads a changefeed's configuration) needs none of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cdc.sink.file.uri import FILE_SINK_PARAMS, FileSinkURI, parse_file_sink
from cdc.sink.kind import DownstreamTableMismatch, SinkCheckFailed, SinkKind

if TYPE_CHECKING:
    from cdc.model.events import DdlEvent
    from cdc.model.schema import TableSchema
    from cdc.sink.base import SchemaLookup, Sink
    from cdc.sink.chunks import ChunkSink

__all__ = ["FILE", "FileKind"]


class FileKind(SinkKind[FileSinkURI]):
    """Change files under one folder, in TiCDC's storage-sink layout."""

    name = "file"
    schemes = ("file",)
    uri_type = FileSinkURI
    params = FILE_SINK_PARAMS
    one_writer = True

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> FileSinkURI:
        return parse_file_sink(text, field, defaults)

    def check_reachable(self, uri: FileSinkURI) -> None:
        """The directory, or the nearest existing parent the sink would create it in, is
        writable."""
        existing = Path(uri.path)
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise SinkCheckFailed(
                "sink-uri", f"{existing} is not a directory; point the file sink at a directory"
            )
        if not os.access(existing, os.W_OK | os.X_OK):
            raise SinkCheckFailed(
                "sink-uri",
                f"directory {existing} is not writable by the cdc-server "
                f"(user id {os.getuid()}); fix its permissions or choose another path",
            )

    def check_existing(self, uri: FileSinkURI, schemas: list[TableSchema]) -> None:
        """A table added with backfill whose files the folder already holds (an earlier
        update removed it) is refused.

        A replay applies every file of a table: the old ones first, then the new
        snapshot's rows by key. A row the old files hold that the source deleted while
        the table was not captured is in no later file, so the replay would keep it (the
        MySQL sink empties each chunk's key range before its rows; a folder has no such
        step). Until the reader can tell where a table's new snapshot starts, the update
        is refused and the message says what to do."""
        from cdc.sink.file.layout import SNAPSHOT_DIR, table_dir

        root = Path(uri.path)
        for schema in schemas:
            held = [
                folder
                for base in (root, root / SNAPSHOT_DIR)
                if (folder := table_dir(base, schema.name)).is_dir()
            ]
            if held:
                raise DownstreamTableMismatch(
                    f"the file sink's folder already holds files of {schema.name} "
                    f"({', '.join(str(f) for f in held)}), written while the changefeed captured "
                    "it before (an update removed it, or a DDL dropped it); "
                    "replayed with the new snapshot they would keep the rows deleted while "
                    "the table was not captured. Move those folders out of the sink's folder "
                    "and run the update again (the backfill copies the table's rows again), "
                    "or add the table without backfill"
                )

    def open(
        self,
        uri: FileSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        from cdc.sink.file.sink import FileSink

        return FileSink(uri, schemas, changefeed_id)

    def apply_ddl(self, uri: FileSinkURI, ddl: DdlEvent, changefeed_id: str) -> None:
        """The DDL file only, beside the capture's sink that holds the folder's lock."""
        from cdc.sink.file.sink import record_ddl

        record_ddl(Path(uri.path), ddl)

    def chunk_sink(self, uri: FileSinkURI, changefeed_id: str) -> ChunkSink:
        """Chunks go beside the change files, not through the sink: the file sink has one
        writer per root, the changefeed's."""
        from cdc.sink.file.snapshot_files import ChunkFiles

        return ChunkFiles(uri)


FILE = FileKind()
