"""One table's column rules against one of its schemas: what is sent, masked, and refused.

    TableColumnRules + TableSchema ──► ColumnPlan
        out        the schema the sink sees: excluded columns gone, a hashed column
                   narrower than 64 characters declared CHAR(64) (the hash's length)
        image()    a row image as the sink gets it (binlog and snapshot rows alike)

Refused (``ColumnRuleError``, a configuration error: the changefeed fails and
says which table, column and rule):

* a key column excluded or masked: rows are written, updated and deleted
  downstream by their key (idempotent upserts by key, replays converge), and
  a unique key compared on masked values would make distinct rows collide
  (a redacted or truncated key merges them, a REPLACE then deletes one);
* a mask on a column that is not text (CHAR, VARCHAR, TEXT), or on a
  generated column (the downstream computes it from the unmasked columns);
* two masks on one column; a redact replacement longer than the column;
* at create (``strict``): a column a rule names literally (no wildcard) that
  the table does not have, as a typo would otherwise hide nothing;
* after a DDL (``before``, the plan of the schema before it): a masked or
  excluded column that disappears while a new column is sent unmasked (a
  rename would send the hidden values under the new name); a DDL that changes a
  hashed column to a text type shorter than the hash (the downstream follows
  the DDL); an excluded column that a DDL added or changed to NOT NULL
  without a default (the DDL reaches the downstream, which could then take no
  row without it). A DDL that drops a masked or excluded column is fine:
  nothing of it leaves any more.

An excluded column is not sent, masked or not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdc.errors import ConfigError
from cdc.filter.column_masks import HASH_LENGTH, mask_value
from cdc.filter.columns import (
    MASKS,
    SELECTORS,
    ColumnMask,
    MaskMethod,
    TableColumnRules,
    is_literal,
)
from cdc.model.events import RowChange
from cdc.model.schema import Column, TableSchema
from cdc.typeconv import TEXT_TYPES

__all__ = ["ColumnPlan", "ColumnRuleError", "plan_columns"]

_LENGTH = re.compile(r"\((\d+)\)")
_SIZED_TEXT = frozenset({"char", "varchar"})


class ColumnRuleError(ConfigError):
    """The column rules cannot apply to a table as it is (see the module docstring)."""


@dataclass(frozen=True)
class ColumnPlan:
    """What the sink gets of one table schema's rows (see the module docstring)."""

    source: TableSchema
    out: TableSchema
    dropped: frozenset[str]
    masks: Mapping[str, ColumnMask]

    def image(self, row: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """``row`` without its excluded columns, its masked ones masked."""
        if row is None:
            return None
        dropped, masks = self.dropped, self.masks
        out = {name: value for name, value in row.items() if name not in dropped}
        for name, mask in masks.items():
            if name in out:
                out[name] = mask_value(mask, out[name])
        return out

    def change(self, change: RowChange) -> RowChange:
        """``change`` as the sink gets it (its key is untouched: keys are never masked)."""
        return RowChange(
            change.table,
            change.op,
            self.image(change.before),
            self.image(change.after),
            change.key,
            change.position,
            change.txn_id,
            change.schema_version,
        )


def _length(column: Column) -> int | None:
    """The character length of a CHAR/VARCHAR column; None for TEXT types (long enough)."""
    if column.data_type not in _SIZED_TEXT:
        return None
    found = _LENGTH.search(column.column_type)
    return int(found.group(1)) if found else 1


def _hashed(column: Column) -> Column:
    """The downstream column a hash is written into: the column itself when it holds 64
    characters, else CHAR(64) with the column's character set and nullability."""
    length = _length(column)
    if length is None or length >= HASH_LENGTH:
        return column
    return replace(column, data_type="char", column_type=f"char({HASH_LENGTH})", default=None)


def plan_columns(
    rules: TableColumnRules,
    schema: TableSchema,
    *,
    strict: bool = False,
    before: ColumnPlan | None = None,
) -> ColumnPlan:
    """The plan of ``rules`` for ``schema``; ``ColumnRuleError`` when it is refused.

    ``strict``: at create, literal column names must exist. ``before``: the plan of
    the table's schema before a DDL, whose effects are checked (module docstring)."""
    table = schema.name
    names = schema.column_names
    if strict:
        _check_literals(rules, names)
    dropped = frozenset(n for n in names if not rules.selects(n))
    masks: dict[str, ColumnMask] = {}
    for name in names:
        found = rules.mask_of(name)
        if len(found) > 1:
            raise ColumnRuleError(
                MASKS,
                f"table {table}: column {name!r} is masked by {len(found)} masks "
                f"({', '.join(m.method.value for m in found)}); keep one",
            )
        if found and name not in dropped:
            masks[name] = found[0]
    _check_keys(schema, dropped, masks)
    columns = []
    for column in schema.columns:
        if column.name in dropped:
            continue
        mask = masks.get(column.name)
        if mask is not None:
            _check_maskable(schema, column, mask)
            column = _hashed(column) if mask.method is MaskMethod.HASH else column
        columns.append(column)
    out = replace(schema, columns=tuple(columns))
    plan = ColumnPlan(schema, out, dropped, masks)
    if before is not None:
        _check_ddl(before, plan)
    return plan


def _check_literals(rules: TableColumnRules, names: tuple[str, ...]) -> None:
    have = {n.lower() for n in names}
    named = [
        (SELECTORS, p) for p in rules.patterns or () if not p.startswith("!") and is_literal(p)
    ]
    named += [(MASKS, p) for m in rules.masks for p in m.columns if is_literal(p)]
    for field_, name in named:
        if name.lower() not in have:
            raise ColumnRuleError(
                field_,
                f"table {rules.table} has no column {name!r} (its columns: "
                f"{', '.join(names)}); fix the name, or use a wildcard pattern to allow a "
                "column that may be missing",
            )


def _check_keys(schema: TableSchema, dropped: frozenset[str], masks: Mapping[str, Any]) -> None:
    keys = {n for key in (schema.primary_key, *schema.unique_keys) for n in key}
    keys |= set(schema.key_columns)
    for name in sorted(keys):
        if name in dropped:
            what, field_ = "excluded", SELECTORS
        elif name in masks:
            what, field_ = "masked", MASKS
        else:
            continue
        raise ColumnRuleError(
            field_,
            f"table {schema.name}: key column {name!r} cannot be {what}: rows are written, "
            "updated and deleted downstream by their keys (idempotent writes by key), and "
            "masked key values could make distinct rows collide; leave it out of the rule",
        )


def _check_maskable(schema: TableSchema, column: Column, mask: ColumnMask) -> None:
    where = f"table {schema.name}: column {column.name!r} ({column.column_type})"
    if column.data_type not in TEXT_TYPES:
        raise ColumnRuleError(
            MASKS,
            f"{where} is not text (CHAR, VARCHAR, TEXT); only text columns can be masked. "
            "Leave it out of the mask, or exclude it with [[sink.column-selectors]]",
        )
    if column.generated:
        raise ColumnRuleError(
            MASKS,
            f"{where} is generated: the downstream computes it from the other columns, "
            "unmasked; mask the columns it is computed from, or exclude it",
        )
    length = _length(column)
    if mask.method is MaskMethod.REDACT and length is not None and length < len(mask.replacement):
        raise ColumnRuleError(
            f"{MASKS}.replacement",
            f"{where} holds {length} character(s), fewer than the replacement "
            f"{mask.replacement!r}; give a shorter replacement",
        )


def _check_ddl(before: ColumnPlan, after: ColumnPlan) -> None:
    table = after.source.name
    old = {c.name.lower(): c for c in before.source.columns}
    new = {c.name.lower(): c for c in after.source.columns}
    hidden = {n.lower() for n in before.dropped} | {n.lower() for n in before.masks}
    gone = sorted(hidden - set(new))
    masked_now = {n.lower() for n in after.masks}
    sent_plain = sorted(
        c.name
        for c in after.out.columns
        if c.name.lower() not in old and c.name.lower() not in masked_now
    )
    if gone and sent_plain:
        raise ColumnRuleError(
            SELECTORS,
            f"table {table}: a DDL removed masked or excluded column(s) {', '.join(gone)} and "
            f"added {', '.join(sent_plain)}, which would be sent unmasked (a rename would send "
            "the hidden values under the new name); add the new name to the rules, then "
            "resume the changefeed",
        )
    for name, mask in after.masks.items():
        was = old.get(name.lower())
        column = after.source.column(name)
        length = _length(column)
        if (
            mask.method is MaskMethod.HASH
            and was is not None
            and was != column
            and length is not None
            and length < HASH_LENGTH
        ):
            raise ColumnRuleError(
                MASKS,
                f"table {table}: a DDL changed hashed column {name!r} to {column.column_type}, "
                f"which the downstream follows and which cannot hold a {HASH_LENGTH}-character "
                "hash; widen it on the source (VARCHAR(64) or more) or mask it otherwise",
            )
    for name in sorted(after.dropped):
        column = after.source.column(name)
        was = old.get(name.lower())
        if was == column or column.nullable or column.default is not None or column.generated:
            continue
        raise ColumnRuleError(
            SELECTORS,
            f"table {table}: a DDL made excluded column {name!r} NOT NULL without a default; "
            "the DDL reached the downstream, which can take no row without a value for it. "
            "Give it a default or make it NULL on the source (and downstream), or send it",
        )
