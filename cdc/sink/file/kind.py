"""The file sink kind (``file:///path``): see ``cdc.sink.kind``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SchemaLookup, Sink
from cdc.sink.chunks import ChunkSink
from cdc.sink.file.sink import FileSink
from cdc.sink.file.snapshot_files import ChunkFiles
from cdc.sink.file.uri import FILE_SINK_PARAMS, FileSinkURI, parse_file_sink
from cdc.sink.kind import SinkCheckFailed, SinkKind

__all__ = ["FILE", "FileKind"]


class FileKind(SinkKind[FileSinkURI]):
    """Change files under one folder, in TiCDC's storage-sink layout."""

    name = "file"
    schemes = ("file",)
    uri_type = FileSinkURI
    params = FILE_SINK_PARAMS

    def parse(self, text: str, field: str, defaults: Mapping[str, str]) -> FileSinkURI:
        return parse_file_sink(text, field, defaults)

    def check_tables(self, uri: FileSinkURI, tables: Mapping[TableName, TableSchema]) -> None:
        """One table per changefeed: each table pipeline opens its own sink, and a
        folder has one writer."""
        if len(tables) > 1:
            names = list(tables)
            shown = ", ".join(str(t) for t in names[:5]) + (", ..." if len(names) > 5 else "")
            raise SinkCheckFailed(
                "sink-uri",
                "the file sink takes one table per changefeed in cdc-server for now (each "
                "table pipeline writes its own sink, and a folder has one writer); the rules "
                f"match {len(names)} tables ({shown}): create one changefeed per table, each "
                "with its own folder, or use a database sink",
            )

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

    def open(
        self,
        uri: FileSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        *,
        writable: Callable[[], bool] | None = None,
    ) -> Sink:
        return FileSink(uri, schemas, changefeed_id)

    def chunk_sink(self, uri: FileSinkURI, changefeed_id: str) -> ChunkSink:
        """Chunks go beside the change files, not through the sink: the file sink has one
        writer per root, the changefeed's."""
        return ChunkFiles(uri)


FILE = FileKind()
