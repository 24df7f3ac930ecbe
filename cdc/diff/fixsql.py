"""SQL that makes the target equal to the source, from a :class:`DiffReport`.

Per differing table, in this order::

    DELETE FROM t WHERE <key> = <target key>;                 extra-in-target
    REPLACE INTO t (<columns>) VALUES (<source values>);     missing-in-target, different

and for a table compared whole (no usable key), by the whole row::

    DELETE FROM t WHERE c1 <=> v1 AND c2 <=> v2 ... LIMIT 1;  one per surplus copy
    INSERT INTO t (<columns>) VALUES (<source values>);      one per missing copy

Deletes come first, so a replaced row is never deleted afterwards. Only the
columns both sides have are written; generated columns never (the server
computes them). Tables or columns missing on one side cannot be fixed by row
statements and get a comment saying so.

Values are rendered as literals that need no escaping rules of the session
(``NO_BACKSLASH_ESCAPES`` or not): numbers as digits, text that is printable
ASCII without quotes or backslashes in quotes, any other text as
``_utf8mb4 X'..'``, bytes as ``X'..'``, temporal values as quoted SQL text
(``cdc.typeconv.to_sql_param``). The file header sets the session the way the
SQL sink does (UTC time zone, zero dates allowed) and turns foreign key checks
off, since ``REPLACE`` deletes before it inserts and would otherwise cascade.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc.diff.report import DiffKind, DiffReport, RowDiff, TableReport, TableStatus
from cdc.diff.schemas import CompareMode
from cdc.model.schema import Column
from cdc.typeconv import SINK_SESSION_SQL, Converter, identity, sql_param_converter, time_literal

__all__ = ["fix_statements", "sql_literal", "write_fix_sql"]

_SAFE_TEXT = frozenset(chr(c) for c in range(0x20, 0x7F)) - {"'", "\\"}


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def sql_literal(value: Any) -> str:
    """``value`` (a PyMySQL parameter as ``to_sql_param`` makes it) as an SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} cannot be written to MySQL")
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, str):
        if all(ch in _SAFE_TEXT for ch in value):
            return f"'{value}'"
        return f"_utf8mb4 X'{value.encode('utf-8').hex().upper()}'"
    if isinstance(value, bytes | bytearray):
        return f"X'{bytes(value).hex().upper()}'"
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise ValueError(f"cannot write the aware datetime {value!r}; convert it first")
        return f"'{value.isoformat(sep=' ')}'"
    if isinstance(value, date):
        return f"'{value.isoformat()}'"
    if isinstance(value, timedelta):
        return f"'{time_literal(value)}'"
    raise TypeError(f"cannot write a {type(value).__name__} as SQL: {value!r}")


def _param_converter(column: Column) -> Converter:
    try:
        return sql_param_converter(column)
    except ValueError:  # a type typeconv does not know: the value as the server gave it
        return identity


class _TableWriter:
    """Statements for one table, values rendered with each side's own column types."""

    def __init__(self, report: TableReport) -> None:
        assert report.pairing is not None
        pairing = report.pairing
        self.report = report
        self.name = report.table.quoted()
        self.source_convert = [_param_converter(c) for c in pairing.source_columns]
        self.target_convert = [_param_converter(c) for c in pairing.target_columns]
        self.names = [_quote(c.name) for c in pairing.target_columns]
        self.writable = [i for i, c in enumerate(pairing.target_columns) if not c.generated]
        self.key = pairing.key

    def _values(self, row: Sequence[Any], convert: Sequence[Converter]) -> list[str]:
        return [sql_literal(convert[i](value)) for i, value in enumerate(row)]

    def insert(self, verb: str, row: Sequence[Any]) -> str:
        values = self._values(row, self.source_convert)
        columns = ", ".join(self.names[i] for i in self.writable)
        literals = ", ".join(values[i] for i in self.writable)
        return f"{verb} INTO {self.name} ({columns}) VALUES ({literals});"

    def delete_by_key(self, row: Sequence[Any]) -> str:
        values = self._values(row, self.target_convert)
        where = " AND ".join(f"{self.names[i]} = {values[i]}" for i in self.key)
        return f"DELETE FROM {self.name} WHERE {where};"

    def delete_whole(self, row: Sequence[Any]) -> str:
        values = self._values(row, self.target_convert)
        where = " AND ".join(f"{self.names[i]} <=> {values[i]}" for i in self.writable)
        return f"DELETE FROM {self.name} WHERE {where} LIMIT 1;"


def _comments(report: TableReport) -> Iterator[str]:
    table = report.table
    if report.status is TableStatus.MISSING_IN_TARGET:
        yield f"-- {table}: missing on the target; create it there (and copy its rows) first"
        return
    if report.status is TableStatus.EXTRA_IN_TARGET:
        yield f"-- {table}: exists on the target only; drop it by hand if it should not be there"
        return
    if report.missing_columns:
        yield (
            f"-- {table}: column(s) {', '.join(report.missing_columns)} missing on the target; "
            "add them, then check again (the statements below write the other columns)"
        )
    if report.extra_columns:
        yield (
            f"-- {table}: column(s) {', '.join(report.extra_columns)} exist on the target only "
            "(left as they are)"
        )


def _table_statements(report: TableReport) -> Iterator[str]:
    yield from _comments(report)
    if report.pairing is None or not report.rows:
        return
    writer = _TableWriter(report)
    whole = report.pairing.mode is CompareMode.WHOLE
    yield f"-- {report.table}: {len(report.rows)} differing row(s)"
    extra = [r for r in report.rows if r.kind is DiffKind.EXTRA_IN_TARGET]
    wanted = [r for r in report.rows if r.kind is not DiffKind.EXTRA_IN_TARGET]
    for row in extra:
        assert row.target is not None
        yield writer.delete_whole(row.target) if whole else writer.delete_by_key(row.target)
    for row in wanted:
        yield _write(writer, row, whole)


def _write(writer: _TableWriter, row: RowDiff, whole: bool) -> str:
    assert row.source is not None
    return writer.insert("INSERT" if whole else "REPLACE", row.source)


def fix_statements(report: DiffReport) -> Iterator[str]:
    """The lines of the fix file: a header setting up the session, then per differing
    table its comments and statements (nothing for equal tables)."""
    yield f"-- cdcctl diff: statements that make {report.target} equal to {report.source}"
    yield "-- apply them to the target, then run cdcctl diff again"
    yield "SET NAMES utf8mb4;"
    for statement in SINK_SESSION_SQL:
        yield f"{statement};"
    yield "SET SESSION foreign_key_checks = 0;"
    for table in report.tables:
        if not table.equal:
            yield from _table_statements(table)


def write_fix_sql(report: DiffReport, path: str | Path) -> int:
    """Writes :func:`fix_statements` to ``path`` (replacing it); returns the number of
    row statements (0: nothing to fix by rows)."""
    count = 0
    target = Path(path)
    with target.open("w", encoding="utf-8") as out:
        for line in fix_statements(report):
            out.write(line + "\n")
            if not line.startswith(("--", "SET ")):
                count += 1
    return count
