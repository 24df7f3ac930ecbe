"""Downstream tables before the first chunk is written (TiDB DM's dump phase does the same).

A table missing downstream is created from the source's own `SHOW CREATE
TABLE`; an existing one is used as it is, after checking that it has the
source's columns (a missing or extra column would make every write fail,
later and less clearly).
"""

from __future__ import annotations

from typing import Any

from cdc.config.uri import MySQLSinkURI, SinkURI
from cdc.model.schema import TableSchema
from cdc.source.connect import connect


class DownstreamTableMismatch(RuntimeError):
    """An existing downstream table does not have the source table's columns."""


def prepare_downstream_table(source_conn: Any, sink: SinkURI, schema: TableSchema) -> str:
    """'created', 'existing' or 'not a database sink'; DownstreamTableMismatch if unusable."""
    if not isinstance(sink, MySQLSinkURI):
        return "not a database sink"
    name = schema.name
    conn = connect(sink.connection, what="downstream")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (name.schema, name.table),
            )
            existing = [row[0] for row in cur.fetchall()]
            if existing:
                _check_columns(schema, existing)
                return "existing"
            with source_conn.cursor() as src:
                src.execute(f"SHOW CREATE TABLE {name.quoted()}")
                create = src.fetchone()[1]
            quoted_db = name.quoted().split(".", 1)[0]
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quoted_db}")
            cur.execute(f"USE {quoted_db}")
            cur.execute(create)
            return "created"
    finally:
        conn.close()


def _check_columns(schema: TableSchema, existing: list[str]) -> None:
    source = [c.name for c in schema.columns]
    lower = {c.lower() for c in existing}
    missing = [c for c in source if c.lower() not in lower]
    extra = [c for c in existing if c.lower() not in {s.lower() for s in source}]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing downstream: {', '.join(missing)}")
        if extra:
            parts.append(f"only downstream: {', '.join(extra)}")
        raise DownstreamTableMismatch(
            f"downstream table {schema.name} does not match the source ({'; '.join(parts)}); "
            "alter or drop the downstream table, or exclude the table with a filter rule"
        )
