"""The lock-free, chunked snapshot (DBLog / Flink CDC 2.0): split tables, read chunks.

    split_table(conn, schema)                -> [SnapshotChunk]     (splitter)
    read_chunk(source, server, schema, chunk) -> ChunkResult         (reader)
        low watermark, SELECT, high watermark, binlog fold by key

Spark tasks run ``read_chunk`` per chunk (``sparkjobs.snapshot``); the owner and
processors record chunks and their high watermarks in etcd. The names below are
imported when first used (``cdc.lazy``): a key range needs no binlog reader.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.snapshot.chunk import SnapshotChunk, parse_chunk_id
    from cdc.snapshot.errors import ChunkSchemaChanged, SnapshotError
    from cdc.snapshot.reader import ChunkHooks, ChunkResult, read_chunk
    from cdc.snapshot.splitter import DEFAULT_CHUNK_SIZE, split_table

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ChunkHooks",
    "ChunkResult",
    "ChunkSchemaChanged",
    "SnapshotChunk",
    "SnapshotError",
    "parse_chunk_id",
    "read_chunk",
    "split_table",
]

__getattr__ = exports(
    globals(),
    {
        "cdc.snapshot.chunk": ("SnapshotChunk", "parse_chunk_id"),
        "cdc.snapshot.errors": ("ChunkSchemaChanged", "SnapshotError"),
        "cdc.snapshot.reader": ("ChunkHooks", "ChunkResult", "read_chunk"),
        "cdc.snapshot.splitter": ("DEFAULT_CHUNK_SIZE", "split_table"),
    },
)
