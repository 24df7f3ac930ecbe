"""Which upserts of a lane transaction go down as one ``LOAD DATA`` instead of statements.

    plan(ops) groups the ops; per table of a group: DELETE ... IN (...), then the upserts
      fewer than load-data-rows, or the table upserts by ON DUPLICATE KEY UPDATE
          -> multi-row REPLACE / INSERT statements (statements.py)
      load-data-rows or more, and REPLACE is the table's upsert
          -> LOAD DATA LOCAL INFILE ... REPLACE of those rows (loadfile.py), sent from
             memory (localfile.py), in the same downstream transaction, same place

A load is a REPLACE of the same rows, with the same values, in the same strict
session (its warnings checked, ``strict.py``) under the same write fence, so a
replay converges the same way; only the work differs: no SQL to parse per row
on the server, a third of the client's time to render a row (a lane is mostly
Python, so the sink gained 1.2-1.4x rows/s with 5000-row transactions, where a
snapshot chunk gains 1.8x). Small loads do not pay, the file request being one
more round trip (break-even near 128 rows), hence ``load-data-rows`` (default
256). A table that
upserts by ``INSERT ... ON DUPLICATE KEY UPDATE`` (``safe-mode=false``, no
other unique key) keeps it: its rows are updated in place, not deleted and
inserted again, which is what that mode was chosen for (downstream triggers).

A downstream that refuses local files (``local_infile=OFF``) refuses the first
load; that transaction is written again with statements, and so is every later
one of this sink (one log line says so and what to change).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

from cdc.logs import ContextLogger
from cdc.sink.mysql.loadfile import TableLoad
from cdc.sink.mysql.localfile import refuses_local_files
from cdc.sink.mysql.statements import Statement, TableWriter

__all__ = ["MAX_LOAD_ROWS", "BulkLoads"]

MAX_LOAD_ROWS = 10_000
"""The most rows one load carries (a larger source transaction is several loads); bounds
the memory of one encoded file."""


class BulkLoads:
    """The ``load`` of ``statements.plan`` for every lane of one sink, and its off switch.

    ``min_rows``: from how many upserts of one table in one group a load is used.
    """

    def __init__(self, min_rows: int, log: ContextLogger) -> None:
        if isinstance(min_rows, bool) or not isinstance(min_rows, int) or min_rows < 1:
            raise ValueError(f"BulkLoads.min_rows must be an int >= 1, not {min_rows!r}")
        self.min_rows = min_rows
        self._log = log
        self._lock = threading.Lock()
        self._refused = False
        self._loads: weakref.WeakKeyDictionary[TableWriter, TableLoad] = weakref.WeakKeyDictionary()

    @property
    def active(self) -> bool:
        """False once the downstream refused local files: statements from then on."""
        return not self._refused

    def __call__(
        self, writer: TableWriter, rows: Sequence[tuple[Any, ...]]
    ) -> list[Statement] | None:
        """The loads of ``rows`` (``writer``'s upsert parameters), or ``None`` when they
        go as statements."""
        if len(rows) < self.min_rows or not writer.uses_replace or self._refused:
            return None
        with self._lock:
            load = self._loads.get(writer)
            if load is None:
                load = self._loads[writer] = TableLoad(writer.name, writer.columns)
        return [
            load.statement(rows[start : start + MAX_LOAD_ROWS])
            for start in range(0, len(rows), MAX_LOAD_ROWS)
        ]

    def refused(self, error: BaseException) -> bool:
        """True when ``error`` is the downstream refusing local files; loads then stop
        for the rest of the sink's life (said once in the log)."""
        if not refuses_local_files(error):
            return False
        with self._lock:
            first, self._refused = not self._refused, True
        if first:
            self._log.warning(
                "the downstream refuses LOAD DATA LOCAL INFILE (%s); large batches are "
                "written with REPLACE statements from now on, the slower way: set "
                "local_infile=ON on the downstream server to load them",
                error,
            )
        return True
