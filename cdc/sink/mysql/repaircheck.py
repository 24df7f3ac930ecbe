"""Whether a table can be re-snapshotted into a MySQL/MariaDB downstream, and how its
keys compare there.

``rangerepair`` deletes the downstream rows of a chunk's range that the source has no
row for. That is right only if (each a refusal, one line, when it does not hold):

    the downstream table is InnoDB       its row and gap locks (SELECT ... FOR UPDATE)
                                         order the chunk against the stream, and its
                                         writes roll back; MyISAM, Aria, MEMORY lock
                                         nothing and cannot (lost updates, wrong deletes)
    no unique key but the row key,       the repair's REPLACE would also delete a
      on either side                     downstream row that clashes on another unique
                                         key, outside the chunk and the --where, and
                                         nothing puts it back
    the downstream has the row key as    a REPLACE by key, a DELETE by key
      its primary or a unique key
    each key column's (and the chunk     the chunk's bounds come in the source's order
      column's) character set and        and the downstream evaluates ``key >= lo AND
      collation equal on both sides      key < hi`` in its own: with another order its
                                         range holds rows of other chunks, which the
                                         repair would delete (numeric keys: both None)

The checks run when the re-snapshot is asked for (``MySQLKind.resnapshot_refusal``)
and again in every chunk's transaction (the downstream's facts under the chunk's
locks, the source's read in the chunk's window), so a table changed in between fails
the re-snapshot with the reason before anything of that chunk is written.

With the collations equal, two keys are the same row on both sides exactly when the
downstream's collation says so: :func:`key_matcher` compares them exactly where that is
the collation's equality (numbers, binary strings, ``*_bin`` collations; trailing
spaces dropped under a PAD SPACE collation), and says where only the downstream can
tell (``_ci``, ``_ai`` and other linguistic collations: ``'ß' = 's'`` in
``utf8mb4_general_ci``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cdc.model.schema import TableName
from cdc.schema.tablefacts import TableFacts

__all__ = ["KeyMatcher", "key_matcher", "refusal"]


def _shown(charset: str | None, collation: str | None) -> str:
    if charset is None and collation is None:
        return "not text"
    return f"{charset or '?'} / {collation or '?'}"


def _columns(names: Sequence[str | None]) -> str:
    return ", ".join("(expression)" if n is None else n for n in names)


def refusal(
    table: TableName,
    key_columns: Sequence[str],
    source: TableFacts | None,
    downstream: TableFacts | None,
    chunk_column: str | None = None,
) -> str | None:
    """Why ``table`` cannot be re-snapshotted into the downstream; None when it can.

    ``key_columns``: the source's row key (``TableSchema.key_columns``);
    ``chunk_column``: the column the chunks' bounds are on, when not one of them
    (``snapshot.chunk-key-columns``): its collation orders the ranges as well.
    """
    if not key_columns:
        return f"table {table} has no key: a re-snapshot removes and keeps rows by key"
    if source is None:
        return f"table {table} does not exist on the source"
    if downstream is None:
        return (
            f"table {table} does not exist downstream; a re-snapshot repairs a table the "
            "changefeed has created"
        )
    engine = downstream.engine or "unknown"
    if engine.lower() != "innodb":
        return (
            f"the downstream table {table} uses the {engine} engine: a re-snapshot needs "
            "InnoDB (its row and gap locks order each chunk against the stream, and its "
            "writes roll back); ALTER TABLE ... ENGINE=InnoDB downstream first"
        )
    keys = {k.lower() for k in key_columns}
    shown = ", ".join(key_columns)
    for side, facts in (("source", source), ("downstream", downstream)):
        for index, columns in sorted(facts.unique_keys.items()):
            if None in columns or set(columns) != keys:
                return (
                    f"table {table} has a unique key besides its row key ({shown}) on the "
                    f"{side}: {index} ({_columns(columns)}); the re-snapshot's REPLACE would "
                    "also remove downstream rows clashing on it, outside the chunk and the "
                    "--where: a re-snapshot of such a table is not supported"
                )
    if not any(set(columns) == keys for columns in downstream.unique_keys.values()):
        return (
            f"the downstream table {table} has no primary or unique key on ({shown}); a "
            "re-snapshot writes and removes rows by that key"
        )
    ordered = list(key_columns)
    if chunk_column is not None and chunk_column.lower() not in keys:
        ordered.append(chunk_column)
    for name in ordered:
        kind = "key" if name.lower() in keys else "chunk key"
        theirs = source.columns.get(name.lower())
        ours = downstream.columns.get(name.lower())
        if theirs is None or ours is None:
            side = "source" if theirs is None else "downstream"
            return f"{kind} column {name} of table {table} is missing on the {side}"
        if theirs != ours:
            return (
                f"{kind} column {name} of table {table} is {_shown(*theirs)} on the source but "
                f"{_shown(*ours)} downstream: chunk bounds in the source's order would "
                "select other rows downstream, and rows the source has would be deleted; "
                "give it the same character set and collation on both sides"
            )
    return None


def _exact(collation: str | None) -> bool:
    """Whether equal values under ``collation`` are equal Python values (after
    :func:`_pads`): no collation (not text, or a binary string), ``binary``, ``*_bin``."""
    return collation is None or collation == "binary" or collation.endswith("_bin")


def _pads(collation: str | None) -> bool:
    """Whether ``collation`` is PAD SPACE (trailing spaces do not count): every text
    collation but MariaDB's ``*_nopad_*`` and MySQL 8's ``*_0900_*`` and ``binary``."""
    if collation is None or collation == "binary":
        return False
    return "_nopad" not in collation and "_0900_" not in collation


KeyMatcher = Callable[[tuple[Any, ...]], tuple[Any, ...]]


def key_matcher(key_columns: Sequence[str], downstream: TableFacts) -> tuple[KeyMatcher, bool]:
    """``(canonical, exact)``: ``canonical(key)`` is equal for two keys the downstream's
    collations call equal; ``exact`` says whether it is also different for keys they
    call different. Without ``exact`` (a linguistic collation on a key column) equal
    canonical forms mean equal keys, but unequal ones do not mean different keys: the
    downstream must be asked (``rangerepair``)."""
    collations = [downstream.columns.get(n.lower(), (None, None))[1] for n in key_columns]
    exact = all(_exact(c) for c in collations)
    padded = [i for i, c in enumerate(collations) if _pads(c)]
    if not padded:
        return (lambda key: key), exact

    def canonical(key: tuple[Any, ...]) -> tuple[Any, ...]:
        out = list(key)
        for i in padded:
            if isinstance(out[i], str):
                out[i] = out[i].rstrip(" ")
        return tuple(out)

    return canonical, exact
