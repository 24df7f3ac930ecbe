"""A file sink root whose table had a DDL while its snapshot ran, replayed into MariaDB.

The roots are written by hand with the sink's own writers (chunk files, change
files, DDL files) in the shapes docs/ddl-during-snapshot.md says a changefeed
leaves: chunks read before the DDL under the old schema, chunks read again
after it under the new one (their first read's file left in the old version's
folder), the DDL's file, changes on both sides. Each replay is compared with
the rows the source holds at the end.

Before chunks were placed at their high watermark, the replay applied every
snapshot row first, then the DDL: an ADD COLUMN the snapshot already held
failed ("Duplicate column name"), and a TRUNCATE removed the rows read after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from testkit import execute

from cdc import typeconv
from cdc.model import Column, DdlEvent, Op, Position, RowChange, TableName, TableSchema
from cdc.model.events import DdlKind
from cdc.playground.mariadb import MariaDBServer
from cdc.sink.file import FileFormatError, FileSink, FileSinkReader, replay_into
from cdc.sink.file.reader import ReplayError
from cdc.sink.file.snapshot_files import write_chunk
from cdc.sink.file.uri import FileSinkURI
from cdc.sink.registry import parse_sink_uri

pytestmark = pytest.mark.integration

SRC = "orders_src"
T = TableName(SRC, "t")
U = TableName(SRC, "u")
ID = Column("id", "int", "int(11)", nullable=False)
NOTE = Column("note", "varchar", "varchar(20)", charset="utf8mb4", collation="utf8mb4_bin")
EXTRA = Column("extra", "int", "int(11)", nullable=False, default="7")
V0 = TableSchema(T, (ID, NOTE), ("id",))
V1 = TableSchema(T, (ID, NOTE, EXTRA), ("id",), version=1)

Row = Mapping[str, Any]


def at(offset: int) -> Position:
    return Position("binlog.000001", offset)


def ddl(offset: int, kind: DdlKind, statement: str, *tables: TableName) -> DdlEvent:
    return DdlEvent(at(offset), SRC, tables, kind, statement)


ADD_EXTRA = ddl(
    200, DdlKind.ADD_COLUMN, f"ALTER TABLE `{SRC}`.t ADD COLUMN extra INT NOT NULL DEFAULT 7", T
)


class Root:
    """A file sink root written as a changefeed would: changes and DDL through the sink,
    chunks beside it."""

    def __init__(self, path: Path) -> None:
        parsed = parse_sink_uri(f"file://{path}?protocol=canal-json")
        assert isinstance(parsed, FileSinkURI)
        self.uri = parsed
        self.path = path
        self.schemas: dict[TableName, TableSchema] = {T: V0}
        self.sink = FileSink(parsed, self.lookup, "cf-order")

    def lookup(self, table: TableName) -> TableSchema:
        return self.schemas[table]

    def chunk(self, schema: TableSchema, n: int, hw: int, rows: list[Row]) -> None:
        changes = [
            RowChange(
                schema.name, Op.READ, None, dict(r), (r["id"],), at(hw),
                schema_version=schema.version,
            )
            for r in rows
        ]  # fmt: skip
        write_chunk(self.uri, schema, f"{schema.name}:{n}", changes)

    def change(self, op: Op, offset: int, before: Row | None, after: Row | None) -> None:
        schema = self.schemas[T]
        key = ((after or before or {})["id"],)
        self.sink.write_rows(
            [RowChange(T, op, before, after, key, at(offset), schema_version=schema.version)]
        )

    def apply(self, event: DdlEvent, schemas: Mapping[TableName, TableSchema]) -> None:
        self.sink.apply_ddl(event)
        self.schemas.update(schemas)

    def close(self) -> None:
        self.sink.flush()
        self.sink.close()


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Root]:
    made = Root(tmp_path / "out")
    yield made
    made.sink.close()


def replay(root: Root, sink_db: MariaDBServer, copy: str) -> Any:
    conn = sink_db.connect(**typeconv.sink_connect_kwargs())
    try:
        return replay_into(root.path, conn, schema_map={SRC: copy})
    finally:
        conn.close()


def rows_of(sink_db: MariaDBServer, table: str) -> list[tuple[Any, ...]]:
    return execute(sink_db, f"SELECT * FROM {table} ORDER BY id")


def columns_of(sink_db: MariaDBServer, table: str) -> list[str]:
    return [str(row[0]) for row in execute(sink_db, f"SHOW COLUMNS FROM {table}")]


def n(i: int, note: str, extra: int | None = None) -> Row:
    return {"id": i, "note": note} if extra is None else {"id": i, "note": note, "extra": extra}


Scenario = Callable[[Root], None]


def every_chunk_after_the_ddl(root: Root) -> None:
    """ADD COLUMN after the anchor, before any chunk was read: every chunk is read
    under the new schema, and the DDL is in the schema of the rows' first version."""
    root.apply(ADD_EXTRA, {T: V1})
    root.chunk(V1, 0, 300, [n(1, "a", 7), n(2, "b", 7)])
    root.chunk(V1, 1, 400, [n(3, "c", 7)])
    root.change(Op.UPDATE, 450, n(1, "a", 7), n(1, "a2", 9))


def chunks_on_both_sides(root: Root) -> None:
    """Chunk 0 read before the ADD COLUMN (valid), chunk 1 read after it under the old
    schema (its file stays in version 0's folder) and again under the new one, with
    row 4 deleted in between (the binlog's DELETE lies before the new read: dropped by
    the gate, so only the stale file still holds row 4)."""
    root.chunk(V0, 0, 100, [n(1, "a"), n(2, "b")])
    root.change(Op.UPDATE, 150, n(2, "b"), n(2, "b2"))
    root.chunk(V0, 1, 250, [n(3, "c"), n(4, "d")])
    root.apply(ADD_EXTRA, {T: V1})
    root.chunk(V1, 1, 300, [n(3, "c", 7)])
    root.change(Op.UPDATE, 350, n(1, "a", 7), n(1, "a", 8))
    root.change(Op.CREATE, 360, None, n(5, "e", 9))


def an_empty_read_after_the_ddl(root: Root) -> None:
    """Chunk 1's second read finds no rows (row 4 deleted in between): its empty file
    replaces the first read's all the same."""
    root.chunk(V0, 0, 100, [n(1, "a")])
    root.chunk(V0, 1, 250, [n(4, "d")])
    root.apply(ADD_EXTRA, {T: V1})
    root.chunk(V1, 1, 300, [])


def truncate_among_chunks(root: Root) -> None:
    """Chunk 0 read, then TRUNCATE, then chunk 1 read again with the rows inserted after
    it (whose binlog INSERTs lie before the read: dropped by the gate)."""
    root.chunk(V0, 0, 100, [n(1, "a"), n(2, "b")])
    root.apply(ddl(200, DdlKind.TRUNCATE_TABLE, f"TRUNCATE TABLE `{SRC}`.t", T), {})
    root.chunk(V0, 1, 300, [n(10, "new"), n(11, "new")])
    root.change(Op.CREATE, 350, None, n(12, "later"))


EXPECTED = {
    "every-chunk-after-the-ddl": (
        every_chunk_after_the_ddl,
        ["id", "note", "extra"],
        [(1, "a2", 9), (2, "b", 7), (3, "c", 7)],
    ),
    "chunks-on-both-sides": (
        chunks_on_both_sides,
        ["id", "note", "extra"],
        [(1, "a", 8), (2, "b2", 7), (3, "c", 7), (5, "e", 9)],
    ),
    "an-empty-read-after-the-ddl": (
        an_empty_read_after_the_ddl,
        ["id", "note", "extra"],
        [(1, "a", 7)],
    ),
    "truncate-among-chunks": (
        truncate_among_chunks,
        ["id", "note"],
        [(10, "new"), (11, "new"), (12, "later")],
    ),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_a_ddl_during_the_snapshot_replays_to_the_sources_rows(
    root: Root, sink_db: MariaDBServer, sink_database: str, case: str
) -> None:
    scenario, columns, rows = EXPECTED[case]
    scenario(root)
    root.close()
    replay(root, sink_db, sink_database)
    table = f"`{sink_database}`.t"
    assert columns_of(sink_db, table) == columns
    assert rows_of(sink_db, table) == rows


def test_a_create_table_replayed_before_any_row_of_its_database(
    root: Root, sink_db: MariaDBServer, sink_database: str
) -> None:
    """Chunks now come at their watermark, so a CREATE TABLE early in the changefeed can
    be the first thing replayed into its database: the database is made for it."""
    execute(sink_db, f"DROP DATABASE `{sink_database}`")
    statement = f"CREATE TABLE `{SRC}`.u (id INT PRIMARY KEY, note VARCHAR(20))"
    create = DdlEvent(at(100), "", (U,), DdlKind.CREATE_TABLE, statement)  # no USE
    root.apply(create, {U: TableSchema(U, (ID, NOTE), ("id",))})
    root.sink.write_rows([RowChange(U, Op.CREATE, None, n(1, "a"), (1,), at(150))])
    root.chunk(V0, 0, 200, [n(7, "t")])
    root.close()
    replay(root, sink_db, sink_database)
    assert rows_of(sink_db, f"`{sink_database}`.u") == [(1, "a")]
    assert rows_of(sink_db, f"`{sink_database}`.t") == [(7, "t")]


def test_a_stale_read_counts_again_after_the_name_was_renamed_away(root: Root) -> None:
    """Chunk 0 of ``t`` read under version 0, ``t`` renamed to ``u``, and a later table
    named ``t`` snapshotted under version 1: both reads count, each for its table."""
    root.chunk(V0, 0, 100, [n(1, "old")])
    root.apply(ddl(200, DdlKind.RENAME_TABLE, f"RENAME TABLE `{SRC}`.t TO `{SRC}`.u", T, U), {})
    root.chunk(V1, 0, 300, [n(1, "new", 7)])
    root.close()
    changes = FileSinkReader(root.path).changes()
    reads = [(c.table, c.after) for c in changes if isinstance(c, RowChange)]
    assert reads == [(T, n(1, "old")), (T, n(1, "new", 7))]


def test_an_empty_read_after_the_name_left_is_refused(root: Root) -> None:
    """An empty file has no position: after a rename of its table, whether it is a read
    of the same table as the older file cannot be told, and the root is refused."""
    root.chunk(V0, 0, 100, [n(1, "old")])
    root.apply(ddl(200, DdlKind.RENAME_TABLE, f"RENAME TABLE `{SRC}`.t TO `{SRC}`.u", T, U), {})
    root.chunk(V1, 0, 300, [])
    root.close()
    with pytest.raises(FileFormatError, match="renamed or dropped after that read"):
        list(FileSinkReader(root.path).changes())


def test_a_table_snapshotted_again_after_the_rename_that_made_it_is_refused(
    root: Root, sink_db: MariaDBServer, sink_database: str
) -> None:
    """``t`` renamed to ``u`` while its snapshot ran: the owner snapshots ``u`` again.
    The files do not say which of ``u``'s earlier rows the new snapshot replaces, so the
    replay stops, naming the table and the DDL, instead of keeping rows it cannot tell."""
    root.chunk(V0, 0, 100, [n(1, "a"), n(2, "b")])
    root.apply(ddl(200, DdlKind.RENAME_TABLE, f"RENAME TABLE `{SRC}`.t TO `{SRC}`.u", T, U), {})
    root.chunk(TableSchema(U, (ID, NOTE), ("id",), version=1), 0, 300, [n(1, "a")])
    root.close()
    refused = r"orders_src\.u has snapshot rows at .* after the rename table at .* empty folder"
    with pytest.raises(ReplayError, match=refused):
        replay(root, sink_db, sink_database)
