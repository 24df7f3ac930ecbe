"""A table pipeline's reports (``table-checkpoint/<cf>/<table>``), guarded by its task.

Every write is a transaction requiring the task key to be at the revision
the pipeline answers (``TaskGuard``), so a capture that lost the table (the
owner moved it, or removed the changefeed) changes nothing; the processor
moves the guard when the owner rewrites a task that still names it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from cdc.changefeed import TableRecord, TableState, TableTask
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.store import EtcdStore, ModRevisionIs, Put
from cdc.store.keys import TaskKey

__all__ = ["RecordWriter", "TableLost", "TaskGuard", "TaskMovedOn", "write_running"]

#: Table records per etcd transaction (etcd refuses more than 128 operations per branch).
BATCH = 64


class TableLost(RuntimeError):
    """The task no longer is at the revision this pipeline answers: stop, write nothing."""


class TaskMovedOn(TableLost):
    """etcd refused a record guarded by ``revision``: the task is past it for good, so no
    pipeline answering it may start again here, whatever a lagging view of the tasks
    still shows."""

    def __init__(self, task_key: TaskKey, revision: int) -> None:
        super().__init__(f"task {task_key} is no longer at revision {revision}")
        self.revision = revision


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

    def proof(self) -> int:
        """The etcd revision at which the table's task still names this capture, its
        snapshot chunks' fence token (``cdc.sink.mysql.chunkfence``); ``TableLost`` when
        it no longer does. A capture that takes the table over proves it later: larger."""
        item, revision = self.store.get_with_revision(self.task_key)
        if item is None or TableTask.from_dict(item.json()).capture_id != self.capture_id:
            raise TableLost(f"task {self.task_key} names another capture now: writing nothing")
        return revision

    def record(
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
        reader: str | None = None,
    ) -> tuple[int, TableRecord]:
        """The record to write and the task revision it answers."""
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
            reader,
        )
        return revision, record

    def put(self, revision: int, record: TableRecord) -> int:
        """Writes ``record`` if the task is still at ``revision`` (the etcd revision of the
        write); ``TaskMovedOn`` if not."""
        written = self.store.txn_revision(
            [ModRevisionIs(self.task_key, revision)], [Put(self.key, record.to_dict())]
        )
        if written is None:
            raise TaskMovedOn(self.task_key, revision)
        return written


def write_running(
    store: EtcdStore, reports: Sequence[tuple[RecordWriter, int, TableRecord]]
) -> tuple[list[RecordWriter], int]:
    """Writes many tables' records, ``BATCH`` per etcd transaction; the writers whose task
    moved on (their record is not written), and the etcd revision of the last write (0:
    none).

    A shared reader reports every table it holds at each checkpoint: one
    transaction per table would make the cost follow the number of tables.
    A batch whose guards do not all hold is written again table by table,
    which finds the tables lost and writes the others.
    """
    lost: list[RecordWriter] = []
    last = 0
    for first in range(0, len(reports), BATCH):
        batch = reports[first : first + BATCH]
        conditions = [ModRevisionIs(w.task_key, revision) for w, revision, _ in batch]
        puts = [Put(w.key, record.to_dict()) for w, _, record in batch]
        written = store.txn_revision(conditions, puts)
        if written is not None:
            last = max(last, written)
            continue
        for writer, revision, record in batch:
            try:
                last = max(last, writer.put(revision, record))
            except TableLost:
                lost.append(writer)
    return lost, last
