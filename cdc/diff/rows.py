"""Narrowing a chunk whose checksums differ down to the rows that differ.

Both sides' rows of the chunk are fetched (same key range, same consistent
snapshot as the checksum) and converted to canonical values
(:mod:`cdc.typeconv`, the snapshot's own SELECT path), then matched:

    keyed table                                   table compared whole
      1. match rows whose key values are equal      rows as a multiset (Counter):
      2. leftover text keys: match the ones the       surplus on the source ->
         column's collation calls equal ('a' vs         missing-in-target,
         'A', 'a' vs 'a ' in PAD SPACE) by asking       surplus on the target ->
         the source server (CollationKeyMatcher)        extra-in-target
      3. matched, values differ  -> different (the columns named)
         source only             -> missing-in-target
         target only             -> extra-in-target

Step 2 matters because such keys name the same row for the target's unique
index: ``REPLACE`` of the source row replaces the target's, so the row is
``different`` (its key column differs), not one missing and one extra.
Values are compared exactly: ``'a'`` and ``'a '`` differ, NULL and ``''``
differ, a float differs in its last bit.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from cdc.diff.report import DiffKind, RowDiff
from cdc.model.schema import Column, TableName
from cdc.typeconv import TEXT_TYPES, Converter, converter_for, identity, select_expression

__all__ = [
    "WEIGHT_BATCH",
    "CollationKeyMatcher",
    "KeyMatcher",
    "compare_keyed",
    "compare_whole",
    "fetch_rows",
    "select_rows_sql",
]

#: Values asked of the server in one statement when matching keys by collation.
WEIGHT_BATCH = 400

_NAME = re.compile(r"[A-Za-z0-9_]+")

Row = tuple[Any, ...]
Key = tuple[Any, ...]
KeyMatcher = Callable[[Sequence[Key], Sequence[Key]], dict[Key, Key]]
"""``(source-only keys, target-only keys) -> {source key: target key}`` for keys the
server considers equal although their values differ."""


def _quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def _select_item(column: Column, exprs: Mapping[str, str] | None = None) -> str:
    expr = (exprs or {}).get(column.name)
    if expr is not None:  # a mask: its text, as the sink wrote it
        return f"{expr} AS {_quote(column.name)}"
    try:
        return select_expression(column)
    except ValueError:  # a type typeconv does not know (MariaDB's UUID): as the server gives it
        return _quote(column.name)


def _converter(column: Column) -> Converter:
    try:
        return converter_for(column, "select")
    except ValueError:
        return identity


def select_rows_sql(
    table: TableName,
    columns: Sequence[Column],
    where: str,
    order: Sequence[int],
    exprs: Mapping[str, str] | None = None,
) -> str:
    """``SELECT`` of ``columns`` (exact forms, FLOAT as DOUBLE) over ``where``, ordered by
    the columns at positions ``order``; ``where`` is a PyMySQL template as in
    :func:`cdc.diff.checksum.checksum_sql`."""
    items = ", ".join(_select_item(c, exprs) for c in columns)
    head = f"SELECT {items} FROM {table.quoted()}".replace("%", "%%")
    ordering = ", ".join(str(i + 1) for i in order)
    return f"{head} WHERE {where}" + (f" ORDER BY {ordering}" if ordering else "")


def fetch_rows(
    conn: Any,
    table: TableName,
    columns: Sequence[Column],
    where: str,
    params: tuple[Any, ...] = (),
    order: Sequence[int] = (),
    exprs: Mapping[str, str] | None = None,
) -> list[Row]:
    """The rows over ``where`` as tuples of canonical values, in ``columns`` order.

    ``conn`` must be opened with ``typeconv.snapshot_connect_kwargs()``.
    """
    converters = [_converter(c) for c in columns]
    work = [(i, f) for i, f in enumerate(converters) if f is not identity]
    with conn.cursor() as cur:
        cur.execute(select_rows_sql(table, columns, where, order, exprs), tuple(params))
        raw = cur.fetchall()
    if not work:
        return [tuple(r) for r in raw]
    rows = []
    for r in raw:
        values = list(r)
        for i, convert in work:
            values[i] = convert(values[i])
        rows.append(tuple(values))
    return rows


def _differing(names: Sequence[str], source: Row, target: Row) -> tuple[str, ...]:
    return tuple(name for name, a, b in zip(names, source, target, strict=True) if a != b)


def compare_keyed(
    source: Iterable[Row],
    target: Iterable[Row],
    names: Sequence[str],
    key: Sequence[int],
    match_keys: KeyMatcher | None = None,
) -> list[RowDiff]:
    """The differing rows of one chunk of a keyed table (see the module doc).

    ``names`` are the compared columns, ``key`` the positions of the key
    columns. Rows come back in source order, extra target rows after them
    in target order. ``match_keys`` pairs leftover keys the server calls equal;
    without it only equal values match.
    """
    source_rows = {tuple(row[i] for i in key): row for row in source}
    target_rows = {tuple(row[i] for i in key): row for row in target}
    source_only = [k for k in source_rows if k not in target_rows]
    target_only = [k for k in target_rows if k not in source_rows]
    paired: dict[Key, Key] = {}
    if match_keys is not None and source_only and target_only:
        paired = match_keys(source_only, target_only)
    taken = set(paired.values())
    diffs: list[RowDiff] = []
    for k, row in source_rows.items():
        other_key = k if k in target_rows else paired.get(k)
        if other_key is None:
            diffs.append(RowDiff(DiffKind.MISSING_IN_TARGET, k, row, None))
            continue
        other = target_rows[other_key]
        columns = _differing(names, row, other)
        if columns:
            diffs.append(RowDiff(DiffKind.DIFFERENT, k, row, other, columns))
    for k in target_only:
        if k not in taken:
            diffs.append(RowDiff(DiffKind.EXTRA_IN_TARGET, k, None, target_rows[k]))
    return diffs


def compare_whole(source: Iterable[Row], target: Iterable[Row]) -> list[RowDiff]:
    """The differing rows of a table compared as a multiset of whole rows.

    A row the source holds twice and the target once is one ``missing-in-target``.
    """
    source_list, target_list = list(source), list(target)
    source_counts, target_counts = Counter(source_list), Counter(target_list)
    diffs: list[RowDiff] = []
    for row in dict.fromkeys(source_list):
        for _ in range(source_counts[row] - target_counts[row]):
            diffs.append(RowDiff(DiffKind.MISSING_IN_TARGET, None, row, None))
    for row in dict.fromkeys(target_list):
        for _ in range(target_counts[row] - source_counts[row]):
            diffs.append(RowDiff(DiffKind.EXTRA_IN_TARGET, None, None, row))
    return diffs


class CollationKeyMatcher:
    """Pairs leftover keys whose text parts the key columns' collations call equal.

    Asks the server (a connection to the source, whose collations define the
    keys): first ``WEIGHT_STRING`` of each text value with trailing spaces
    cut, which groups candidates in one pass; then ``STRCMP`` on each
    candidate pair, which is the collation's own verdict (it tells PAD SPACE
    from NO PAD). Non-text key parts must be equal values.
    """

    def __init__(self, conn: Any, key_columns: Sequence[Column]) -> None:
        self._conn = conn
        self._collate: dict[int, str] = {
            i: f"CONVERT(%s USING {c.charset}) COLLATE {c.collation}"
            for i, c in enumerate(key_columns)
            if c.data_type in TEXT_TYPES
            and _NAME.fullmatch(c.charset or "")
            and _NAME.fullmatch(c.collation or "")
        }

    @property
    def useful(self) -> bool:
        """Whether the key has a text part, without which exact matching is all there is."""
        return bool(self._collate)

    def _select(self, items: list[tuple[str, list[Any]]]) -> list[Any]:
        """``SELECT item1, item2, ...`` in batches; each item an SQL text and its params."""
        answers: list[Any] = []
        for start in range(0, len(items), WEIGHT_BATCH):
            batch = items[start : start + WEIGHT_BATCH]
            sql = "SELECT " + ", ".join(text for text, _ in batch)
            with self._conn.cursor() as cur:
                cur.execute(sql, [value for _, params in batch for value in params])
                answers.extend(cur.fetchone())
        return answers

    def _weights(self, keys: Sequence[Key]) -> dict[tuple[int, str], Any]:
        wanted = sorted({(i, k[i]) for k in keys for i in self._collate if isinstance(k[i], str)})
        items = [
            (
                "WEIGHT_STRING("
                + self._collate[i].replace("%s", "TRIM(TRAILING ' ' FROM %s)")
                + ")",
                [value],
            )
            for i, value in wanted
        ]
        return dict(zip(wanted, self._select(items), strict=True))

    def _group(self, k: Key, weights: dict[tuple[int, str], Any]) -> Key:
        return tuple(weights.get((i, v), v) if i in self._collate else v for i, v in enumerate(k))

    def _equal_item(self, s: Key, t: Key) -> tuple[str, list[Any]]:
        tests, params = [], []
        for i, collate in self._collate.items():
            if isinstance(s[i], str) and isinstance(t[i], str):
                tests.append(f"STRCMP({collate}, {collate}) = 0")
                params += [s[i], t[i]]
        return "(" + (" AND ".join(tests) or "1") + ")", params

    def __call__(self, source_only: Sequence[Key], target_only: Sequence[Key]) -> dict[Key, Key]:
        if not self._collate:
            return {}
        weights = self._weights([*source_only, *target_only])
        groups: dict[Key, list[Key]] = {}
        for k in target_only:
            groups.setdefault(self._group(k, weights), []).append(k)
        candidates = [(s, t) for s in source_only for t in groups.get(self._group(s, weights), ())]
        verdicts = self._select([self._equal_item(s, t) for s, t in candidates])
        paired: dict[Key, Key] = {}
        taken: set[Key] = set()
        for (s, t), equal in zip(candidates, verdicts, strict=True):
            if equal and s not in paired and t not in taken:
                paired[s] = t
                taken.add(t)
        return paired
