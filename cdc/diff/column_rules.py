"""Comparing tables as a changefeed delivers them: its column selectors and masks.

A downstream written through a changefeed with ``[[sink.column-selectors]]``
and ``[[sink.column-masks]]`` lacks the excluded columns and holds masked
values. ``cdcctl diff --columns-from cf.toml`` reads those rules and compares
accordingly: excluded columns are left out on both sides (not reported as
missing downstream, nor as extra when a DDL added them there), and a masked
column is read on the source through the mask's SQL form
(``cdc.filter.column_masks.mask_sql``), which gives what the changefeed wrote.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from cdc.diff.errors import DiffInputError
from cdc.diff.schemas import CompareMode, TablePairing
from cdc.filter.column_masks import mask_sql
from cdc.filter.column_plan import ColumnRuleError, plan_columns
from cdc.filter.columns import ColumnRules

__all__ = ["apply_rules"]


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def apply_rules(pairing: TablePairing, rules: ColumnRules) -> TablePairing:
    """``pairing`` restricted and masked as ``rules`` deliver the table; itself when no
    rule applies to it. ``DiffInputError`` when the rules cannot apply to the table."""
    table_rules = rules.for_table(pairing.source.name)
    if table_rules is None:
        return pairing
    try:
        plan = plan_columns(table_rules, pairing.source)
    except ColumnRuleError as exc:
        raise DiffInputError(f"--columns-from: {exc}") from None
    dropped = {n.lower() for n in plan.dropped}
    kept = [i for i, c in enumerate(pairing.source_columns) if c.name.lower() not in dropped]
    source_columns = tuple(pairing.source_columns[i] for i in kept)
    target_columns = tuple(pairing.target_columns[i] for i in kept)
    position = {c.name.lower(): i for i, c in enumerate(source_columns)}
    key = pairing.key
    if pairing.mode is CompareMode.KEYED:
        key = tuple(position[n.lower()] for n in pairing.source.key_columns)
    return replace(
        pairing,
        source_columns=source_columns,
        target_columns=target_columns,
        missing_in_target=tuple(n for n in pairing.missing_in_target if n.lower() not in dropped),
        extra_in_target=tuple(n for n in pairing.extra_in_target if table_rules.selects(n)),
        type_differences=tuple(
            d for d in pairing.type_differences if d.column.lower() not in dropped
        ),
        key=key,
        source_sql=MappingProxyType(
            {name: mask_sql(mask, _quote(name)) for name, mask in plan.masks.items()}
        ),
    )
