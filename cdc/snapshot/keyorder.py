"""Ordering chunk-key values as the server orders them.

Numbers, bytes and temporal values order in Python exactly as in MySQL once
they are canonical (``cdc.typeconv``): bytes compare byte by byte like
binary collations, dates by their parts (so the zero date ``RawDate(0, 0, 0)``
sorts first, as the server sorts it), TIME by its signed length.

Text does not: its order is the column's collation (``'a' = 'A'``, ``'e' =
'é'``, trailing spaces ignored in PAD SPACE collations), which Python cannot
reproduce. :class:`ServerTextOrder` asks the server instead, with
``STRCMP`` in the column's charset and collation, batching the questions
(:meth:`ServerTextOrder.prefetch`) and remembering the answers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cdc.model.schema import Column
from cdc.snapshot.errors import SnapshotError
from cdc.typeconv import RawDate, RawDateTime

__all__ = ["PREFETCH_BATCH", "ServerTextOrder", "python_compare", "sort_key"]

#: Comparisons asked of the server in one statement.
PREFETCH_BATCH = 400
_NAME = re.compile(r"[A-Za-z0-9_]+")


def sort_key(value: Any) -> Any:
    """A Python value that orders like ``value`` does in MySQL (not for text)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return (
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    if isinstance(value, date):
        return (value.year, value.month, value.day)
    if isinstance(value, RawDateTime):
        return (
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
        )
    if isinstance(value, RawDate):
        return (value.year, value.month, value.day)
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    return value


def python_compare(a: Any, b: Any) -> int:
    """-1, 0 or 1 as ``a`` sorts before, with or after ``b`` on the server.

    Refuses text: its order is the collation's (see :class:`ServerTextOrder`).
    """
    if isinstance(a, str) or isinstance(b, str):
        raise TypeError(
            f"cannot order text {a!r} and {b!r} in Python: text sorts by the column's "
            "collation; compare with ServerTextOrder(conn, column).compare"
        )
    left, right = sort_key(a), sort_key(b)
    try:
        return (left > right) - (left < right)
    except TypeError:
        raise TypeError(
            f"cannot order {a!r} ({type(a).__name__}) and {b!r} ({type(b).__name__}): "
            "values of one chunk-key column must share a type"
        ) from None


class ServerTextOrder:
    """Orders strings in a text column's collation by asking the server.

    ``conn`` is a PyMySQL connection used between other statements (never
    while an unbuffered result is open on it), open as long as the order is
    asked (a hand-off asks while its binlog runs). Answers are cached per pair.
    """

    def __init__(self, conn: Any, column: Column) -> None:
        charset, collation = column.charset, column.collation
        if not (charset and collation and _NAME.fullmatch(charset) and _NAME.fullmatch(collation)):
            raise SnapshotError(
                f"column {column.name!r} ({column.column_type}) has no usable charset/collation "
                f"({charset!r}/{collation!r}); text chunk keys need both"
            )
        self._conn = conn
        self._expr = f"CONVERT(%s USING {charset}) COLLATE {collation}"
        self._cache: dict[tuple[str, str], int] = {}
        self.queries = 0

    def compare(self, a: Any, b: Any) -> int:
        """-1, 0 or 1 as ``a`` sorts before, with or after ``b`` in the collation."""
        if not isinstance(a, str) or not isinstance(b, str):
            return python_compare(a, b)
        pair = (a, b)
        if pair not in self._cache:
            self._ask([pair])
        return self._cache[pair]

    def prefetch(self, values: Iterable[Any], bounds: Iterable[Any]) -> None:
        """Asks, in few statements, how every text value compares to every text bound."""
        texts = {v for v in values if isinstance(v, str)}
        limits = {b for b in bounds if isinstance(b, str)}
        pairs = [(v, b) for v in texts for b in limits if (v, b) not in self._cache]
        for start in range(0, len(pairs), PREFETCH_BATCH):
            self._ask(pairs[start : start + PREFETCH_BATCH])

    def _ask(self, pairs: list[tuple[str, str]]) -> None:
        expr = self._expr
        items = ", ".join(f"STRCMP({expr}, {expr})" for _ in pairs)
        params = [text for pair in pairs for text in pair]
        with self._conn.cursor() as cur:
            cur.execute(f"SELECT {items}", params)
            answers = cur.fetchone()
        self.queries += 1
        for pair, answer in zip(pairs, answers, strict=True):
            if answer is None:
                raise SnapshotError(
                    f"the server cannot compare {pair[0]!r} and {pair[1]!r} in {expr!r}"
                )
            self._cache[pair] = int(answer)
