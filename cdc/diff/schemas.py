"""How a table's two definitions line up: which columns are compared, and how rows are matched.

* Columns are matched by name, case-insensitively as MySQL does, and compared
  in the source's order. A column only one side has is a difference of the
  table; the rest are still compared.
* A column whose type text differs (``int`` vs ``bigint``) is noted, not
  counted as a difference: the values decide. Integer display widths
  (``int(11)`` on MariaDB, ``int`` on MySQL 8) are not a difference.
* Rows are matched by the source's key (primary key, else the first unique
  key on NOT NULL columns) when the target has all its columns; otherwise the
  table is compared whole, its rows as a multiset.
* ``source_sql``: columns read through an SQL expression on the source side
  (a changefeed's masks, ``cdc.diff.column_rules``), so the source is compared
  as the changefeed delivers it.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cdc.model.schema import Column, TableSchema
from cdc.typeconv import INTEGER_TYPES

__all__ = ["ColumnTypeDifference", "CompareMode", "TablePairing", "pair_tables"]

_DISPLAY_WIDTH = re.compile(r"^(\w+)\(\d+\)")


class CompareMode(enum.Enum):
    """How the rows of a table are matched between the sides."""

    KEYED = "keyed"  # chunked by the key, rows matched by key
    WHOLE = "whole"  # one chunk, rows compared as a multiset (no usable key)


@dataclass(frozen=True)
class ColumnTypeDifference:
    """A column both sides have, defined differently."""

    column: str
    source_type: str
    target_type: str


@dataclass(frozen=True)
class TablePairing:
    """The columns of one table as both sides define them, ready for comparison.

    ``source_columns[i]`` and ``target_columns[i]`` are the same column;
    ``key`` holds positions in those tuples (empty in WHOLE mode). No common
    column at all leaves nothing to compare but the column lists.
    """

    source: TableSchema
    target: TableSchema
    source_columns: tuple[Column, ...]
    target_columns: tuple[Column, ...]
    missing_in_target: tuple[str, ...]
    extra_in_target: tuple[str, ...]
    type_differences: tuple[ColumnTypeDifference, ...]
    mode: CompareMode
    key: tuple[int, ...]
    source_sql: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.source_columns)

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(self.source_columns[i].name for i in self.key)

    @property
    def columns_differ(self) -> bool:
        return bool(self.missing_in_target or self.extra_in_target)


def _normal_type(column: Column) -> str:
    text = " ".join(column.column_type.lower().split())
    if column.data_type in INTEGER_TYPES:
        text = _DISPLAY_WIDTH.sub(r"\1", text)
    return text


def pair_tables(source: TableSchema, target: TableSchema) -> TablePairing:
    """Lines up ``source`` and ``target`` (the same table on both sides)."""
    by_name = {c.name.lower(): c for c in target.columns}
    source_names = {c.name.lower() for c in source.columns}
    pairs = [(c, by_name[c.name.lower()]) for c in source.columns if c.name.lower() in by_name]
    missing = tuple(c.name for c in source.columns if c.name.lower() not in by_name)
    extra = tuple(c.name for c in target.columns if c.name.lower() not in source_names)
    types = tuple(
        ColumnTypeDifference(s.name, s.column_type, t.column_type)
        for s, t in pairs
        if _normal_type(s) != _normal_type(t)
    )
    position = {s.name.lower(): i for i, (s, _) in enumerate(pairs)}
    key_names = source.key_columns
    if pairs and key_names and all(name.lower() in position for name in key_names):
        mode, key = CompareMode.KEYED, tuple(position[name.lower()] for name in key_names)
    else:
        mode, key = CompareMode.WHOLE, ()
    return TablePairing(
        source=source,
        target=target,
        source_columns=tuple(s for s, _ in pairs),
        target_columns=tuple(t for _, t in pairs),
        missing_in_target=missing,
        extra_in_target=extra,
        type_differences=types,
        mode=mode,
        key=key,
    )
