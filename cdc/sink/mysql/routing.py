"""Which lane a row change goes down, and when two keys may name the same downstream row.

A lane is chosen by hashing ``(table, key)``, so all changes of one row go down
one lane and keep their order. Two subtleties:

* Text keys compare under the column's collation downstream: ``'a'``, ``'A'``
  and ``'a '`` are one row in a ``_ci`` column. Keys are therefore hashed in a
  folded form, so spellings of one row meet in one lane: by the collation's own
  weights where they are known, else left out of the hash (``keyfold.py``).
  :func:`fold_text` (case folded, accents and trailing spaces dropped) folds
  binary collations' keys for lanes, and every key for grouping statements
  (``statements.plan``). Folding may merge keys that differ downstream; that
  only costs parallelism, never order.
* A table with a unique key besides the row key goes down one lane as a whole
  (the caller passes ``key=None``): two rows can then collide on that other
  key, and only one ordered stream of ``REPLACE`` s resolves such collisions
  correctly (see ``statements.py``).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from cdc.model.schema import TableName

__all__ = ["fold_key", "fold_text", "lane_for"]


def fold_text(text: str) -> str:
    """``text`` with case, accents, compatibility forms and trailing spaces folded away."""
    if text.isascii():
        return text.lower().rstrip(" ")
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c)).rstrip(" ")


def fold_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """``key`` with its text parts folded (:func:`fold_text`); other values unchanged."""
    for value in key:
        if isinstance(value, str):
            return tuple(fold_text(v) if isinstance(v, str) else v for v in key)
    return key


def lane_for(table: TableName, folded_key: tuple[Any, ...] | None, lanes: int) -> int:
    """The lane (0..lanes-1) of a change; ``folded_key=None`` routes by table alone.

    Stable within one process only (Python salts ``str`` hashes per process),
    which is all lanes need: a restarted sink replays from a checkpoint at
    which every lane had drained.
    """
    if lanes == 1:
        return 0
    if folded_key is None:
        return hash(table) % lanes
    return hash((table, folded_key)) % lanes
