"""Reading a file sink's root back: its changes in position order, and a replay into MySQL.

    read_changes(root)
      snapshot/ ─ each chunk's rows (READ), at the chunk's high watermark;
                 per key, the change files hold only changes after it (the
                 hand-off's gate), so a chunk goes where its watermark falls:
                 after a DDL of its table that it was read after, before one
                 it was read before. A chunk read again under a newer schema
                 (docs/ddl-during-snapshot.md) counts once: its newest read
      metadata ─ each table's checkpoint: nothing of the table past it is read
                 (a crashed root may hold finished files past it, possibly with
                 part of a transaction); DDL files are all read (each is
                 written once every table reached it)
      ddl/*.json ───────────────────────────────┐
      snapshot chunks by high watermark ────────┤
      per table: version folders by number,     ├─ heapq.merge by position
        files by number, records in file order ─┘   → RowChange | DdlEvent

    replay_into(root, conn)
      RowChange of a table not yet in the target ─ CREATE TABLE from its
          version's schema.json (ddlgen), then apply the row
      row ops ─ CREATE/READ: REPLACE INTO; DELETE: DELETE by key; UPDATE:
          DELETE the old key when the key changed, then REPLACE
      DdlEvent ─ run on the target when it touches a table the replay has
          created (ALTER, TRUNCATE, RENAME, DROP, ...) or creates a new one;
          otherwise skipped: its effect is already in the schema.json of the
          table's first version (a snapshot read after a DDL holds it)

Within a version folder records are in position order, and versions of a
table follow each other in position order, so each table's stream is
ordered and a k-way merge with the DDL stream gives the global order. Rows of
one transaction (one position) come table by table: the files keep each
table's order, not the interleaving across tables inside a transaction.
Applying by key (REPLACE / DELETE by key) is idempotent, so a root holding a
change twice still converges to the source's rows. Tables without a usable
key are applied by full-row match (``<=>``) with ``LIMIT 1``, which is not
idempotent.

Values are written with ``cdc.typeconv.to_sql_param`` in the session
:data:`cdc.typeconv.SINK_SESSION_SQL` sets up (UTC, permissive sql_mode for
zero dates), so they land exactly as the source held them.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.schema.changes import DropSchema
from cdc.schema.ddl import analyze
from cdc.schema.dialect import DdlSyntaxError, tokenize
from cdc.sink.file.canal_json import decode_ddl
from cdc.sink.file.codec import FileFormatError
from cdc.sink.file.ddlgen import create_table_sql, quote_name
from cdc.sink.file.layout import (
    DDL_DIR,
    SCHEMA_FILE,
    SNAPSHOT_DIR,
    data_files,
    is_temp,
    snapshot_chunk,
    snapshot_files,
    table_dirs,
    version_dirs,
)
from cdc.sink.file.manifest import Metadata, SchemaFile, read_metadata, read_schema_file
from cdc.sink.file.sink import codec_for
from cdc.typeconv import SINK_SESSION_SQL, sql_param_converter

__all__ = [
    "FileSinkReader",
    "ReplayError",
    "ReplayStats",
    "read_changes",
    "replay_into",
]

log = logging.getLogger(__name__)

Change = RowChange | DdlEvent

#: DDL after which a table's name may stand for another table.
_NAME_LEAVES = (DdlKind.RENAME_TABLE, DdlKind.DROP_TABLE, DdlKind.DROP_SCHEMA)


class ReplayError(RuntimeError):
    """The target refused a statement of the replay; names the statement and the change."""


class FileSinkReader:
    """One file sink root, read from the files alone (nothing else is needed)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileFormatError(str(self.root), "no such folder")
        metadata = read_metadata(self.root)
        if metadata is None:
            raise FileFormatError(
                str(self.root),
                "no metadata file: not a file sink root (or no sink ever opened it)",
            )
        self.metadata: Metadata = metadata
        self.codec = codec_for(metadata.protocol)
        self.versions: dict[tuple[TableName, int], SchemaFile] = {}
        self._folders = self._version_folders(self.root, data_files)
        self._snapshot_folders = self._version_folders(
            self.root / SNAPSHOT_DIR, lambda folder, ext: snapshot_files(folder, ext)
        )

    def _version_folders(
        self, root: Path, files: Callable[[Path, str], Sequence[Any]]
    ) -> dict[TableName, list[tuple[int, Path]]]:
        """The version folders holding files under ``root``, by table, their schemas read."""
        folders: dict[TableName, list[tuple[int, Path]]] = {}
        for table_dir in table_dirs(root):
            for version, folder in version_dirs(table_dir):
                if not files(folder, self.codec.extension):
                    continue
                path = folder / SCHEMA_FILE
                if not path.is_file():
                    raise FileFormatError(str(folder), "data files without a schema.json")
                found = read_schema_file(path)
                name = found.schema.name
                if found.schema.version != version:
                    raise FileFormatError(
                        str(path), f"says version {found.schema.version}, folder says {version}"
                    )
                known = self.versions.setdefault((name, version), found)
                if known.schema != found.schema:
                    raise FileFormatError(
                        str(path), f"differs from the other schema.json of version {version}"
                    )
                folders.setdefault(name, []).append((version, folder))
        return folders

    @property
    def checkpoint(self) -> Position | None:
        """Everything up to here is complete in the files."""
        return self.metadata.checkpoint

    @property
    def tables(self) -> list[TableName]:
        """Tables with at least one data file, by name."""
        return sorted(self._folders, key=str)

    def ddl_events(self, through: Position | None = None) -> list[DdlEvent]:
        """The recorded DDL events (up to ``through`` when given), in position order."""
        folder = self.root / DDL_DIR
        events = []
        if folder.is_dir():
            for path in folder.iterdir():
                if is_temp(path.name) or path.suffix != ".json":
                    continue
                ddl = decode_ddl(path.read_bytes(), str(path))
                if through is None or ddl.position.key() <= through.key():
                    events.append(ddl)
        return sorted(events, key=lambda e: e.position.key())

    def table_changes(self, table: TableName, through: Position | None) -> Iterator[RowChange]:
        """One table's row changes up to ``through``, in order."""
        if through is None:
            return
        limit = through.key()
        for version, folder in self._folders.get(table, []):
            schema = self.versions[(table, version)].schema
            decode = self.codec.decoder(schema)
            for _seq, path in data_files(folder, self.codec.extension):
                with open(path, "rb") as handle:
                    for record in self.codec.records(handle, str(path)):
                        if record.position.key() <= limit:
                            yield decode(record)

    def snapshot_rows(self, ddl: Sequence[DdlEvent] | None = None) -> Iterator[RowChange]:
        """The rows of every snapshot chunk that counts (READ changes), chunk after chunk
        by high watermark; ``ddl``: every recorded DDL event, when already read."""
        events = self.ddl_events() if ddl is None else ddl
        for _key, table, version, path in self._chunk_files(events):
            decode = self.codec.decoder(self.versions[(table, version)].schema)
            with open(path, "rb") as handle:
                for record in self.codec.records(handle, str(path)):
                    yield decode(record)

    def _chunk_files(
        self, ddl: Sequence[DdlEvent]
    ) -> list[tuple[tuple[Any, ...], TableName, int, Path]]:
        """Each chunk file that counts, with its rows' position key, in position order.

        A chunk read again after a DDL of its table is written to the new schema
        version's folder, and its first read's file stays in the old one: the newer
        read replaces it, unless the table's name was renamed away or dropped between
        the two (then each read is of another table of that name, and each counts).
        An empty file has nothing to apply, and no position: when it is the newer
        read and the name left after the older one, which of the two counts cannot be
        told, and the root is refused.
        """
        leaves = self._name_leaves(ddl)
        found: list[tuple[tuple[Any, ...], TableName, int, Path]] = []
        for table, folders in self._snapshot_folders.items():
            reads: dict[str, list[tuple[int, tuple[Any, ...] | None, Path]]] = {}
            for version, folder in folders:
                for path in snapshot_files(folder, self.codec.extension):
                    chunk = snapshot_chunk(path.name)
                    assert chunk is not None  # snapshot_files lists chunk files only
                    reads.setdefault(chunk[0], []).append(
                        (version, self._first_position(path), path)
                    )
            for chunk_reads in reads.values():
                chunk_reads.sort(key=lambda read: read[0], reverse=True)
                kept_version, kept_key, kept_path = chunk_reads[0]
                for version, key, path in chunk_reads[1:]:
                    if key is None:
                        continue
                    after = [leave for leave in leaves.get(table, ()) if key < leave]
                    if after and kept_key is None:
                        raise FileFormatError(
                            str(kept_path),
                            f"an empty read of the chunk replaces {path}, but {table} was "
                            "renamed or dropped after that read: whether both reads are "
                            "of one table cannot be told",
                        )
                    if kept_key is not None and any(leave < kept_key for leave in after):
                        found.append((kept_key, table, kept_version, kept_path))
                        kept_version, kept_key, kept_path = version, key, path
                if kept_key is not None:
                    found.append((kept_key, table, kept_version, kept_path))
        return sorted(found, key=lambda item: (item[0], str(item[1]), item[3].name))

    def _first_position(self, path: Path) -> tuple[Any, ...] | None:
        """The position key of a chunk file's rows (all at its high watermark)."""
        with open(path, "rb") as handle:
            for record in self.codec.records(handle, str(path)):
                return record.position.key()
        return None

    def _name_leaves(self, events: Sequence[DdlEvent]) -> dict[TableName, list[tuple[Any, ...]]]:
        """Where each table name stops standing for its table: renamed away, dropped, or
        its database dropped (position keys)."""
        leaves: dict[TableName, list[tuple[Any, ...]]] = {}
        for ddl in events:
            if ddl.kind not in _NAME_LEAVES:
                continue
            if ddl.kind is DdlKind.RENAME_TABLE:
                gone: Sequence[TableName] = ddl.tables[0::2]
            elif ddl.kind is DdlKind.DROP_TABLE:
                gone = ddl.tables
            else:
                schemas = _dropped_schemas(ddl)
                gone = [t for t in self._snapshot_folders if t.schema in schemas]
            for table in gone:
                leaves.setdefault(table, []).append(ddl.position.key())
        return leaves

    def changes(self, through: Position | None = None) -> Iterator[Change]:
        """Every snapshot chunk's rows, row change and DDL event in position order: each
        table's changes up to its checkpoint, or all up to ``through`` when given (which
        may read past a checkpoint, into files a restarted sink would cut); every chunk
        that counts, whatever its position."""
        streams: list[Iterator[Change]] = [
            self.table_changes(
                table, self.metadata.checkpoint_of(table) if through is None else through
            )
            for table in self.tables
        ]
        every_ddl = self.ddl_events()
        streams.append(iter(every_ddl if through is None else self.ddl_events(through)))
        streams.append(self.snapshot_rows(every_ddl))
        return heapq.merge(*streams, key=lambda change: change.position.key())

    def schema_of(self, change: RowChange) -> TableSchema:
        """The table version a row change was read with."""
        return self.versions[(change.table, change.schema_version)].schema


def read_changes(root: str | Path, *, through: Position | None = None) -> Iterator[Change]:
    """The row changes and DDL events of a file sink root, in position order, up to
    ``through`` (default: the checkpoint in its metadata)."""
    return FileSinkReader(root).changes(through)


@dataclass
class ReplayStats:
    """What a replay did."""

    through: Position | None = None
    tables_created: list[str] = field(default_factory=list)
    rows: int = 0
    ddl_applied: int = 0
    ddl_skipped: int = 0


@dataclass
class _Target:
    """A table as the replay created it: where, and which columns it accepts.

    ``made_by``: the DDL that made it (a CREATE TABLE or RENAME TABLE replayed), None
    when the replay created it from a ``schema.json``."""

    name: TableName
    columns: frozenset[str] | None = None
    writable: frozenset[str] = frozenset()
    made_by: DdlEvent | None = None


_MAX_BATCH = 500


class _Applier:
    """Applies changes to one connection, batching runs of the same statement."""

    def __init__(
        self, conn: Any, reader: FileSinkReader, schema_map: Mapping[str, str], stats: ReplayStats
    ) -> None:
        self.conn = conn
        self.reader = reader
        self.schema_map = schema_map
        self.stats = stats
        self.created: dict[TableName, _Target] = {}
        self.converters: dict[tuple[TableName, int], list[Callable[[Any], Any]]] = {}
        self.pending_sql = ""
        self.pending_what = ""
        self.pending: list[tuple[Any, ...]] = []
        self.statements = 0

    def target_name(self, table: TableName) -> TableName:
        return TableName(self.schema_map.get(table.schema, table.schema), table.table)

    # --- statements -----------------------------------------------------------

    def execute(self, sql: str, params: tuple[Any, ...] | None, what: str) -> None:
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, params)
        except Exception as exc:  # any server refusal is reported the same way
            raise ReplayError(f"{what}: {exc}; statement: {sql[:500]}") from exc

    def queue(self, sql: str, params: tuple[Any, ...], what: str) -> None:
        if sql != self.pending_sql or len(self.pending) >= _MAX_BATCH:
            self.drain()
            self.pending_sql = sql
            self.pending_what = what
        self.pending.append(params)

    def drain(self) -> None:
        if not self.pending:
            return
        sql, batch, what = self.pending_sql, self.pending, self.pending_what
        self.pending = []
        try:
            with self.conn.cursor() as cur:
                cur.executemany(sql, batch)
        except Exception as exc:
            raise ReplayError(f"{what}: {exc}; statement: {sql[:500]}") from exc
        self.statements += len(batch)
        if self.statements >= 5 * _MAX_BATCH:
            self.conn.commit()
            self.statements = 0

    # --- tables -----------------------------------------------------------------

    def ensure_database(self, name: str) -> None:
        self.execute(f"CREATE DATABASE IF NOT EXISTS {quote_name(name)}", None, "create database")

    def create(self, schema: TableSchema) -> _Target:
        target = _Target(self.target_name(schema.name))
        self.drain()
        self.ensure_database(target.name.schema)
        self.execute(
            create_table_sql(schema, target.name), None, f"create {target.name} from schema.json"
        )
        self.created[schema.name] = target
        self.stats.tables_created.append(str(target.name))
        return target

    def load_columns(self, target: _Target) -> frozenset[str]:
        """The target's column names (lower case), and which of them take values."""
        if target.columns is None:
            with self.conn.cursor() as cur:
                cur.execute(
                    "SELECT COLUMN_NAME, EXTRA FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                    (target.name.schema, target.name.table),
                )
                rows = cur.fetchall()
            if not rows:
                raise ReplayError(f"target table {target.name} does not exist")
            target.columns = frozenset(str(name).lower() for name, _ in rows)
            target.writable = frozenset(
                str(name).lower() for name, extra in rows if "GENERATED" not in str(extra).upper()
            )
        return target.columns

    # --- rows -------------------------------------------------------------------

    def columns(self, target: _Target, schema: TableSchema, change: RowChange) -> list[Column]:
        """The schema's columns the target takes values for; both must have the same columns."""
        present = self.load_columns(target)
        have = {c.name.lower() for c in schema.columns}
        if have != present:
            raise ReplayError(
                f"target {target.name} has columns {sorted(present)}, but rows of schema "
                f"version {schema.version} of {schema.name} (at {change.position}) have "
                f"{sorted(have)}; the target was changed outside the replay?"
            )
        return [c for c in schema.columns if c.name.lower() in target.writable]

    def params(self, columns: list[Column], image: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(sql_param_converter(c)(image[c.name]) for c in columns)

    def row(self, change: RowChange) -> None:
        schema = self.reader.schema_of(change)
        target = self.created.get(change.table) or self.create(schema)
        if change.op is Op.READ and target.made_by is not None:
            raise _snapshot_after(change, target.made_by)
        columns = self.columns(target, schema, change)
        where = f"{change.op.name} of {change.table} at {change.position}"
        table = target.name.quoted()
        key = schema.key_columns
        if change.op is not Op.CREATE and change.op is not Op.READ:
            before = change.row_before
            moved = change.op is Op.DELETE or any(before[k] != change.row_after[k] for k in key)
            if not key:
                self.match_row(change, table, columns, where)
                return
            if moved:
                key_columns = [schema.column(k) for k in key]
                condition = " AND ".join(f"{quote_name(c.name)} = %s" for c in key_columns)
                self.queue(
                    f"DELETE FROM {table} WHERE {condition}",
                    self.params(key_columns, before),
                    where,
                )
        if change.after is not None:
            names = ", ".join(quote_name(c.name) for c in columns)
            marks = ", ".join(["%s"] * len(columns))
            self.queue(
                f"REPLACE INTO {table} ({names}) VALUES ({marks})",
                self.params(columns, change.after),
                where,
            )
        self.stats.rows += 1

    def match_row(self, change: RowChange, table: str, columns: list[Column], where: str) -> None:
        """Keyless tables: change one row equal (NULL-safe) to the before image."""
        condition = " AND ".join(f"{quote_name(c.name)} <=> %s" for c in columns)
        before = self.params(columns, change.row_before)
        if change.op is Op.DELETE:
            self.queue(f"DELETE FROM {table} WHERE {condition} LIMIT 1", before, where)
        else:
            assignments = ", ".join(f"{quote_name(c.name)} = %s" for c in columns)
            after = self.params(columns, change.row_after)
            self.queue(
                f"UPDATE {table} SET {assignments} WHERE {condition} LIMIT 1",
                after + before,
                where,
            )
        self.stats.rows += 1

    # --- DDL --------------------------------------------------------------------

    def ddl(self, ddl: DdlEvent) -> None:
        if ddl.kind is DdlKind.DROP_SCHEMA:
            self.drop_schema(ddl)
            return
        touches = any(t in self.created for t in ddl.tables)
        creates = (
            ddl.kind is DdlKind.CREATE_TABLE
            and bool(ddl.tables)
            and ddl.tables[0] not in self.created
            and all(t in self.created for t in ddl.tables[1:])
        )
        if not touches and not creates:
            self.stats.ddl_skipped += 1
            return
        self.drain()
        self.conn.commit()
        # the DDL may be the first thing replayed into its databases (a CREATE TABLE
        # before any row of the database's other tables)
        for schema in sorted({self.target_name(t).schema for t in ddl.tables}):
            self.ensure_database(schema)
        if ddl.schema:
            self.ensure_database(self.schema_map.get(ddl.schema, ddl.schema))
            self.execute(
                f"USE {quote_name(self.schema_map.get(ddl.schema, ddl.schema))}", None, "use"
            )
        self.execute(map_schemas(ddl.statement, self.schema_map), None, f"DDL at {ddl.position}")
        self.stats.ddl_applied += 1
        self.track(ddl)

    def track(self, ddl: DdlEvent) -> None:
        """Follows the tables the DDL made, renamed or dropped."""
        for table in ddl.tables:
            target = self.created.get(table)
            if target is not None:
                target.columns = None
        if ddl.kind is DdlKind.CREATE_TABLE:
            self.created[ddl.tables[0]] = _Target(self.target_name(ddl.tables[0]), made_by=ddl)
        elif ddl.kind is DdlKind.DROP_TABLE:
            for table in ddl.tables:
                self.created.pop(table, None)
        elif ddl.kind is DdlKind.RENAME_TABLE:
            pairs = zip(ddl.tables[0::2], ddl.tables[1::2], strict=True)
            for old, new in pairs:
                if old in self.created:
                    self.created.pop(old)
                    self.created[new] = _Target(self.target_name(new), made_by=ddl)

    def drop_schema(self, ddl: DdlEvent) -> None:
        dropped = _dropped_schemas(ddl)
        gone = [t for t in self.created if t.schema in dropped]
        if not gone:
            self.stats.ddl_skipped += 1
            return
        self.drain()
        for table in gone:
            target = self.created.pop(table)
            self.execute(f"DROP TABLE IF EXISTS {target.name.quoted()}", None, "drop schema")
        self.stats.ddl_applied += 1


def _snapshot_after(change: RowChange, ddl: DdlEvent) -> ReplayError:
    """A snapshot of a table the replay holds from a DDL: refused, not guessed.

    The owner snapshots a table again under its new name when it was renamed while its
    snapshot ran, and snapshots a table a CREATE ... SELECT made; what the table
    held before (the first snapshot's rows, renamed with it) is not told apart from
    the new snapshot's in the files, and applying the new chunks over it could keep
    rows the source no longer has."""
    return ReplayError(
        f"{change.table} has snapshot rows at {change.position}, after the "
        f"{ddl.kind.value} at {ddl.position} that made the table the replay holds under "
        "that name (a table renamed while its snapshot ran, or made by CREATE ... "
        "SELECT, is snapshotted again): the files cannot say which of its earlier rows "
        "the new snapshot replaces. Create the changefeed again into an empty folder "
        "for a fresh snapshot of the table"
    )


def _dropped_schemas(ddl: DdlEvent) -> set[str]:
    """The databases a DROP DATABASE drops."""
    changes = analyze(ddl.statement, ddl.schema).changes
    return {change.schema for change in changes if isinstance(change, DropSchema)}


def map_schemas(statement: str, schema_map: Mapping[str, str]) -> str:
    """``statement`` with every ``schema.`` qualifier in ``schema_map`` replaced."""
    if not schema_map:
        return statement
    try:
        words = tokenize(statement)
    except DdlSyntaxError:
        return statement
    edits = []
    for word, after in zip(words, words[1:], strict=False):
        if word.is_name and after.text == "." and after.kind == "punct":
            mapped = schema_map.get(word.text)
            if mapped is not None:
                edits.append((word.start, word.end + 1, quote_name(mapped)))
    for start, end, text in reversed(edits):
        statement = statement[:start] + text + statement[end:]
    return statement


def replay_into(
    root: str | Path,
    conn: Any,
    *,
    schema_map: Mapping[str, str] | None = None,
    through: Position | None = None,
) -> ReplayStats:
    """Rebuilds the tables of a file sink root on a MySQL/MariaDB connection.

    ``schema_map`` sends source schemas to other target databases (others keep
    their name); tables must not exist in the target yet. ``through`` defaults
    to the root's checkpoint. Commits at the end; raises :class:`ReplayError`
    when the target refuses a statement and :class:`FileFormatError` for a
    file that cannot be read.
    """
    reader = FileSinkReader(root)
    stats = ReplayStats(through=reader.checkpoint if through is None else through)
    with conn.cursor() as cur:
        for statement in SINK_SESSION_SQL:
            cur.execute(statement)
    autocommit = conn.get_autocommit()
    conn.autocommit(False)
    try:
        applier = _Applier(conn, reader, dict(schema_map or {}), stats)
        for change in reader.changes(through):
            if isinstance(change, DdlEvent):
                applier.ddl(change)
            else:
                applier.row(change)
        applier.drain()
        conn.commit()
    finally:
        conn.autocommit(autocommit)
    log.info(
        "replayed %s through %s: %d row changes, %d DDL applied, %d skipped, tables created: %s",
        reader.root,
        stats.through,
        stats.rows,
        stats.ddl_applied,
        stats.ddl_skipped,
        ", ".join(stats.tables_created) or "none",
    )
    return stats
