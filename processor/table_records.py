"""A table pipeline's reports (``table-checkpoint/<cf>/<table>``), guarded by its task.

Every write is a transaction requiring the task key to be at the revision
the pipeline answers (``TaskGuard``), so a capture that lost the table (the
owner moved it, or removed the changefeed) changes nothing; the processor
moves the guard when the owner rewrites a task that still names it.
"""

from __future__ import annotations

import threading
import time

from cdc.changefeed import TableRecord, TableState
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.store import EtcdStore, ModRevisionIs, Put

__all__ = ["RecordWriter", "TableLost", "TaskGuard"]


class TableLost(RuntimeError):
    """The task no longer is at the revision this pipeline answers: stop, write nothing."""


class TaskGuard:
    """The task revision a pipeline's reports answer (thread-safe)."""

    def __init__(self, revision: int) -> None:
        self._revision = revision
        self._lock = threading.Lock()

    @property
    def revision(self) -> int:
        with self._lock:
            return self._revision

    def move(self, revision: int) -> None:
        with self._lock:
            self._revision = revision


class RecordWriter:
    """Reads and writes the record of one table for one capture."""

    def __init__(
        self, store: EtcdStore, changefeed_id: str, table: str, capture_id: str, guard: TaskGuard
    ) -> None:
        self.store = store
        self.capture_id = capture_id
        self.guard = guard
        self.key = store.keys.table_checkpoint(changefeed_id, table)
        self.task_key = store.keys.task(changefeed_id, table)

    def read(self) -> TableRecord | None:
        item = self.store.get(self.key)
        return None if item is None else TableRecord.from_dict(item.json())

    def write(
        self,
        state: TableState,
        checkpoint: Position | None,
        schema: TableSchema | None,
        *,
        error: str | None = None,
        permanent: bool = False,
        snapshot_at: Position | None = None,
        reread_from: Position | None = None,
        pending_until: Position | None = None,
    ) -> None:
        """Writes the record; ``TableLost`` if the task moved on."""
        revision = self.guard.revision
        record = TableRecord(
            self.capture_id,
            state,
            revision,
            checkpoint,
            schema,
            error,
            permanent,
            time.time(),
            snapshot_at,
            reread_from,
            pending_until,
        )
        if not self.store.txn(
            [ModRevisionIs(self.task_key, revision)], [Put(self.key, record.to_dict())]
        ):
            raise TableLost(f"task {self.task_key} is no longer at revision {revision}")
