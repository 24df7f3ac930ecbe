"""The tables of one changefeed as read from etcd: each table's task and record together.

``read_tables`` reads every task and every record of the changefeed (two range
reads). It is the one way to read them: the owner schedules and advances the
changefeed from it, and the admin API (``cdcctl changefeed query``) shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.changefeed.tables import TableRecord, TableState, TableTask, TaskState
from cdc.model.position import Position
from cdc.store import EtcdStore
from cdc.store.keys import TableCheckpointKey, TaskKey

__all__ = ["TableEntry", "TaskView", "read_tables"]


@dataclass(frozen=True)
class TaskView:
    """What the owner's scheduler needs of one task: where, what, and whether its pipeline
    is idle."""

    capture_id: str
    state: TaskState
    move_to: str | None = None
    idle: bool = False


@dataclass(frozen=True)
class TableEntry:
    """One table: its task (and the revision it was read at) and its processor's record."""

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
    """Every table with a task or a record, by ``schema.table``, in table order."""
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
