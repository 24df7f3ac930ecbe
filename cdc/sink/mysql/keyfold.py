"""Lane keys for text key columns: spellings the downstream's collation calls one row meet.

Lanes write in parallel, so every change of one downstream row must go down one
lane. A text key compares under its column's collation there, and an UPDATE
that changes a key's spelling only (``'sa'`` to ``'ßa'``, one row in
``utf8mb4_general_ci``, where ``'ß' = 's'``) becomes ``DELETE 'sa'`` and
``REPLACE 'ßa'``: on two lanes the REPLACE may run first, replace the row, and
the DELETE then remove it. The row is lost. Case, accents and trailing spaces
(``routing.fold_text``) are only part of what collations equate: ``'ß' = 's'``
(general_ci), ``'I' = 'Y'`` (lithuanian_ci), ``'\\0'`` ignored (unicode_ci),
``'aa' = 'å'`` (danish_ci). So a text key part is folded by its collation:

* binary strings and ``*_bin`` collations: ``fold_text``, which only merges
  more than the collation does (equality there is the bytes', trailing spaces
  aside);
* the ``general`` collations of utf8mb3 and utf8mb4: one weight per character,
  with no expansions, contractions or ignorable characters, so a string's
  weight string is its characters' weights in a row (the tests check this
  against the server). The weights of the whole Basic Multilingual Plane are
  read from the downstream in one ``WEIGHT_STRING`` when a key of that
  collation is first met (beyond it, every character weighs what the server
  says one of them does: U+FFFD's weight in utf8mb4_general_ci), and a key is
  folded to its weights less trailing spaces: exact;
* any other collation (the UCA ones, the 8-bit charsets' own, MySQL 8's
  ``utf8mb4_0900_ai_ci``, an unknown one): no fold is known to be safe. The part
  is left out of the lane key, so keys that differ only there share a lane: a
  table keyed by one such column goes down one lane, in order.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from cdc.model.schema import Column
from cdc.schema.columns import canonical_collation
from cdc.sink.base import SinkError
from cdc.sink.mysql.routing import fold_text

__all__ = ["KeyFolds", "PartFold", "WeightQuery"]

#: A text key part's fold for lanes, or None: the part cannot be folded safely.
PartFold = Callable[[str], str] | None
#: Runs ``SELECT WEIGHT_STRING(...)`` on the downstream: (sql, args) -> the row.
WeightQuery = Callable[[str, tuple[Any, ...]], tuple[Any, ...]]

_GENERAL = frozenset(
    {
        "utf8mb4_general_ci",
        "utf8mb4_general_nopad_ci",
        "utf8mb3_general_ci",
        "utf8mb3_general_nopad_ci",
        "utf8mb3_general_mysql500_ci",
    }
)
_BEYOND_BMP = "\U0001f600"


@functools.cache
def _plane() -> str:
    """Every character of the Basic Multilingual Plane (surrogates aside), in order."""
    return "".join(chr(c) for c in range(0x10000) if not 0xD800 <= c <= 0xDFFF)


class KeyFolds:
    """The lane folds of text key columns, per collation, for one sink.

    ``query`` reads weights from the downstream (once per collation of the general
    family, when the first table keyed by such a column is written).
    """

    def __init__(self, query: WeightQuery) -> None:
        self._query = query
        self._weights: dict[str, Callable[[str], str]] = {}
        self._lock = threading.Lock()

    def part_fold(self, column: Column) -> PartFold:
        """How ``column``'s values fold for lanes; None: leave it out of the lane key."""
        if column.charset is None or column.charset == "binary":
            return fold_text  # values are bytes; text only in a foreign schema
        collation = canonical_collation(column.collation) or ""
        if collation == "binary" or collation.endswith("_bin"):
            return fold_text
        if collation in _GENERAL:
            with self._lock:
                fold = self._weights.get(collation)
                if fold is None:
                    fold = self._weights[collation] = self._general(collation)
            return fold
        return None

    def _general(self, collation: str) -> Callable[[str], str]:
        charset = collation.split("_", 1)[0]
        expression = f"WEIGHT_STRING(CONVERT(%s USING {charset}) COLLATE {collation})"
        characters = _plane()
        plane, beyond = self._query(f"SELECT {expression}, {expression}", (characters, _BEYOND_BMP))
        if len(plane) != 2 * len(characters) or len(beyond) != 2:
            raise SinkError(
                f"the downstream's {collation} did not weigh each character as 2 bytes "
                f"({len(plane)} bytes for {len(characters)} characters)",
                "reading the weights of a key column's collation",
            )
        weights = {
            ord(c): chr(int.from_bytes(plane[2 * i : 2 * i + 2], "big"))
            for i, c in enumerate(characters)
        }
        other = chr(int.from_bytes(beyond, "big"))
        space = weights[ord(" ")]

        def fold(text: str) -> str:
            folded = text.translate(weights)
            if not folded.isascii() and max(folded) > "\uffff":
                folded = "".join(other if c > "\uffff" else c for c in folded)
            return folded.rstrip(space)

        return fold
