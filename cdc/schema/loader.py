"""Initial table schemas, read once from ``information_schema`` at the start position.

This is the only place the live schema is read; afterwards the schema history
follows DDL in the binlog (a past event must be read with the schema of its
time, not today's). Reads are batched: one COLUMNS and one STATISTICS query
per schema and per :data:`BATCH_SIZE` tables, so 1000 tables cost a handful of
round trips, not 2000.

Column facts are taken as the server reports them (``COLUMN_TYPE``,
``NUMERIC_PRECISION``/``NUMERIC_SCALE``, ``DATETIME_PRECISION``, charset and
collation, ``COLUMN_DEFAULT`` text, read as bytes: see ``_default_text``); ENUM/SET
members are parsed out of
``COLUMN_TYPE``. Generated columns are recognised by ``EXTRA`` (``VIRTUAL
GENERATED`` / ``STORED GENERATED`` on both MySQL and MariaDB; MySQL's
``DEFAULT_GENERATED`` marks an expression default, not a generated column).
Unique keys keep the server's order (NOT NULL keys first); keys with an
expression part (MySQL functional indexes) identify no column and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pymysql

from cdc.model import Column, TableName, TableSchema
from cdc.schema.columns import parse_elements

__all__ = [
    "BATCH_SIZE",
    "SYSTEM_SCHEMAS",
    "list_tables",
    "load_schemas",
    "load_table_schema",
]

BATCH_SIZE = 500
SYSTEM_SCHEMAS = frozenset({"information_schema", "mysql", "performance_schema", "sys"})

_COLUMNS_SQL = """
SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE,
       CHARACTER_SET_NAME, COLLATION_NAME, NUMERIC_PRECISION, NUMERIC_SCALE,
       DATETIME_PRECISION, EXTRA, CAST(COLUMN_DEFAULT AS BINARY)
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({names})
"""
_STATISTICS_SQL = """
SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({names})
"""
_TABLES_SQL = """
SELECT TABLE_SCHEMA, TABLE_NAME
FROM information_schema.TABLES
WHERE TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')
ORDER BY TABLE_SCHEMA, TABLE_NAME
"""


def list_tables(
    conn: pymysql.connections.Connection, schema_filter: Callable[[str, str], bool]
) -> list[TableName]:
    """Base tables for which ``schema_filter(schema, table)`` is true, sorted.

    Views are not tables (they have no binlog rows) and the system schemas
    (:data:`SYSTEM_SCHEMAS`) are never captured.
    """
    with conn.cursor() as cur:
        cur.execute(_TABLES_SQL)
        rows = cur.fetchall()
    return [
        TableName(schema, table)
        for schema, table in rows
        if schema.lower() not in SYSTEM_SCHEMAS and schema_filter(schema, table)
    ]


def load_table_schema(conn: pymysql.connections.Connection, table: TableName) -> TableSchema:
    """The schema of one table; ``LookupError`` when the server has no such base table."""
    return load_schemas(conn, [table])[table]


def load_schemas(
    conn: pymysql.connections.Connection, tables: Iterable[TableName]
) -> dict[TableName, TableSchema]:
    """Schemas of ``tables`` at version 0, in few queries; ``LookupError`` names missing ones."""
    wanted = list(dict.fromkeys(tables))
    for table in wanted:
        if not isinstance(table, TableName):
            raise TypeError(f"tables must be TableName values, not {table!r}")
    by_schema: dict[str, list[str]] = {}
    for table in wanted:
        by_schema.setdefault(table.schema, []).append(table.table)
    columns: dict[TableName, list[tuple[int, Column]]] = {}
    keys: dict[TableName, dict[str, list[tuple[int, str | None]]]] = {}
    unique: dict[TableName, set[str]] = {}
    with conn.cursor() as cur:
        for schema, names in by_schema.items():
            for start in range(0, len(names), BATCH_SIZE):
                batch = names[start : start + BATCH_SIZE]
                marks = ", ".join(["%s"] * len(batch))
                cur.execute(_COLUMNS_SQL.format(names=marks), [schema, *batch])
                for row in cur.fetchall():
                    name = TableName(schema, row[0])
                    columns.setdefault(name, []).append((int(row[2]), _column(row)))
                cur.execute(_STATISTICS_SQL.format(names=marks), [schema, *batch])
                for table, index, non_unique, seq, column in cur.fetchall():
                    name = TableName(schema, table)
                    keys.setdefault(name, {}).setdefault(index, []).append((int(seq), column))
                    if int(non_unique) == 0:
                        unique.setdefault(name, set()).add(index)
    missing = [str(t) for t in wanted if t not in columns]
    if missing:
        raise LookupError(
            f"no such table on the source: {', '.join(missing)} "
            "(dropped meanwhile, or a name with the wrong case?)"
        )
    return {
        table: _schema(table, columns[table], keys.get(table, {}), unique.get(table, set()))
        for table in wanted
    }


def _column(row: tuple[Any, ...]) -> Column:
    (
        _table,
        name,
        _ordinal,
        data_type,
        column_type,
        is_nullable,
        charset,
        collation,
        precision,
        scale,
        fsp,
        extra,
        default,
    ) = row
    data_type = str(data_type).lower()
    column_type = str(column_type)
    lowered = column_type.lower()
    extra = str(extra or "").upper()
    return Column(
        name=name,
        data_type=data_type,
        column_type=column_type,
        nullable=str(is_nullable).upper() == "YES",
        unsigned=" unsigned" in lowered,
        charset=charset,
        collation=collation,
        precision=None if precision is None else int(precision),
        scale=None if scale is None else int(scale),
        fsp=None if fsp is None else int(fsp),
        elements=parse_elements(column_type) if data_type in ("enum", "set") else (),
        generated="VIRTUAL GENERATED" in extra or "STORED GENERATED" in extra,
        default=_default_text(default),
    )


#: What follows a backslash in a default the server quotes, and the byte it stands for.
_UNESCAPED = {ord("0"): 0, ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("Z"): 26, ord("b"): 8}


def _default_text(raw: bytes | None) -> str | None:
    """``COLUMN_DEFAULT`` as text. A binary column's default is shown as its bytes in
    quotes, which need not be UTF-8 (``VARBINARY(8) DEFAULT 0x6aeda292`` shows as
    ``'j`` and three bytes no UTF-8 decoder takes): read as text, the whole query failed,
    and with it every check and snapshot of the table's schema. Such a default is given
    as the hex literal the schema history renders for that DDL (``x'6aeda292'``); the
    server shows some bytes as ``?``, so the text is not always the bytes, and nothing
    takes it for them (a default is compared, never written)."""
    if raw is None:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "x'" + _unquoted(raw).hex() + "'"


def _unquoted(raw: bytes) -> bytes:
    """The bytes inside the server's quotes (``''`` and backslash escapes undone)."""
    if len(raw) < 2 or raw[:1] != b"'" or raw[-1:] != b"'":
        return raw
    inner, out, i = raw[1:-1], bytearray(), 0
    while i < len(inner):
        byte = inner[i]
        if byte in (0x5C, 0x27) and i + 1 < len(inner):
            follow = inner[i + 1]
            if byte == 0x5C:
                out.append(_UNESCAPED.get(follow, follow))
                i += 2
                continue
            if follow == 0x27:
                out.append(0x27)
                i += 2
                continue
        out.append(byte)
        i += 1
    return bytes(out)


def _schema(
    table: TableName,
    columns: list[tuple[int, Column]],
    indexes: dict[str, list[tuple[int, str | None]]],
    unique: set[str],
) -> TableSchema:
    ordered = tuple(column for _, column in sorted(columns, key=lambda item: item[0]))
    primary: tuple[str, ...] = ()
    unique_keys: list[tuple[str, ...]] = []
    for index, parts in indexes.items():
        names = [column for _, column in sorted(parts, key=lambda part: part[0])]
        if index not in unique or any(name is None for name in names):
            continue
        key = tuple(name for name in names if name is not None)
        if index == "PRIMARY":
            primary = key
        else:
            unique_keys.append(key)
    nullable = {c.name.lower() for c in ordered if c.nullable}
    unique_keys.sort(key=lambda key: any(name.lower() in nullable for name in key))
    return TableSchema(table, ordered, primary, tuple(unique_keys))
