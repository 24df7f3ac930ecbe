"""What a re-snapshot's safety depends on, read from ``information_schema`` of one server.

A re-snapshot chunk (``cdc.sink.mysql.rangerepair``) is bounded in the source's order
and evaluated downstream in the downstream's, locks the range with the downstream
engine's row and gap locks, and writes with ``REPLACE``. Each side's facts of the table
are compared before anything is written (``cdc.sink.mysql.repaircheck``):

    ENGINE                          information_schema.TABLES
    charset and collation of
      every column                  information_schema.COLUMNS
    every unique index, with its
      columns (an expression part
      as ``None``)                  information_schema.STATISTICS (NON_UNIQUE = 0)

Read inside the transaction whose metadata lock holds the table (a chunk's), they are
what that transaction reads and writes under.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc.model.schema import TableName

__all__ = ["TableFacts", "read_table_facts"]

_TABLE_SQL = """
SELECT ENGINE FROM information_schema.TABLES
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED')
"""
_COLUMNS_SQL = """
SELECT COLUMN_NAME, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s
"""
_UNIQUE_SQL = """
SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0
ORDER BY INDEX_NAME, SEQ_IN_INDEX
"""


@dataclass(frozen=True)
class TableFacts:
    """One server's facts of a table (names of columns lower case).

    ``engine``: as the server names it (``InnoDB``), None if it reports none;
    ``columns``: each column's ``(CHARACTER_SET_NAME, COLLATION_NAME)``, both None for a
    column that is not text; ``unique_keys``: each unique index (the primary key
    included) by name, its columns in order, ``None`` for an expression part.
    """

    table: TableName
    engine: str | None
    columns: Mapping[str, tuple[str | None, str | None]]
    unique_keys: Mapping[str, tuple[str | None, ...]]


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8")
    return str(value)


def read_table_facts(conn: Any, table: TableName) -> TableFacts | None:
    """``table``'s facts on the server ``conn`` reaches; None when it has no such base table."""
    where = (table.schema, table.table)
    with conn.cursor() as cur:
        cur.execute(_TABLE_SQL, where)
        found = cur.fetchall()
        if not found:
            return None
        engine = _text(found[0][0])
        cur.execute(_COLUMNS_SQL, where)
        columns = {
            (_text(name) or "").lower(): (_text(charset), _text(collation))
            for name, charset, collation in cur.fetchall()
        }
        cur.execute(_UNIQUE_SQL, where)
        parts: dict[str, list[str | None]] = {}
        for index, _seq, column in cur.fetchall():
            name = _text(column)
            parts.setdefault(_text(index) or "", []).append(None if name is None else name.lower())
    return TableFacts(table, engine, columns, {index: tuple(cols) for index, cols in parts.items()})
