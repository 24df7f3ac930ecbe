"""Reading one chunk of a re-snapshot of a table whose binlog stream keeps running.

A re-snapshot repairs what the downstream holds of a range (rows missing, changed, or
there although the source has none) while the table's stream goes on writing the same
rows (DBLog's on-demand dumps). The source side is the chunk reader's window
(``cdc.snapshot.reader``), without the fold:

    step 1/4  low watermark   (the consistent snapshot's binlog position, MariaDB)
    step 2/4  SELECT          the chunk's rows that the predicate selects, and, with a
                              predicate, the keys of every row of the range (which rows
                              exist at all: a row the predicate leaves out is not gone)
    step 3/4  high watermark
    step 4/4  binlog low..high for the table: the keys it changed (before and after images)

and, later, :func:`keys_held`: which of the keys the caller wrote the source still
holds, asked once the downstream holds their locks (why: ``rangerepair``, step 6).

and, under the SELECT's metadata lock, the table's facts that the downstream's are
compared with before a chunk writes (``cdc.schema.tablefacts``: engine, collations,
unique keys; ``cdc.sink.mysql.repaircheck``).

The rows are *not* folded to the high watermark: a key the window changed is left to
the stream (DBLog: the chunk's rows override only keys not changed in the window), so
the caller writes only the other keys. Why that is enough, and why the caller must lock
the downstream range before step 1, is in ``cdc.sink.mysql.rangerepair``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql.cursors

from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.schema.reader import quote_name
from cdc.schema.tablefacts import TableFacts, read_table_facts
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.errors import SnapshotError
from cdc.snapshot.reader import (
    DEFINITION_ATTEMPTS,
    DefinitionChanged,
    binlog_changes,
    check_arguments,
    check_shape,
    converted_or_reshaped,
    low_watermark,
    raise_schema_change,
)
from cdc.source.flavor import ServerInfo, current_position
from cdc.typeconv import row_converter, select_list, sql_param_converter
from cdc.uri.mysql import MySQLURI

__all__ = ["RepairOutcome", "RepairRead", "keys_held", "read_repair"]

Key = tuple[Any, ...]


@dataclass(frozen=True)
class RepairRead:
    """What the source said about a chunk's range between ``low`` and ``high``.

    ``rows``: the rows the predicate selected, as of the SELECT; ``keys``: the keys of
    every row of the range then (with no predicate, the keys of ``rows``); ``touched``:
    the keys the binlog changed between the watermarks; ``facts``: the source table's
    engine, collations and unique keys as the SELECT read it (None: not read, and a
    writer that needs them refuses the chunk).
    """

    chunk: SnapshotChunk
    rows: list[Mapping[str, Any]]
    keys: set[Key]
    touched: set[Key]
    low: Position
    high: Position
    facts: TableFacts | None = None


@dataclass(frozen=True)
class RepairOutcome:
    """A re-snapshot chunk's write: the source read, rows written, rows removed, and rows
    left to the stream (their keys changed between the watermarks)."""

    read: RepairRead
    upserted: int
    deleted: int
    left_to_stream: int


def read_repair(
    source: MySQLURI,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    predicate_sql: str | None,
    conn: Any,
    fetch_size: int = 1000,
) -> RepairRead:
    """Steps 1-4 on ``conn`` (a connection made with ``snapshot_connect_kwargs()``)."""
    check_arguments(schema, chunk, fetch_size)
    if not schema.key_columns:
        raise SnapshotError(
            f"table {schema.name} has no key: a re-snapshot removes and keeps rows by key"
        )
    for attempt in range(1, DEFINITION_ATTEMPTS + 1):
        try:
            low, rows, keys, facts, high = _window(
                conn, server, schema, chunk, predicate_sql, fetch_size
            )
            break
        except DefinitionChanged:
            conn.rollback()
            if attempt == DEFINITION_ATTEMPTS:
                raise
    touched: set[Key] = set()
    if high.key() > low.key():
        names = schema.key_columns
        for change in binlog_changes(source, server, schema, chunk, low, high):
            for image in (change.before, change.after):
                if image is not None:
                    touched.add(tuple(image[k] for k in names))
    return RepairRead(chunk, rows, keys, touched, low, high, facts)


def _window(
    conn: Any,
    server: ServerInfo,
    schema: TableSchema,
    chunk: SnapshotChunk,
    predicate_sql: str | None,
    fetch_size: int,
) -> tuple[Position, list[Mapping[str, Any]], set[Key], TableFacts | None, Position]:
    low = low_watermark(conn, server)
    rows = converted_or_reshaped(
        conn, schema, chunk, lambda: _select(conn, schema, chunk, predicate_sql, fetch_size)
    )
    names = schema.key_columns
    if predicate_sql is None:
        keys = {tuple(row[k] for k in names) for row in rows}
    else:
        keys = converted_or_reshaped(
            conn, schema, chunk, lambda: _keys(conn, schema, chunk, fetch_size)
        )
    check_shape(conn, schema, chunk)
    facts = read_table_facts(conn, schema.name)
    conn.commit()
    high = current_position(conn, server)
    return low, rows, keys, facts, high


def _select(
    conn: Any,
    schema: TableSchema,
    chunk: SnapshotChunk,
    predicate_sql: str | None,
    fetch_size: int,
) -> list[Mapping[str, Any]]:
    where, params = chunk.where_clause()
    if predicate_sql is not None:
        where = f"({where}) AND ({predicate_sql.replace('%', '%%')})"
    sql = (
        f"SELECT {select_list(schema.columns).replace('%', '%%')} "
        f"FROM {schema.name.quoted().replace('%', '%%')} WHERE {where}"
    )
    names = schema.column_names
    convert = row_converter(schema.columns, "select")
    raws = _fetch(conn, sql, params, fetch_size, schema, chunk)
    return [dict(zip(names, convert(raw), strict=True)) for raw in raws]


def _keys(conn: Any, schema: TableSchema, chunk: SnapshotChunk, fetch_size: int) -> set[Key]:
    columns = [schema.column(k) for k in schema.key_columns]
    where, params = chunk.where_clause()
    sql = (
        f"SELECT {select_list(columns).replace('%', '%%')} "
        f"FROM {schema.name.quoted().replace('%', '%%')} WHERE {where}"
    )
    convert = row_converter(columns, "select")
    return {convert(raw) for raw in _fetch(conn, sql, params, fetch_size, schema, chunk)}


def _fetch(
    conn: Any,
    sql: str,
    params: tuple[Any, ...],
    fetch_size: int,
    schema: TableSchema,
    chunk: SnapshotChunk,
) -> list[Any]:
    out: list[Any] = []
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql, params)
        while batch := cur.fetchmany(fetch_size):
            out.extend(batch)
    except pymysql.err.MySQLError as exc:
        raise_schema_change(exc, schema, chunk)
        raise
    finally:
        cur.close()
    return out


#: Keys asked about in one ``keys_held`` statement.
_HELD_BATCH = 256


def keys_held(conn: Any, schema: TableSchema, keys: Sequence[Key]) -> list[bool]:
    """Whether the source holds a row of each of ``keys`` now: one ``EXISTS`` per key,
    compared by the source itself (under its key columns' collations), in a fresh read
    view (``conn`` is committed before and after)."""
    names = schema.key_columns
    converters = [sql_param_converter(schema.column(n)) for n in names]
    condition = " AND ".join(f"{quote_name(n)} = %s" for n in names)
    exists = f"EXISTS (SELECT 1 FROM {schema.name.quoted().replace('%', '%%')} WHERE {condition})"
    held: list[bool] = []
    conn.commit()
    try:
        with conn.cursor(pymysql.cursors.Cursor) as cur:
            for start in range(0, len(keys), _HELD_BATCH):
                part = keys[start : start + _HELD_BATCH]
                params = [
                    convert(v) for key in part for convert, v in zip(converters, key, strict=True)
                ]
                cur.execute("SELECT " + ", ".join([exists] * len(part)), params)
                held.extend(bool(found) for found in cur.fetchone())
    finally:
        conn.commit()
    return held
