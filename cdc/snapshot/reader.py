"""Reading one chunk without locks (Netflix DBLog, Flink CDC 2.0).

    step 1/4  low watermark     MariaDB: START TRANSACTION WITH CONSISTENT SNAPSHOT and
                                its Binlog_snapshot_file/position; MySQL: SHOW MASTER STATUS
    step 2/4  SELECT the range  one plain consistent read, streamed (unbuffered cursor),
                                values through typeconv.row_converter(columns, "select");
                                then, still in the snapshot's transaction (its metadata
                                lock keeps DDL out), the table's columns are compared with
                                the schema read with: another shape is ChunkSchemaChanged
    step 3/4  high watermark    SHOW MASTER STATUS and the GTID set (current_position)
    step 4/4  high > low ?      read the binlog from low to high for this table only and
                                fold the changes into the rows by key (cdc.snapshot.fold)
    result                      the chunk exactly as it was at the high watermark;
                                emitted as READ row changes at the high watermark

No lock is taken: no LOCK TABLES, no FLUSH TABLES WITH READ LOCK, no locking
reads; a consistent read under REPEATABLE READ is a snapshot in InnoDB.

Why MariaDB's low watermark comes from the snapshot: SHOW MASTER STATUS can
name a transaction already written to the binlog but not yet visible to a
new read view (the engine commit follows the binlog write). A SELECT in that
gap misses the transaction, and a binlog replay from that watermark skips it
too: the row would be lost. ``Binlog_snapshot_position`` is by definition the
binlog position of the consistent snapshot, so nothing falls in between.
MySQL has no such status; there the low watermark is SHOW MASTER STATUS, as
in Flink CDC, with that narrow window. The MariaDB low watermark carries no
GTID set (the server would have to scan the binlog file for it); it only
starts the fold's binlog read, which is by file and offset.

Keyless tables (split by a configured chunk-key column): rows have no
identity, so changes cannot be folded into them. Such a chunk is accepted only
from a window in which no change touched it (then the SELECT is the chunk at
the high watermark) and is read again otherwise, up to ``KEYLESS_ATTEMPTS``.

Memory: the rows of one chunk are held (a dict by key while folding), so a
task's memory is bounded by the chunk's size, not the table's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pymysql.cursors

from cdc.binlog.puller import Puller, PullerConfig, Resolved
from cdc.filter.table_filter import TableFilter
from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.gtid import Flavor
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.schema.loader import load_table_schema
from cdc.snapshot.chunk import Compare, SnapshotChunk
from cdc.snapshot.errors import ChunkSchemaChanged, SnapshotError
from cdc.snapshot.fold import ChunkFold, chunk_values, touches
from cdc.snapshot.keyorder import ServerTextOrder
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, SourceError, current_position
from cdc.typeconv import TEXT_TYPES, row_converter, select_list, snapshot_connect_kwargs
from cdc.uri.mysql import MySQLURI

__all__ = [
    "BINLOG_TIMEOUT",
    "KEYLESS_ATTEMPTS",
    "ChunkHooks",
    "ChunkResult",
    "read_chunk",
]

log = get_logger(__name__)
_T = TypeVar("_T")

#: Reads of a keyless chunk before giving up because it never stays still.
KEYLESS_ATTEMPTS = 5
#: Seconds the fold's binlog read may take to reach the high watermark.
BINLOG_TIMEOUT = 120.0
#: ER_BAD_FIELD_ERROR (a column read with was dropped or renamed), ER_NO_SUCH_TABLE
#: (the table was renamed or dropped): the chunk met another schema of its table.
_SCHEMA_ERRORS = frozenset({1054, 1146})
#: ER_TABLE_DEF_CHANGED: a statement rebuilt the table after the consistent snapshot
#: opened (an ALTER, or OPTIMIZE which changes nothing a row holds): read again at once,
#: and the shape check tells which.
_TABLE_DEF_CHANGED = 1412
#: Reads of a chunk whose table keeps being rebuilt before it is left pending.
DEFINITION_ATTEMPTS = 3


class DefinitionChanged(ChunkSchemaChanged):
    """The table was rebuilt after the snapshot opened: the chunk is read again."""


@dataclass(frozen=True)
class ChunkHooks:
    """Callbacks between the steps (Flink CDC's snapshot phase hooks), for tests.

    Each gets the chunk and what the step produced: the low watermark, the
    number of rows selected, the high watermark.
    """

    after_low_watermark: Callable[[SnapshotChunk, Position], None] | None = None
    after_select: Callable[[SnapshotChunk, int], None] | None = None
    after_high_watermark: Callable[[SnapshotChunk, Position], None] | None = None


@dataclass(frozen=True)
class ChunkResult:
    """A chunk's rows as they were at ``high_watermark``.

    ``rows`` maps column names to canonical values; ``folded`` counts the
    binlog changes that altered the SELECT's rows; ``attempts`` is more than
    1 only for a keyless chunk that had to be read again.
    """

    chunk: SnapshotChunk
    rows: list[Mapping[str, Any]]
    high_watermark: Position
    low_watermark: Position
    row_count: int
    schema: TableSchema = field(repr=False)
    folded: int = 0
    attempts: int = 1

    def row_changes(self) -> Iterator[RowChange]:
        """The rows as snapshot reads (op READ) at the high watermark."""
        keys = self.schema.key_columns
        for row in self.rows:
            yield RowChange(
                table=self.schema.name,
                op=Op.READ,
                before=None,
                after=row,
                key=tuple(row[k] for k in keys),
                position=self.high_watermark,
                schema_version=self.schema.version,
            )


def read_chunk(
    source: MySQLURI,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    hooks: ChunkHooks | None = None,
    fetch_size: int = 1000,
    conn: Any | None = None,
) -> ChunkResult:
    """Reads ``chunk`` of ``schema``'s table as of its high watermark (see the module doc).

    ``conn``: an open source connection made with ``snapshot_connect_kwargs()``
    to read with (left open; drop it if this raises), so that a worker running
    many chunks connects once; by default the chunk opens and closes its own.
    Raises ``SourceError`` when the source cannot be reached, ``ChunkSchemaChanged``
    when a DDL on the table ran between the watermarks (read the chunk again
    with the new schema), ``SnapshotError`` for a keyless chunk that never
    stays still or a binlog that does not reach the high watermark.
    """
    check_arguments(schema, chunk, fetch_size)
    hooks = hooks or ChunkHooks()
    keyless = not schema.key_columns
    attempts = KEYLESS_ATTEMPTS if keyless else 1
    owned = conn is None
    if conn is None:
        conn = connect(source, "source", **snapshot_connect_kwargs())
    try:
        for attempt in range(1, attempts + 1):
            low, rows, high = _read_rebuilt_again(conn, server, schema, chunk, hooks, fetch_size)
            result = _Result(chunk, schema, low, high, attempt)
            if high.key() <= low.key():
                log.info("chunk %s step 4/4 binlog did not move: rows as selected", chunk.chunk_id)
                return result.done(rows)
            changes = binlog_changes(source, server, schema, chunk, low, high)
            compare = compare_for(conn, schema, chunk, changes)
            if keyless:
                touched = sum(1 for change in changes if touches(chunk, change, compare))
                if not touched:
                    log.info(
                        "chunk %s step 4/4 %d binlog change(s), none in the chunk: rows as "
                        "selected",
                        chunk.chunk_id,
                        len(changes),
                    )
                    return result.done(rows)
                log.warning(
                    "chunk %s of keyless table %s: %d change(s) touched it between the "
                    "watermarks; reading it again (attempt %d of %d)",
                    chunk.chunk_id,
                    schema.name,
                    touched,
                    attempt,
                    attempts,
                )
                continue
            fold = ChunkFold(schema, chunk, compare)
            for row in rows:
                fold.add(row)
            for change in changes:
                fold.apply(change)
            log.info(
                "chunk %s step 4/4 folded %d binlog change(s) (%d altered the rows): %d rows",
                chunk.chunk_id,
                len(changes),
                fold.applied,
                len(fold.rows),
            )
            return result.done(list(fold.rows.values()), fold.applied)
    finally:
        if owned:
            conn.close()
    raise SnapshotError(
        f"chunk {chunk.chunk_id} of keyless table {schema.name} changed between the "
        f"watermarks in each of {attempts} reads; its rows have no key to reconcile changes "
        "by. Add a primary key to the table, or snapshot it when it is quieter, or choose "
        "a chunk-key column (snapshot.chunk-key-columns) that splits the busy rows apart"
    )


@dataclass(frozen=True)
class _Result:
    chunk: SnapshotChunk
    schema: TableSchema
    low: Position
    high: Position
    attempt: int

    def done(self, rows: list[Mapping[str, Any]], folded: int = 0) -> ChunkResult:
        return ChunkResult(
            chunk=self.chunk,
            rows=rows,
            high_watermark=self.high,
            low_watermark=self.low,
            row_count=len(rows),
            schema=self.schema,
            folded=folded,
            attempts=self.attempt,
        )


def check_arguments(schema: TableSchema, chunk: SnapshotChunk, fetch_size: int) -> None:
    if chunk.table != schema.name:
        raise ValueError(f"chunk {chunk.chunk_id} is not of table {schema.name}")
    try:
        schema.column(chunk.key_column)
    except KeyError:
        raise SnapshotError(
            f"chunk {chunk.chunk_id} splits by column {chunk.key_column!r}, which table "
            f"{schema.name} no longer has (columns: {', '.join(schema.column_names)}); "
            "split the table again"
        ) from None
    if isinstance(fetch_size, bool) or not isinstance(fetch_size, int) or fetch_size < 1:
        raise ValueError(f"fetch_size must be an int >= 1, not {fetch_size!r}")


def _read_rebuilt_again(
    conn: Any,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    hooks: ChunkHooks,
    fetch_size: int,
) -> tuple[Position, list[Mapping[str, Any]], Position]:
    """Steps 1-3, read again when the table was rebuilt after the snapshot opened."""
    attempt = 1
    while True:
        try:
            return _read_between_watermarks(conn, server, schema, chunk, hooks, fetch_size)
        except DefinitionChanged:
            conn.rollback()
            if attempt >= DEFINITION_ATTEMPTS:
                raise
            attempt += 1
            log.info("chunk %s: its table was rebuilt meanwhile; reading it again", chunk.chunk_id)


def _read_between_watermarks(
    conn: Any,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    hooks: ChunkHooks,
    fetch_size: int,
) -> tuple[Position, list[Mapping[str, Any]], Position]:
    """Steps 1-3: low watermark, the SELECT, high watermark."""
    low = low_watermark(conn, server)
    log.debug("chunk %s", chunk.describe())
    log.info("chunk %s step 1/4 low watermark %s", chunk.chunk_id, low)
    if hooks.after_low_watermark is not None:
        hooks.after_low_watermark(chunk, low)
    rows = converted_or_reshaped(
        conn, schema, chunk, lambda: _select(conn, schema, chunk, fetch_size)
    )
    check_shape(conn, schema, chunk)
    conn.commit()
    log.info("chunk %s step 2/4 selected %d rows", chunk.chunk_id, len(rows))
    if hooks.after_select is not None:
        hooks.after_select(chunk, len(rows))
    high = current_position(conn, server)
    log.info("chunk %s step 3/4 high watermark %s", chunk.chunk_id, high)
    if hooks.after_high_watermark is not None:
        hooks.after_high_watermark(chunk, high)
    return low, rows, high


def low_watermark(conn: Any, server: ServerInfo) -> Position:
    """MariaDB: the binlog position of a consistent snapshot opened now (no lock); else
    SHOW MASTER STATUS. The SELECT that follows runs in that snapshot."""
    if server.flavor is not Flavor.MARIADB:
        return current_position(conn, server)
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW SESSION STATUS LIKE 'Binlog\\_snapshot\\_%'")
        status = {str(name).lower(): value for name, value in cur.fetchall()}
    file = status.get("binlog_snapshot_file")
    offset = status.get("binlog_snapshot_position")
    if not file or offset is None:
        conn.rollback()
        raise SourceError(
            "the source reports no binlog snapshot position (Binlog_snapshot_file is empty): "
            "start it with log_bin=ON"
        )
    return Position(str(file), int(offset))


def _select(
    conn: Any, schema: TableSchema, chunk: SnapshotChunk, fetch_size: int
) -> list[Mapping[str, Any]]:
    """The chunk's rows, streamed from the server ``fetch_size`` at a time."""
    where, params = chunk.where_clause()
    sql = (
        f"SELECT {select_list(schema.columns).replace('%', '%%')} "
        f"FROM {schema.name.quoted().replace('%', '%%')} WHERE {where}"
    )
    names = schema.column_names
    convert = row_converter(schema.columns, "select")
    rows: list[Mapping[str, Any]] = []
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql, params)
        while batch := cur.fetchmany(fetch_size):
            rows.extend(dict(zip(names, convert(raw), strict=True)) for raw in batch)
    except pymysql.err.MySQLError as exc:
        raise_schema_change(exc, schema, chunk)
        raise
    finally:
        cur.close()
    return rows


def raise_schema_change(
    exc: pymysql.err.MySQLError, schema: TableSchema, chunk: SnapshotChunk
) -> None:
    """Raises what a SELECT's error says about the table's schema: ``DefinitionChanged``
    (rebuilt after the snapshot opened: read again at once) or ``ChunkSchemaChanged``
    (a column or the table is gone); returns for any other error."""
    if exc.args and exc.args[0] == _TABLE_DEF_CHANGED:
        raise DefinitionChanged(
            f"chunk {chunk.chunk_id}: {schema.name} was changed after the snapshot opened "
            f"({exc.args[1] if len(exc.args) > 1 else exc})"
        ) from exc
    if exc.args and exc.args[0] in _SCHEMA_ERRORS:
        raise ChunkSchemaChanged(
            f"chunk {chunk.chunk_id}: {schema.name} is no longer as the schema read with "
            f"({exc.args[1] if len(exc.args) > 1 else exc}); read the chunk again with the "
            "table's new schema"
        ) from exc


def converted_or_reshaped(
    conn: Any, schema: TableSchema, chunk: SnapshotChunk, select: Callable[[], _T]
) -> _T:
    """``select()``, a SELECT of the chunk whose values are converted as ``schema`` types
    them. A value that does not convert may be one the table's new type holds and the
    old cannot (a FLOAT column made DOUBLE after the anchor, then written 1e300): when
    the table is of another shape by now, that is ``ChunkSchemaChanged`` (read the chunk
    again with the new schema), not a failed snapshot; else the error stands."""
    try:
        return select()
    except pymysql.err.MySQLError:
        raise
    except Exception:
        check_shape(conn, schema, chunk)
        raise


def _shape(schema: TableSchema) -> list[tuple[str, str, str]]:
    """What a chunk's values depend on: column names in order and their full types (lengths,
    signs, members): a wider column holds values the schema read with cannot."""
    return [(c.name, c.data_type, c.column_type.lower()) for c in schema.columns]


def check_shape(conn: Any, schema: TableSchema, chunk: SnapshotChunk) -> None:
    """ChunkSchemaChanged when the table the SELECT read is not of ``schema``'s shape.

    A DDL that finished before the snapshot opened is not in the binlog
    between the watermarks, and a column it added is not in the select list:
    only the table itself tells. The SELECT's metadata lock is still held, so
    what information_schema says now is what the SELECT read.
    """
    try:
        current = load_table_schema(conn, schema.name)
    except LookupError:
        current = None
    if current is None or _shape(current) != _shape(schema):
        raise ChunkSchemaChanged(
            f"chunk {chunk.chunk_id}: {schema.name} "
            + ("is gone" if current is None else "has other columns than the schema read with")
            + "; read the chunk again with the table's new schema"
        )


def _backquote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def binlog_changes(
    source: MySQLURI,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    low: Position,
    high: Position,
) -> list[RowChange]:
    """Step 4's read: the table's row changes committed after ``low`` up to ``high``."""
    table = schema.name
    rule = f"{_backquote(table.schema)}.{_backquote(table.table)}"
    puller = Puller(
        PullerConfig(
            source=source,
            server=server,
            start=low,
            tables=TableFilter.parse([rule], case_sensitive=True),
            heartbeat_interval=0.5,
        )
    )
    expected = set(schema.column_names)
    changes: list[RowChange] = []
    deadline = time.monotonic() + BINLOG_TIMEOUT
    try:
        for event in puller.events():
            if isinstance(event, Resolved):
                if event.position.key() >= high.key():
                    return changes
            elif isinstance(event, DdlEvent) and table in event.tables:
                raise ChunkSchemaChanged(
                    f"chunk {chunk.chunk_id}: DDL on {table} between the watermarks "
                    f"({event.statement[:200]!r} at {event.position}); read the chunk again "
                    "with the table's new schema"
                )
            elif isinstance(event, RowChange) and event.table == table:
                if event.position.key() > high.key():
                    return changes
                image = event.row
                if set(image) != expected:
                    raise ChunkSchemaChanged(
                        f"chunk {chunk.chunk_id}: binlog rows of {table} have columns "
                        f"{sorted(image)} but the schema used has {sorted(expected)}; read "
                        "the chunk again with the table's current schema"
                    )
                changes.append(event)
            if time.monotonic() > deadline:
                break
    finally:
        puller.close()
    raise SnapshotError(
        f"chunk {chunk.chunk_id}: the binlog read from {low} did not reach the high "
        f"watermark {high} within {BINLOG_TIMEOUT:.0f}s; check the source's load and network"
    )


def compare_for(
    conn: Any, schema: TableSchema, chunk: SnapshotChunk, changes: list[RowChange]
) -> Compare | None:
    """The server's collation order for a text chunk key (answers fetched in bulk)."""
    column = schema.column(chunk.key_column)
    if column.data_type not in TEXT_TYPES or not changes:
        return None
    order = ServerTextOrder(conn, column)
    order.prefetch(chunk_values(chunk, changes), (chunk.lower, chunk.upper))
    return order.compare
