"""Consistency check between a source and a target database (``cdcctl diff``, issue #9).

    check(source, target, table_filter, chunk_size=..., threads=...) -> DiffReport
    write_fix_sql(report, path)                                       -> statements written

Tables are chunked by key, a checksum per chunk is computed by each server
(:mod:`cdc.diff.checksum`), chunks whose sums differ are narrowed to the
differing rows (:mod:`cdc.diff.rows`), and the fix SQL makes the target equal
to the source (:mod:`cdc.diff.fixsql`). Reads are plain SELECTs in consistent
snapshots; nothing is locked.

The names below are imported when first used (``cdc.lazy``): ``cdcctl`` builds its
command line from the defaults without importing the checker.
"""

from typing import TYPE_CHECKING

from cdc.lazy import exports

if TYPE_CHECKING:
    from cdc.diff.checker import check
    from cdc.diff.defaults import DEFAULT_CHUNK_SIZE, DEFAULT_THREADS
    from cdc.diff.errors import DiffError, DiffInputError, DiffUnavailableError
    from cdc.diff.fixsql import fix_statements, sql_literal, write_fix_sql
    from cdc.diff.report import DiffKind, DiffReport, RowDiff, TableReport, TableStatus
    from cdc.diff.schemas import CompareMode

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_THREADS",
    "CompareMode",
    "DiffError",
    "DiffInputError",
    "DiffKind",
    "DiffReport",
    "DiffUnavailableError",
    "RowDiff",
    "TableReport",
    "TableStatus",
    "check",
    "fix_statements",
    "sql_literal",
    "write_fix_sql",
]

__getattr__ = exports(
    globals(),
    {
        "cdc.diff.checker": ("check",),
        "cdc.diff.defaults": ("DEFAULT_CHUNK_SIZE", "DEFAULT_THREADS"),
        "cdc.diff.errors": ("DiffError", "DiffInputError", "DiffUnavailableError"),
        "cdc.diff.fixsql": ("fix_statements", "sql_literal", "write_fix_sql"),
        "cdc.diff.report": ("DiffKind", "DiffReport", "RowDiff", "TableReport", "TableStatus"),
        "cdc.diff.schemas": ("CompareMode",),
    },
)
