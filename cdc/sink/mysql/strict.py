"""No silent change of values downstream: strict row sessions and the warnings they leave.

A row is written as the source holds it, or the sink fails. Two guards:

* Row sessions (the lanes' and the snapshot loader's) run with
  :data:`STRICT_SQL_MODE`, so a value the downstream column cannot hold (too
  long, out of range, not in the charset, NULL into NOT NULL) is an error
  instead of a truncation with a warning. DDL sessions keep
  :data:`RELAXED_SQL_MODE`: a DDL is the source's own statement, replayed; if
  the source (non-strict) truncated while running it, the downstream doing the
  same is faithful, and a strict downstream would refuse the DDL forever.
* After every row statement whose OK packet counts warnings, ``SHOW
  WARNINGS`` (nothing is asked when the count is zero, the usual case) and
  :func:`changed_values` decide: a warning that means a stored value differs
  from the one sent (:data:`VALUE_CHANGED`, at any level: DECIMAL rounding is a
  Note even in strict mode), or any other Warning or Error not known harmless,
  fails the write before its commit (:class:`ValueChanged`), so nothing
  changed is committed. Strict mode turns most of these into errors already;
  the read is the safety net (``LOAD DATA ... IGNORE``, MySQL's ``LOAD DATA
  LOCAL`` that treats data errors as warnings, Notes).

The exceptions faithful replication needs, which is why the mode is not a bare
``STRICT_ALL_TABLES``:

* zero dates and zero parts (``0000-00-00``, ``2024-00-15``) are writable: no
  ``NO_ZERO_DATE`` / ``NO_ZERO_IN_DATE``; ``ALLOW_INVALID_DATES`` keeps days
  like ``2024-02-31`` that a source with that mode holds;
* ``NO_AUTO_VALUE_ON_ZERO``: an explicit 0 in an AUTO_INCREMENT column stays 0;
* no ``ERROR_FOR_DIVISION_BY_ZERO`` (rows carry values, not expressions) and no
  ``NO_BACKSLASH_ESCAPES`` / ``ANSI_QUOTES`` (the statements' literals use both);
  ``NO_ENGINE_SUBSTITUTION`` so a missing engine is an error, not another engine;
* the invalid ENUM value ``''`` (index 0, which a non-strict source stores for
  a label it did not know) is refused by every strict mode. A statement that
  writes one names its cells (:attr:`Statement.enum_errors`, row number within
  the statement and column); it runs with :data:`RELAXED_SQL_MODE` for itself
  only, and exactly the "Data truncated" warnings of those cells are expected.
  Any other warning of that statement still fails it.

``max_error_count`` is raised so that ``SHOW WARNINGS`` lists every warning
of a large statement; a statement with more warnings than can be listed fails,
since the unlisted ones cannot be checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cdc.model.schema import Column

__all__ = [
    "BINLOG_PROBE",
    "HARMLESS",
    "MAX_ERROR_COUNT",
    "RELAXED_SQL_MODE",
    "STRICT_SQL_MODE",
    "VALUE_CHANGED",
    "ServerWarning",
    "ValueChanged",
    "changed_values",
    "invalid_enum_columns",
    "isolation_sql",
    "parse_warning",
    "session_sql",
]

_FAITHFUL = "NO_AUTO_VALUE_ON_ZERO,ALLOW_INVALID_DATES,NO_ENGINE_SUBSTITUTION"
STRICT_SQL_MODE = "STRICT_ALL_TABLES," + _FAITHFUL
"""The sql_mode of row sessions (see the module docstring for what it leaves out and why)."""
RELAXED_SQL_MODE = _FAITHFUL
"""The sql_mode of DDL sessions and of a statement writing the invalid ENUM value ''."""
MAX_ERROR_COUNT = 65535
"""The most warnings a server keeps for ``SHOW WARNINGS`` (the variable's maximum)."""

VALUE_CHANGED = frozenset(
    {
        1048,  # column cannot be null
        1261,  # row doesn't contain data for all columns
        1262,  # row was truncated; it contained more data than there were input columns
        1263,  # column set to default value; NULL supplied to NOT NULL column
        1264,  # out of range value
        1265,  # data truncated
        1292,  # truncated incorrect value / incorrect datetime value
        1366,  # incorrect (string, integer, decimal) value
        1367,  # illegal value found during parsing
        1406,  # data too long
    }
)
"""Warnings meaning the stored value is not the one sent: always a failure for rows."""

HARMLESS = frozenset(
    {
        1051,  # unknown table (DROP ... IF EXISTS)
        1287,  # deprecated syntax (VALUES() in ON DUPLICATE KEY UPDATE, MySQL 8.0.20+)
        1592,  # unsafe statement for a statement-format binlog (the downstream's own binlog)
        1681,  # integer display width is deprecated
        3719,  # 'utf8' is an alias of utf8mb3
    }
)
"""Warnings that say nothing about the values written."""

_COLUMN = re.compile(
    r"column (?:`(?:[^`]|``)*`\.`(?:[^`]|``)*`\.)?(?:`((?:[^`]|``)*)`|'([^']*)')",
    re.IGNORECASE,
)
_ROW = re.compile(r"\bat row (\d+)")


def session_sql(*, strict: bool) -> tuple[str, ...]:
    """The statements a sink connection runs once it is open (after typeconv's init
    command): foreign keys unchecked (lanes write tables out of order, and a REPLACE
    must not cascade), the sql_mode, and for row sessions room for every warning."""
    if strict:
        return (
            "SET SESSION foreign_key_checks = 0, "
            f"SESSION sql_mode = '{STRICT_SQL_MODE}', "
            f"SESSION max_error_count = {MAX_ERROR_COUNT}",
        )
    return (f"SET SESSION foreign_key_checks = 0, SESSION sql_mode = '{RELAXED_SQL_MODE}'",)


#: What a row session asks before choosing its isolation level (:func:`isolation_sql`):
#: rows of (name, value), none for a variable the server does not have (a MySQL that
#: dropped ``binlog_format`` logs rows only).
BINLOG_PROBE = "SHOW SESSION VARIABLES WHERE Variable_name IN ('log_bin', 'binlog_format')"


def isolation_sql(answer: Iterable[Sequence[Any]]) -> tuple[str, ...]:
    """A row session's isolation level, from the rows :data:`BINLOG_PROBE` answered.

    READ COMMITTED, as TiCDC's MySQL sink sets it: the sink reads nothing, and under
    REPEATABLE READ every range or missing-key lookup also locks the gap next to it,
    so writers of one table wait on each other's gaps (two chunks of one table loaded
    at once: the first chunk's range DELETE locks the gap the next chunk inserts into)
    and can deadlock. Order between writers of one row comes from the lanes and the
    snapshot hand-off, never from gap locks. Kept at the server's default when the
    downstream logs statements (``binlog_format=STATEMENT``): it refuses InnoDB
    writes under READ COMMITTED there (error 1665).
    """
    variables = {str(name).lower(): str(value).upper() for name, value in answer}
    if variables.get("log_bin") in ("ON", "1") and variables.get("binlog_format") == "STATEMENT":
        return ()
    return ("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",)


@dataclass(frozen=True)
class ServerWarning:
    """One row of ``SHOW WARNINGS``; ``column`` and ``row`` when the text names them."""

    level: str
    code: int
    message: str
    column: str | None
    row: int | None

    def __str__(self) -> str:
        return f"{self.message} ({self.level} {self.code})"


def parse_warning(row: Sequence[Any]) -> ServerWarning:
    """``(Level, Code, Message)`` of ``SHOW WARNINGS`` as a :class:`ServerWarning`."""
    level, code, message = str(row[0]), int(row[1]), str(row[2])
    column_match = _COLUMN.search(message)
    column = None
    if column_match is not None:
        quoted, plain = column_match.groups()
        column = quoted.replace("``", "`") if quoted is not None else plain
    row_match = _ROW.search(message)
    return ServerWarning(
        level, code, message, column, int(row_match.group(1)) if row_match else None
    )


def changed_values(
    warnings: Iterable[ServerWarning], expected: frozenset[tuple[int, str]] = frozenset()
) -> list[ServerWarning]:
    """The warnings of a row statement that mean a value was not written as sent.

    ``expected``: (row number, lower-case column) cells that write the invalid ENUM
    value '' on purpose; their "Data truncated" (1265) is the faithful result.
    """
    bad = []
    for warning in warnings:
        if (
            warning.code == 1265
            and warning.row is not None
            and warning.column is not None
            and (warning.row, warning.column.lower()) in expected
        ):
            continue
        if warning.code in VALUE_CHANGED or (
            warning.level != "Note" and warning.code not in HARMLESS
        ):
            bad.append(warning)
    return bad


class ValueChanged(Exception):
    """The downstream stored a value other than the one sent (or may have): a permanent
    failure, raised before the commit so the transaction is rolled back."""

    def __init__(self, warnings: Sequence[ServerWarning], hidden: int = 0) -> None:
        self.warnings = tuple(warnings)
        columns = sorted({w.column for w in warnings if w.column is not None})
        shown = "; ".join(str(w) for w in warnings[:3])
        more = len(warnings) - 3
        text = (
            "the downstream would not store the values as sent"
            + (f" (column(s) {', '.join(columns)})" if columns else "")
            + (f": {shown}" if shown else "")
            + (f"; and {more} more" if more > 0 else "")
            + (f"; and {hidden} warning(s) the server did not list" if hidden else "")
            + "; nothing of this transaction was committed: widen the downstream column(s) "
            "to hold the source's values (or recreate the table from the source)"
        )
        super().__init__(text)


def invalid_enum_columns(columns: Sequence[Column]) -> list[tuple[int, str]]:
    """(index, lower-case name) of the ENUM columns among ``columns`` for which '' is
    the invalid value (not one of their members)."""
    return [
        (i, column.name.lower())
        for i, column in enumerate(columns)
        if column.data_type == "enum" and "" not in column.elements
    ]
