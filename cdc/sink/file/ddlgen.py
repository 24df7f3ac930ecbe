"""CREATE TABLE from a :class:`TableSchema`, for rebuilding tables from the files alone.

What the model knows is reproduced: column names and order, ``column_type``
(ENUM/SET spelled from ``elements``, which keep 4-byte characters that
information_schema prints as ``?``), charset and collation of text columns,
nullability, the primary key and unique keys. What it does not hold is left
out, and a replay does not need it because every row is written in full:
defaults, comments, plain indexes, table options. Generated columns become
ordinary columns holding the values the source computed (their expressions
are not in the model).

Keys on TEXT/BLOB columns need a prefix length the model does not record:
such a unique key is left out, and such a primary key is an error.
"""

from __future__ import annotations

from cdc.model.schema import Column, TableName, TableSchema

__all__ = ["DdlGenError", "column_sql", "create_table_sql", "quote_name"]

_TEXT_FAMILY = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
)
_PREFIX_ONLY = frozenset(
    {
        "tinytext",
        "text",
        "mediumtext",
        "longtext",
        "tinyblob",
        "blob",
        "mediumblob",
        "longblob",
        "json",
        "geometry",
    }
)


class DdlGenError(ValueError):
    """A table schema that cannot be turned into CREATE TABLE faithfully."""


def quote_name(name: str) -> str:
    """A backtick-quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def column_sql(column: Column) -> str:
    """One column definition: name, type, charset, NULL / NOT NULL."""
    if column.data_type in ("enum", "set") and column.elements:
        spelled = f"{column.data_type}({','.join(_literal(e) for e in column.elements)})"
    else:
        spelled = column.column_type
    parts = [quote_name(column.name), spelled]
    if column.data_type in _TEXT_FAMILY and column.charset not in (None, "binary"):
        parts.append(f"CHARACTER SET {column.charset}")
        if column.collation:
            parts.append(f"COLLATE {column.collation}")
    parts.append("NULL" if column.nullable else "NOT NULL")
    return " ".join(parts)


def _key_usable(schema: TableSchema, key: tuple[str, ...]) -> bool:
    return not any(schema.column(name).data_type in _PREFIX_ONLY for name in key)


def create_table_sql(schema: TableSchema, name: TableName | None = None) -> str:
    """``CREATE TABLE`` for ``schema``, named ``name`` (default: the schema's own name)."""
    target = name or schema.name
    lines = [column_sql(c) for c in schema.columns]
    if schema.primary_key:
        if not _key_usable(schema, schema.primary_key):
            raise DdlGenError(
                f"table {schema.name}: primary key {schema.primary_key} has a TEXT/BLOB column "
                "whose prefix length is not recorded; create the table by hand first"
            )
        lines.append(f"PRIMARY KEY ({', '.join(quote_name(k) for k in schema.primary_key)})")
    for key in schema.unique_keys:
        if _key_usable(schema, key):
            lines.append(f"UNIQUE KEY ({', '.join(quote_name(k) for k in key)})")
    body = ",\n  ".join(lines)
    return f"CREATE TABLE {target.quoted()} (\n  {body}\n)"
