"""A file sink's snapshot chunks under fence tokens (cdc.sink.mysql.chunkfence): of a
chunk's files, readers take the one of the largest token, so a late file of a capture
that lost the chunk is never read."""

from __future__ import annotations

from pathlib import Path

from cdc.model import Column, Op, Position, RowChange, TableName, TableSchema
from cdc.sink.file import FileSink, read_changes
from cdc.sink.file.layout import SNAPSHOT_FILE, snapshot_chunk, snapshot_file_name
from cdc.sink.file.snapshot_files import snapshot_folder, write_chunk
from cdc.sink.file.uri import FileSinkURI
from cdc.sink.registry import parse_sink_uri

T = TableName("shop", "orders")
SCHEMA = TableSchema(
    T,
    (
        Column("id", "int", "int(11)", nullable=False),
        Column("note", "varchar", "varchar(20)", charset="utf8mb4"),
    ),
    ("id",),
)
CHUNK = f"{T}:3"


def reads(note: str, keys: range, at: int) -> list[RowChange]:
    position = Position("binlog.000001", at)
    return [RowChange(T, Op.READ, None, {"id": k, "note": note}, (k,), position) for k in keys]


def root_with_checkpoint(tmp_path: Path) -> FileSinkURI:
    uri = parse_sink_uri(f"file://{tmp_path}?protocol=canal-json")
    assert isinstance(uri, FileSinkURI)
    sink = FileSink(uri, lambda _t: SCHEMA, "cf-1")
    try:  # a change past every chunk, so that the checkpoint covers them
        sink.write_rows(
            [
                RowChange(
                    T,
                    Op.CREATE,
                    None,
                    {"id": 99, "note": "x"},
                    (99,),
                    Position("binlog.000001", 900),
                )
            ]
        )
        sink.flush()
    finally:
        sink.close()
    return uri


def test_the_largest_token_s_file_is_read_whatever_was_written_last(tmp_path: Path) -> None:
    uri = root_with_checkpoint(tmp_path)
    write_chunk(uri, SCHEMA, CHUNK, reads("lost", range(1, 6), 100), token=10)
    write_chunk(uri, SCHEMA, CHUNK, reads("taker", range(1, 4), 200), token=20)
    write_chunk(uri, SCHEMA, CHUNK, reads("late", range(1, 9), 150), token=10)  # after
    seen = {c.key: c.after["note"] for c in read_changes(tmp_path) if c.op is Op.READ}
    assert seen == {(1,): "taker", (2,): "taker", (3,): "taker"}

    # the lost capture's file stays beside the newer one, unread
    folder = snapshot_folder(tmp_path, SCHEMA)
    names = sorted(p.name for p in folder.iterdir() if SNAPSHOT_FILE.fullmatch(p.name))
    assert names == [snapshot_file_name(CHUNK, "json", t) for t in (10, 20)]


def test_chunk_file_names_keep_the_chunk_and_the_token_apart() -> None:
    for chunk in (CHUNK, "db.t1:5", "db.t.t2:17", "x.y:0"):
        plain = snapshot_chunk(snapshot_file_name(chunk, "json"))
        fenced = snapshot_chunk(snapshot_file_name(chunk, "csv", 42))
        assert plain is not None and fenced is not None
        assert plain[1] == 0 and fenced == (plain[0], 42)
