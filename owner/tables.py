"""The tables of one changefeed as the owner sees them, and its fenced writes to them.

``read_tables`` reads every task and every record of the changefeed (two range
reads); ``TaskWriter`` makes the owner's changes, each an etcd transaction
that is fenced by the owner's term and also requires the changefeed to be the
same incarnation (its info key's create revision), so a changefeed removed
meanwhile gets no new keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cdc.changefeed import Changefeed, TableRecord, TableState, TableTask, TaskState
from cdc.model.position import Position
from cdc.store import (
    Absent,
    CreateRevisionIs,
    Delete,
    DeletePrefix,
    EtcdStore,
    Fence,
    ModRevisionIs,
    Put,
)
from cdc.store.keys import SnapshotChunkKey, TableCheckpointKey, TaskKey
from owner.scheduler import TaskView

__all__ = ["TableEntry", "TaskWriter", "read_tables"]

#: Operations per transaction (etcd's default limit is 128).
_TXN_OPS = 96


@dataclass(frozen=True)
class TableEntry:
    """One table: its task (and the revisions it was read at) and its processor's record."""

    table: str
    task: TableTask | None
    task_revision: int
    record: TableRecord | None

    @property
    def checkpoint(self) -> Position | None:
        """Every change of the table up to here is in the sink (None: not known yet)."""
        if self.record is not None and self.record.checkpoint is not None:
            return self.record.checkpoint
        if self.task is not None and isinstance(self.task.start, Position):
            return self.task.start
        return None

    @property
    def idle(self) -> bool:
        """Whether the processor has answered the current task with an idle report."""
        return self.record is not None and self.record.answers(self.task_revision)

    @property
    def failed(self) -> bool:
        """Whether the pipeline reports an error while the task says run."""
        return (
            self.task is not None
            and self.task.state is TaskState.RUN
            and self.record is not None
            and self.record.state is TableState.ERROR
            and self.record.task_revision == self.task_revision
        )

    def view(self) -> TaskView:
        assert self.task is not None
        return TaskView(self.task.capture_id, self.task.state, self.task.move_to, self.idle)


def read_tables(store: EtcdStore, changefeed_id: str) -> dict[str, TableEntry]:
    """Every table with a task or a record, by ``schema.table``."""
    keys = store.keys
    tasks: dict[str, tuple[TableTask, int]] = {}
    for item in store.get_prefix(keys.prefix_of(TaskKey, changefeed_id)):
        key = keys.parse(item.key, TaskKey)
        tasks[key.table] = (TableTask.from_dict(item.json()), item.mod_revision)
    records: dict[str, TableRecord] = {}
    for item in store.get_prefix(keys.prefix_of(TableCheckpointKey, changefeed_id)):
        checkpoint = keys.parse(item.key, TableCheckpointKey)
        records[checkpoint.table] = TableRecord.from_dict(item.json())
    out = {}
    for table in sorted(tasks.keys() | records.keys()):
        task, revision = tasks.get(table, (None, 0))
        out[table] = TableEntry(table, task, revision, records.get(table))
    return out


class TaskWriter:
    """The owner's writes to the tables of one changefeed incarnation (see module doc)."""

    def __init__(self, store: EtcdStore, fence: Fence, changefeed: Changefeed) -> None:
        self.store = store
        self.fence = fence
        self.cf = changefeed.changefeed_id
        self._same_changefeed = CreateRevisionIs(
            store.keys.changefeed_info(self.cf), changefeed.created
        )

    def create(self, table: str, task: TableTask) -> bool:
        """Creates the table's task; False if it exists (or the changefeed changed)."""
        key = self.store.keys.task(self.cf, table)
        return self.store.txn(
            [self._same_changefeed, Absent(key)], [Put(key, task.to_dict())], fence=self.fence
        )

    def replace(self, table: str, task: TableTask, revision: int) -> bool:
        """Rewrites the task read at ``revision``; False if it changed meanwhile."""
        key = self.store.keys.task(self.cf, table)
        return self.store.txn(
            [self._same_changefeed, ModRevisionIs(key, revision)],
            [Put(key, task.to_dict())],
            fence=self.fence,
        )

    def remove(self, tables: Iterable[str]) -> None:
        """Deletes the tasks, records and snapshot chunks of ``tables`` (pipelines stop)."""
        keys = self.store.keys
        ops: list[Delete | DeletePrefix] = []
        for table in tables:
            ops.append(Delete(keys.task(self.cf, table)))
            ops.append(Delete(keys.table_checkpoint(self.cf, table)))
            ops.append(DeletePrefix(keys.prefix_of(SnapshotChunkKey, self.cf, table)))
        for first in range(0, len(ops), _TXN_OPS):
            self.store.txn([self._same_changefeed], ops[first : first + _TXN_OPS], fence=self.fence)

    def put_barrier(self, value: dict) -> bool:
        """Writes the changefeed's barrier; False if the changefeed changed."""
        key = self.store.keys.barrier(self.cf)
        return self.store.txn([self._same_changefeed], [Put(key, value)], fence=self.fence)
