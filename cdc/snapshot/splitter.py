"""Splitting a table into snapshot chunks by key ranges (Flink CDC 2.0's chunk splitter).

    choose the chunk-key column: chunk_key if given, else the first column of
    the table's key (primary key, else first unique NOT NULL key), else refuse
        │
    MIN, MAX of the column ── table empty ──► one unbounded chunk
        │
    integer column and (MAX - MIN + 1) / rows within [0.05, 1000]?
        ├─ yes: arithmetic ranges, step = chunk_size * factor   (no per-chunk query)
        └─ no:  boundaries by query, each the chunk_size-th value above the last:
                SELECT k FROM t WHERE k > %s ORDER BY k LIMIT 1 OFFSET chunk_size - 1
        │
    chunks [None, b1), [b1, b2), ..., [bn, MAX), [MAX, None)    (the last: the tail)

Why these rules:

* The first chunk and the tail are unbounded, so rows inserted below the MIN
  or above the MAX seen here still belong to a chunk; NULL chunk-key values
  belong to the first chunk (MySQL sorts NULL first).
* The tail starts at the MAX seen here, so with keys that grow (AUTO_INCREMENT,
  time) it holds only the rows inserted since the plan: it is read first
  (``cdc.snapshot.chunk.reading_order``), and the rows inserted after its read
  come from the binlog. Without it the last chunk would gather every row
  inserted while the whole snapshot runs. A table of one chunk has no tail.
* Boundaries are values that exist in the column and ranges are half-open,
  so all rows sharing a chunk-key value (duplicates of a composite key's first
  column, or equal strings like 'a' and 'A' in a case-insensitive collation)
  land in one chunk, even when that chunk outgrows chunk_size.
* The distribution factor guards the arithmetic: sparse keys (1, 2, 10^12)
  would otherwise yield millions of empty ranges, so they are split by query.
* Text is compared only by the server, in the column's collation: boundaries
  come from ``ORDER BY`` and go back as query parameters.
* Only plain consistent reads: no LOCK TABLES, no FLUSH TABLES, no locking reads.

The connection should be opened with ``typeconv.snapshot_connect_kwargs()``;
its session is set to ``typeconv.SNAPSHOT_SESSION_SQL`` here either way, so
temporal boundaries read and written back are UTC.
"""

from __future__ import annotations

from typing import Any

import pymysql

from cdc.logs import get_logger
from cdc.model.schema import Column, TableSchema
from cdc.snapshot.chunk import SnapshotChunk, sql_param
from cdc.snapshot.errors import SnapshotError, TableGone
from cdc.typeconv import SNAPSHOT_SESSION_SQL, TEXT_TYPES, converter_for

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DISTRIBUTION_FACTOR_LOWER",
    "DISTRIBUTION_FACTOR_UPPER",
    "EXACT_COUNT_LIMIT",
    "arithmetic_bounds",
    "arithmetic_step",
    "chunk_column",
    "chunks_from_bounds",
    "distribution_factor",
    "split_table",
    "with_tail",
    "whole_table",
]

log = get_logger(__name__)

DEFAULT_CHUNK_SIZE = 8096
#: Flink CDC's ``chunk-key.even-distribution.factor.lower-bound`` / ``upper-bound``.
DISTRIBUTION_FACTOR_LOWER = 0.05
DISTRIBUTION_FACTOR_UPPER = 1000.0
#: Below this estimated size a table's rows are counted exactly (the estimate of a
#: freshly loaded table can be 0); above it the server's estimate is used.
EXACT_COUNT_LIMIT = 1_000_000
#: ER_NO_SUCH_TABLE: renamed or dropped since the schema the split works from was read.
_NO_SUCH_TABLE = 1146

_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
#: Types whose order in ORDER BY, in comparisons and (canonical) in Python agree.
#: Not FLOAT (its text form is rounded), ENUM/SET (ORDER BY uses the index,
#: comparisons with a string the label), BIT, JSON, spatial types.
_SPLITTABLE_TYPES = (
    _INTEGER_TYPES
    | TEXT_TYPES
    | frozenset(
        {
            "decimal",
            "numeric",
            "dec",
            "fixed",
            "double",
            "real",
            "double precision",
            "date",
            "datetime",
            "timestamp",
            "time",
            "binary",
            "varbinary",
            "tinyblob",
            "blob",
            "mediumblob",
            "longblob",
        }
    )
)


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def chunk_column(schema: TableSchema, chunk_key: str | None = None) -> Column:
    """The column whose ranges make the chunks; SnapshotError when there is none.

    ``chunk_key`` (the changefeed's ``chunk-key-columns`` entry) wins; else the
    first column of ``schema.key_columns``. A keyless table needs ``chunk_key``.
    """
    table = schema.name
    if chunk_key is not None:
        try:
            column = schema.column(chunk_key)
        except KeyError:
            raise SnapshotError(
                f"chunk key column {chunk_key!r} given for {table} does not exist; its columns "
                f"are {', '.join(schema.column_names)} (fix snapshot.chunk-key-columns)"
            ) from None
        if column.data_type not in _SPLITTABLE_TYPES:
            raise SnapshotError(
                f"chunk key column {column.name!r} of {table} has type {column.column_type}, "
                "which cannot be split into ranges (FLOAT, ENUM, SET, BIT, JSON and spatial "
                "types order differently in SQL and in comparisons); choose an integer, "
                "decimal, date/time, text or binary column in snapshot.chunk-key-columns"
            )
        return column
    if not schema.key_columns:
        raise SnapshotError(
            f"table {table} has no primary key and no unique key on NOT NULL columns, so "
            "its rows cannot be split into chunks by key. Name a column to split it by in "
            f'the changefeed config: [snapshot] chunk-key-columns = {{ "{table}" = "<column>" '
            "} (an indexed column with many distinct values is best)"
        )
    return schema.column(schema.key_columns[0])


def distribution_factor(low: int, high: int, rows: int) -> float:
    """``(high - low + 1) / rows``: key values per row; 1.0 for dense unique keys."""
    if rows <= 0:
        raise ValueError(f"distribution factor needs a positive row count, not {rows}")
    return (high - low + 1) / rows


def arithmetic_step(low: int, high: int, rows: int, chunk_size: int) -> int | None:
    """The key step of evenly sized integer ranges holding about ``chunk_size`` rows, or
    None when the keys are too sparse or too repetitive for arithmetic (or rows is 0)."""
    if rows <= 0:
        return None
    factor = distribution_factor(low, high, rows)
    if not DISTRIBUTION_FACTOR_LOWER <= factor <= DISTRIBUTION_FACTOR_UPPER:
        return None
    return max(int(chunk_size * factor), 1)


def arithmetic_bounds(low: int, high: int, step: int) -> list[int]:
    """Boundaries ``low + step, low + 2*step, ... <= high`` of evenly sized integer ranges."""
    if step < 1:
        raise ValueError(f"step must be >= 1, not {step}")
    return list(range(low + step, high + 1, step))


def with_tail(bounds: list[Any], high: Any) -> list[Any]:
    """``bounds`` ending at ``high`` (the MAX seen), so that the last chunk starts there;
    unchanged when empty (a table of one chunk) or already ending at ``high``."""
    if not bounds or bounds[-1] == high:
        return bounds
    return [*bounds, high]


def chunks_from_bounds(
    schema: TableSchema, column: Column, bounds: list[Any]
) -> list[SnapshotChunk]:
    """``[None, b1), [b1, b2), ..., [bn, None)``; one unbounded chunk when ``bounds`` is empty."""
    edges: list[Any] = [None, *bounds, None]
    return [
        SnapshotChunk(schema.name, n, column.name, edges[n], edges[n + 1])
        for n in range(len(edges) - 1)
    ]


def split_table(
    conn: Any,
    schema: TableSchema,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    chunk_key: str | None = None,
    *,
    tail: bool = True,
) -> list[SnapshotChunk]:
    """The chunks of ``schema``'s table, in key order, numbered from 0 (see the module doc).

    ``chunk_key`` names the column to split by (required for a table with no
    usable key). Chunks hold about ``chunk_size`` rows; a chunk-key value
    with more rows than that stays whole in one chunk. A key column of a type
    that cannot be split (FLOAT, ENUM, ...) gives one chunk for the table.
    ``tail``: end the plan with a tail starting at the MAX (a snapshot's plan; the
    chunks of a comparison, checked on both sides at once, need none).
    ``TableGone`` when the source has no table of that name any more.
    """
    try:
        return _split(conn, schema, chunk_size, chunk_key, tail)
    except pymysql.err.ProgrammingError as exc:
        if exc.args and exc.args[0] == _NO_SUCH_TABLE:
            raise TableGone(f"table {schema.name} is not on the source any more: {exc}") from exc
        raise


def whole_table(schema: TableSchema, chunk_key: str | None = None) -> list[SnapshotChunk]:
    """The plan of one unbounded chunk: the table as one key range."""
    return chunks_from_bounds(schema, chunk_column(schema, chunk_key), [])


def _split(
    conn: Any, schema: TableSchema, chunk_size: int, chunk_key: str | None, tail: bool
) -> list[SnapshotChunk]:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1, not {chunk_size!r}")
    column = chunk_column(schema, chunk_key)
    table = schema.name
    if column.data_type not in _SPLITTABLE_TYPES:
        log.warning(
            "table %s: key column %s has type %s, which cannot be split into ranges; "
            "the table is read as one chunk (set snapshot.chunk-key-columns to split it)",
            table,
            column.name,
            column.column_type,
        )
        return chunks_from_bounds(schema, column, [])
    _session(conn)
    if not _is_indexed(conn, schema, column):
        log.warning(
            "table %s: chunk key column %s has no index; every boundary query scans the table",
            table,
            column.name,
        )
    convert = converter_for(column, "select")
    quoted, name = _quote(column.name), table.quoted()
    low, high = (convert(v) for v in _one(conn, f"SELECT MIN({quoted}), MAX({quoted}) FROM {name}"))
    if low is None:
        log.info("split %s by %s: no values, one chunk", table, column.name)
        return chunks_from_bounds(schema, column, [])
    if column.data_type in _INTEGER_TYPES:
        rows = _row_count(conn, schema)
        step = arithmetic_step(low, high, rows, chunk_size)
        factor = distribution_factor(low, high, rows) if rows else float("inf")
        if step is not None:
            bounds = arithmetic_bounds(low, high, step)
            bounds = with_tail(bounds, high) if tail else bounds
            chunks = chunks_from_bounds(schema, column, bounds)
            log.info(
                "split %s by %s: %d chunk(s), arithmetic step %d over [%d, %d] "
                "(about %d rows, distribution factor %.3g)",
                table,
                column.name,
                len(chunks),
                step,
                low,
                high,
                rows,
                factor,
            )
            return chunks
        log.info(
            "split %s by %s: distribution factor %.3g outside [%g, %g], boundaries by query",
            table,
            column.name,
            factor,
            DISTRIBUTION_FACTOR_LOWER,
            DISTRIBUTION_FACTOR_UPPER,
        )
    bounds = _queried_bounds(conn, schema, column, low, chunk_size)
    bounds = with_tail(bounds, high) if tail else bounds
    chunks = chunks_from_bounds(schema, column, bounds)
    log.info("split %s by %s: %d chunk(s), boundaries by query", table, column.name, len(chunks))
    return chunks


def _queried_bounds(
    conn: Any, schema: TableSchema, column: Column, low: Any, chunk_size: int
) -> list[Any]:
    """Each boundary is the chunk_size-th value strictly above the previous one.

    "Strictly above" (in the server's order) is what keeps equal values
    together and guarantees progress, without comparing anything in Python.
    """
    convert = converter_for(column, "select")
    quoted = _quote(column.name).replace("%", "%%")
    sql = (
        f"SELECT {quoted} FROM {schema.name.quoted().replace('%', '%%')} WHERE {quoted} > %s "
        f"ORDER BY {quoted} LIMIT 1 OFFSET {chunk_size - 1}"
    )
    bounds: list[Any] = []
    last = low
    while True:
        with conn.cursor() as cur:
            cur.execute(sql, (sql_param(last),))
            row = cur.fetchone()
        if row is None:
            return bounds
        last = convert(row[0])
        bounds.append(last)


def _session(conn: Any) -> None:
    with conn.cursor() as cur:
        for statement in SNAPSHOT_SESSION_SQL:
            cur.execute(statement)


def _one(conn: Any, sql: str, params: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def _row_count(conn: Any, schema: TableSchema) -> int:
    """The server's row estimate, or an exact COUNT(*) when the estimate is small."""
    row = _one(
        conn,
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = %s",
        (schema.name.schema, schema.name.table),
    )
    estimate = int(row[0]) if row and row[0] is not None else 0
    if estimate >= EXACT_COUNT_LIMIT:
        return estimate
    return int(_one(conn, f"SELECT COUNT(*) FROM {schema.name.quoted()}")[0])


def _is_indexed(conn: Any, schema: TableSchema, column: Column) -> bool:
    """Whether some index starts with ``column`` (boundary queries then walk an index)."""
    row = _one(
        conn,
        "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = %s AND SEQ_IN_INDEX = 1 AND COLUMN_NAME = %s",
        (schema.name.schema, schema.name.table, column.name),
    )
    return bool(row and row[0])
