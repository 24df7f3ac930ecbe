"""Downstream tables before the first chunk (TiDB DM's dump phase does the same).

A table missing downstream is created from the source's own `SHOW CREATE
TABLE`, then altered to the schema the changefeed writes (its column rules,
``cdc.filter.column_plan``: excluded columns dropped, a hashed column
widened to CHAR(64)); an existing one is used as it is, after checking that it has the
source's columns (a missing or extra column would make every write fail,
later and less clearly) and that each downstream column can hold every value
of the source's (:func:`column_type_problem`): a narrower column would make
the strict sink sessions fail on the first value that does not fit, perhaps
days later, so the mismatch is said before the table's first chunk. A wider
downstream column is fine.
"""

from __future__ import annotations

import re
from typing import Any

import pymysql

from cdc.model.schema import Column, TableName, TableSchema
from cdc.schema.columns import canonical_charset, max_bytes_per_char
from cdc.schema.loader import load_table_schema
from cdc.schema.reader import quote_name
from cdc.sink.kind import DownstreamTableMismatch
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.source.connect import connect

__all__ = ["check_existing", "column_type_problem", "drop_table", "prepare_table"]

#: ER_NO_SUCH_TABLE
_NO_SUCH_TABLE = 1146


def prepare_table(
    sink: MySQLSinkURI,
    source_conn: Any,
    schema: TableSchema,
    *,
    replace: bool = False,
    source_schema: TableSchema | None = None,
) -> str:
    """'created' or 'existing'; DownstreamTableMismatch if the existing table is unusable.

    ``replace``: an existing downstream table holds only a partial snapshot of this
    table, under an older schema (a table renamed before its snapshot settled): it is
    dropped and created anew, as the snapshot fills it entirely.
    """
    name = schema.name
    conn = connect(sink.connection, what="downstream")
    try:
        if replace:
            with conn.cursor() as cur:
                cur.execute(f"DROP TABLE IF EXISTS {name.quoted()}")
        try:
            downstream = load_table_schema(conn, name)
        except LookupError:
            downstream = None
        if downstream is not None:
            _check_fit(schema, downstream)
            return "existing"
        with conn.cursor() as cur:
            create = _show_create(source_conn, schema)
            quoted_db = quote_name(name.schema)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quoted_db}")
            cur.execute(f"USE {quoted_db}")
            cur.execute(create)
            if source_schema is not None and source_schema != schema:
                _conform(cur, schema, source_schema)
            return "created"
    finally:
        conn.close()


def check_existing(sink: MySQLSinkURI, schemas: list[TableSchema]) -> None:
    """``DownstreamTableMismatch`` for the first of ``schemas`` whose downstream table
    exists and could not take its rows (``prepare_table``'s checks, nothing created);
    one connection for all of them."""
    conn = connect(sink.connection, what="downstream")
    try:
        for schema in schemas:
            try:
                downstream = load_table_schema(conn, schema.name)
            except LookupError:
                continue
            _check_fit(schema, downstream)
    finally:
        conn.close()


def _conform(cur: Any, schema: TableSchema, source: TableSchema) -> None:
    """Alters a table just created from the source's definition (``source``) to
    ``schema``, what the changefeed writes: columns it does not send are dropped, a
    column it sends in another type (a hash) is modified to it. Nothing to do without
    column rules (``schema`` is then the source's)."""
    wanted = {c.name.lower(): c for c in schema.columns}
    changes = [
        f"DROP COLUMN {quote_name(c.name)}" for c in source.columns if c.name.lower() not in wanted
    ]
    for column in source.columns:
        target = wanted.get(column.name.lower())
        if target is not None and target != column:
            charset = f" CHARACTER SET {target.charset}" if target.charset else ""
            collate = f" COLLATE {target.collation}" if target.collation else ""
            null = " NULL" if target.nullable else " NOT NULL"
            changes.append(
                f"MODIFY COLUMN {quote_name(target.name)} {target.column_type}"
                f"{charset}{collate}{null}"
            )
    if changes:
        cur.execute(f"ALTER TABLE {schema.name.quoted()} {', '.join(changes)}")


def drop_table(sink: MySQLSinkURI, name: TableName) -> None:
    """Drops the downstream table ``name`` if there is one."""
    conn = connect(sink.connection, what="downstream")
    try:
        with conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {name.quoted()}")
    finally:
        conn.close()


def _show_create(source_conn: Any, schema: TableSchema) -> bytes:
    """The source's ``SHOW CREATE TABLE``, as the server's bytes.

    A binary column's default is shown as its raw bytes, which need not be UTF-8
    (``VARBINARY ... DEFAULT 0x88...``): read as text, the statement cannot even be
    decoded. Read as bytes and run as bytes, a binary literal reaches the downstream
    unconverted and text keeps its UTF-8, as the source shows it. ``LookupError`` when
    the table is gone (renamed or dropped since its schema was read), as the schema
    loader says it.
    """
    with source_conn.cursor() as src:
        src.execute("SELECT @@SESSION.character_set_results")
        results = src.fetchone()[0]
        src.execute("SET SESSION character_set_results = binary")
        try:
            src.execute(f"SHOW CREATE TABLE {schema.name.quoted()}")
            create = src.fetchone()[1]
        except pymysql.err.ProgrammingError as exc:
            if exc.args and exc.args[0] == _NO_SUCH_TABLE:
                raise LookupError(
                    f"no such table on the source: {schema.name} (dropped or renamed meanwhile)"
                ) from exc
            raise
        finally:
            if results is None:
                src.execute("SET SESSION character_set_results = NULL")
            else:
                src.execute("SET SESSION character_set_results = %s", (results,))
    return bytes(create)


def _check_fit(schema: TableSchema, downstream: TableSchema) -> None:
    """``DownstreamTableMismatch`` unless the existing ``downstream`` table has the
    columns of ``schema`` and can hold their values."""
    _check_columns(schema, list(downstream.column_names))
    _check_types(schema, downstream)


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


def _check_types(schema: TableSchema, downstream: TableSchema) -> None:
    by_name = {c.name.lower(): c for c in downstream.columns}
    problems = []
    for column in schema.columns:
        target = by_name[column.name.lower()]
        problem = column_type_problem(column, target)
        if problem is not None:
            problems.append(
                f"column {column.name!r} is {_describe(target)} downstream but "
                f"{_describe(column)} on the source: {problem}"
            )
    if problems:
        raise DownstreamTableMismatch(
            f"downstream table {schema.name} cannot hold the source's values "
            f"({'; '.join(problems)}); the strict sink would fail on the first value that "
            "does not fit: ALTER the downstream column(s) to the source's type (or wider), "
            "drop the downstream table so it is created from the source, or exclude the "
            "table with a filter rule"
        )


def _describe(column: Column) -> str:
    charset = column.charset if _CHARACTER.get(column.data_type) else None
    return column.column_type + (f" CHARACTER SET {charset}" if charset else "")


# --- the comparison (a pure function of two columns) ----------------------------------------

_INTEGER_RANK = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 5}
_ALIASES = {"integer": "int", "bool": "tinyint", "boolean": "tinyint", "json": "longtext"}
# Largest value, in bytes, of each TEXT / BLOB size.
_LOB_BYTES = {
    **dict.fromkeys(("tinytext", "tinyblob"), 255),
    **dict.fromkeys(("text", "blob"), 65535),
    **dict.fromkeys(("mediumtext", "mediumblob"), 16777215),
    **dict.fromkeys(("longtext", "longblob"), 4294967295),
}
# True: characters (with a charset); False: bytes.
_CHARACTER = {
    "char": True,
    "varchar": True,
    **dict.fromkeys(("tinytext", "text", "mediumtext", "longtext"), True),
    "binary": False,
    "varbinary": False,
    **dict.fromkeys(("tinyblob", "blob", "mediumblob", "longblob"), False),
}
_FRACTIONAL = frozenset({"datetime", "timestamp", "time"})
_UNICODE_FULL = frozenset({"utf8mb4", "utf16", "utf16le", "utf32"})
_UNICODE_BMP = frozenset({"utf8mb3", "ucs2"})
_LENGTH = re.compile(r"\((\d+)")


def column_type_problem(source: Column, downstream: Column) -> str | None:
    """Why ``downstream`` cannot hold every value ``source`` may have; None when it can.

    A wider downstream is fine (a bigger integer, a longer string, more DECIMAL
    digits or fractional seconds, more ENUM/SET members, a charset that holds
    the source's). Two types of different kinds are a problem, except string
    kinds of enough room: a CHAR into a VARCHAR or TEXT, a VARCHAR into a TEXT.
    """
    src, dst = _base(source), _base(downstream)
    if src in _CHARACTER and dst in _CHARACTER:
        return _string_problem(source, src, downstream, dst)
    if src in _INTEGER_RANK and dst in _INTEGER_RANK:
        return _integer_problem(source, src, downstream, dst)
    if src != dst and not (src == "float" and dst == "double"):
        return f"a {dst.upper()} column cannot hold {src.upper()} values"
    if src == "decimal":
        return _decimal_problem(source, downstream)
    if src in _FRACTIONAL:
        have, need = downstream.fsp or 0, source.fsp or 0
        if have < need:
            return f"{need} fractional digit(s) of seconds would be cut to {have}"
        return None
    if src in ("enum", "set"):
        return _members_problem(source, downstream)
    if src == "bit":
        have, need = _length(downstream) or 1, _length(source) or 1
        return None if have >= need else f"BIT({need}) values do not fit in BIT({have})"
    if downstream.unsigned and not source.unsigned:
        return "negative values do not fit in an UNSIGNED column"
    return None


def _base(column: Column) -> str:
    return _ALIASES.get(column.data_type, column.data_type)


def _length(column: Column) -> int | None:
    match = _LENGTH.search(column.column_type)
    return int(match.group(1)) if match else None


def _max_chars(column: Column, base: str) -> int:
    """The most characters (for bytes kinds: bytes) a value of ``column`` may have."""
    if base in _LOB_BYTES:
        return _LOB_BYTES[base]
    return _length(column) or 1


def _string_problem(source: Column, src: str, downstream: Column, dst: str) -> str | None:
    if _CHARACTER[src] != _CHARACTER[dst]:
        kinds = ("bytes", "characters") if _CHARACTER[dst] else ("characters", "bytes")
        return f"a column of {kinds[1]} cannot hold {kinds[0]} faithfully"
    if dst == "char" and src != "char":
        return "a CHAR column drops the trailing spaces of the source's values"
    if dst == "binary" and (src != "binary" or _length(downstream) != _length(source)):
        return "a BINARY column pads shorter values with zero bytes"
    need = _max_chars(source, src)
    if src in _LOB_BYTES and dst in _LOB_BYTES:
        if _LOB_BYTES[dst] < _LOB_BYTES[src]:
            return f"values of up to {need} bytes may not fit in a {dst.upper()}"
    elif dst in _LOB_BYTES:
        per_char = (max_bytes_per_char(downstream.charset) or 4) if _CHARACTER[dst] else 1
        if _LOB_BYTES[dst] < need * per_char:
            return f"values of up to {need} {_unit(src)} may not fit in a {dst.upper()}"
    else:
        have = _max_chars(downstream, dst)
        if have < need:
            return f"values of up to {need} {_unit(src)} do not fit in {have}"
    if _CHARACTER[src]:
        return _charset_problem(source.charset, downstream.charset)
    return None


def _unit(base: str) -> str:
    return "characters" if _CHARACTER[base] else "bytes"


def _charset_problem(source: str | None, downstream: str | None) -> str | None:
    src, dst = canonical_charset(source), canonical_charset(downstream)
    if src is None or dst is None or src == dst or dst in _UNICODE_FULL:
        return None
    if dst in _UNICODE_BMP and src not in _UNICODE_FULL:
        return None
    if src == "ascii" and dst != "binary":
        return None
    return f"character set {dst} cannot hold every character of {src}"


def _integer_problem(source: Column, src: str, downstream: Column, dst: str) -> str | None:
    have, need = _INTEGER_RANK[dst], _INTEGER_RANK[src]
    if downstream.unsigned and not source.unsigned:
        return "negative values do not fit in an UNSIGNED column"
    if source.unsigned and not downstream.unsigned:
        if have <= need:
            return f"the largest UNSIGNED {src.upper()} values do not fit in a signed {dst.upper()}"
        return None
    if have < need:
        return f"{src.upper()} values do not fit in a {dst.upper()}"
    return None


def _decimal_problem(source: Column, downstream: Column) -> str | None:
    if downstream.unsigned and not source.unsigned:
        return "negative values do not fit in an UNSIGNED column"
    s_precision, s_scale = _decimal_digits(source)
    d_precision, d_scale = _decimal_digits(downstream)
    if d_scale < s_scale:
        return f"{s_scale} decimal place(s) would be rounded to {d_scale}"
    if d_precision - d_scale < s_precision - s_scale:
        return f"{s_precision - s_scale} integer digit(s) do not fit in {d_precision - d_scale}"
    return None


def _decimal_digits(column: Column) -> tuple[int, int]:
    match = re.search(r"\((\d+)(?:,(\d+))?\)", column.column_type)
    if match:
        return int(match.group(1)), int(match.group(2) or 0)
    return column.precision or 10, column.scale or 0


def _members_problem(source: Column, downstream: Column) -> str | None:
    have = {_as_shown(m) for m in downstream.elements}
    missing = [m for m in source.elements if _as_shown(m) not in have]
    if missing:
        shown = ", ".join(repr(m) for m in missing[:5]) + (", ..." if len(missing) > 5 else "")
        return f"member(s) {shown} are missing downstream"
    return None


def _as_shown(label: str) -> str:
    """A member as MariaDB's information_schema shows it (4-byte characters as '?'),
    so a downstream read there compares equal to the source's true label."""
    return "".join("?" if ord(ch) > 0xFFFF else ch for ch in label)
