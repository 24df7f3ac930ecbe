"""What a consistency check found: per table, per differing row; JSON-ready for cdcctl.

A :class:`DiffReport` is equal when every table is. A table differs when it
exists on one side only, when a column exists on one side only, or when a row
differs. Each differing row is a :class:`RowDiff`: its key, its kind
(``missing-in-target``, ``extra-in-target``, ``different``) and, for
``different``, the columns whose values differ. Rows carry their full
canonical values (:mod:`cdc.typeconv`), which :mod:`cdc.diff.fixsql` writes
back; ``to_dict`` shows only what a reader needs, long values shortened.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from cdc.diff.schemas import ColumnTypeDifference, CompareMode, TablePairing
from cdc.model.schema import TableName
from cdc.typeconv import time_literal

__all__ = ["DiffKind", "DiffReport", "RowDiff", "TableReport", "TableStatus", "display_value"]

#: Longest text (characters) or binary value (bytes) shown in full in a report.
DISPLAY_LIMIT = 200


class DiffKind(enum.Enum):
    """How one row differs."""

    MISSING_IN_TARGET = "missing-in-target"  # on the source only
    EXTRA_IN_TARGET = "extra-in-target"  # on the target only
    DIFFERENT = "different"  # on both, some values differ


class TableStatus(enum.Enum):
    """The verdict on one table."""

    EQUAL = "equal"
    DIFFERENT = "different"
    MISSING_IN_TARGET = "missing-in-target"  # the table is on the source only
    EXTRA_IN_TARGET = "extra-in-target"  # the table is on the target only


def display_value(value: Any) -> Any:
    """A canonical value as JSON shows it: bytes as ``0x..`` hex, temporal values as
    their SQL text, DECIMAL as text (exact), long values shortened."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        if len(value) > DISPLAY_LIMIT:
            return f"{value[:DISPLAY_LIMIT]}... ({len(value)} characters)"
        return value
    if isinstance(value, bytes):
        shown = "0x" + value[:DISPLAY_LIMIT].hex()
        return shown if len(value) <= DISPLAY_LIMIT else f"{shown}... ({len(value)} bytes)"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return time_literal(value)
    if isinstance(value, frozenset):
        return sorted(value)
    return str(value)


def _named(names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
    return {name: display_value(value) for name, value in zip(names, values, strict=True)}


@dataclass(frozen=True)
class RowDiff:
    """One differing row of a table.

    ``source`` / ``target`` are the row's canonical values on each side, in
    the table's compared-column order (None where the row is absent).
    ``key`` is the row's key values (the source's where the row is there),
    None for a table compared whole. ``columns`` names the differing columns
    of a ``different`` row.
    """

    kind: DiffKind
    key: tuple[Any, ...] | None
    source: tuple[Any, ...] | None
    target: tuple[Any, ...] | None
    columns: tuple[str, ...] = ()

    def to_dict(self, column_names: Sequence[str], key_names: Sequence[str]) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind.value}
        if self.key is None:
            row = self.source if self.source is not None else self.target
            data["row"] = _named(column_names, row or ())
            return data
        data["key"] = _named(key_names, self.key)
        if self.kind is DiffKind.DIFFERENT:
            assert self.source is not None and self.target is not None
            where = [column_names.index(name) for name in self.columns]
            data["columns"] = list(self.columns)
            data["source"] = {column_names[i]: display_value(self.source[i]) for i in where}
            data["target"] = {column_names[i]: display_value(self.target[i]) for i in where}
        return data


@dataclass(frozen=True)
class TableReport:
    """The result for one table; ``pairing`` (both definitions) is None when one side lacks it."""

    table: TableName
    status: TableStatus
    pairing: TablePairing | None = field(default=None, repr=False, compare=False)
    chunks: int = 0
    chunks_different: int = 0
    rows_source: int = 0
    rows_target: int = 0
    rows: tuple[RowDiff, ...] = ()
    note: str = ""

    @property
    def equal(self) -> bool:
        return self.status is TableStatus.EQUAL

    @property
    def mode(self) -> CompareMode | None:
        return None if self.pairing is None else self.pairing.mode

    @property
    def missing_columns(self) -> tuple[str, ...]:
        return () if self.pairing is None else self.pairing.missing_in_target

    @property
    def extra_columns(self) -> tuple[str, ...]:
        return () if self.pairing is None else self.pairing.extra_in_target

    @property
    def type_differences(self) -> tuple[ColumnTypeDifference, ...]:
        return () if self.pairing is None else self.pairing.type_differences

    def count(self, kind: DiffKind) -> int:
        return sum(1 for row in self.rows if row.kind is kind)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"table": str(self.table), "status": self.status.value}
        if self.pairing is None:
            if self.note:
                data["note"] = self.note
            return data
        pairing = self.pairing
        data.update(
            {
                "mode": pairing.mode.value,
                "key": list(pairing.key_names),
                "rows_source": self.rows_source,
                "rows_target": self.rows_target,
                "chunks": self.chunks,
                "chunks_equal": self.chunks - self.chunks_different,
                "chunks_different": self.chunks_different,
                "rows_missing_in_target": self.count(DiffKind.MISSING_IN_TARGET),
                "rows_extra_in_target": self.count(DiffKind.EXTRA_IN_TARGET),
                "rows_different": self.count(DiffKind.DIFFERENT),
            }
        )
        if pairing.missing_in_target:
            data["columns_missing_in_target"] = list(pairing.missing_in_target)
        if pairing.extra_in_target:
            data["columns_extra_in_target"] = list(pairing.extra_in_target)
        if pairing.type_differences:
            data["column_type_differences"] = [
                {"column": d.column, "source": d.source_type, "target": d.target_type}
                for d in pairing.type_differences
            ]
        if self.note:
            data["note"] = self.note
        names, keys = pairing.column_names, pairing.key_names
        data["differences"] = [row.to_dict(names, keys) for row in self.rows]
        return data


@dataclass(frozen=True)
class DiffReport:
    """Everything one check found; ``source`` and ``target`` are masked URIs."""

    source: str
    target: str
    rules: tuple[str, ...]
    chunk_size: int
    threads: int
    tables: tuple[TableReport, ...]
    elapsed_seconds: float = 0.0

    @property
    def equal(self) -> bool:
        """True when every table is on both sides with the same columns and rows."""
        return all(t.equal for t in self.tables)

    def summary(self) -> dict[str, Any]:
        return {
            "tables": len(self.tables),
            "tables_equal": sum(1 for t in self.tables if t.equal),
            "tables_different": sum(1 for t in self.tables if not t.equal),
            "rows_checked": sum(t.rows_source for t in self.tables),
            "chunks": sum(t.chunks for t in self.tables),
            "chunks_different": sum(t.chunks_different for t in self.tables),
            "rows_different": sum(len(t.rows) for t in self.tables),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "source": self.source,
            "target": self.target,
            "filter": list(self.rules),
            "chunk_size": self.chunk_size,
            "threads": self.threads,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "summary": self.summary(),
            "tables": [t.to_dict() for t in self.tables],
        }
