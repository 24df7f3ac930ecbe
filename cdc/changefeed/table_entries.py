"""The tables of one changefeed as read from etcd: each table's task and record together.

``read_tables`` reads every task and every record of the changefeed (two range
reads, from etcd or from the owner's mirrors of it). It is the one way to read
them: the owner schedules and advances the changefeed from it, and the admin
API (``cdcctl changefeed query``) shows it.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.changefeed.tables import TableRecord, TableState, TableTask, TaskState
from cdc.model.position import Position
from cdc.store import KeyReader
from cdc.store.keys import TableCheckpointKey, TaskKey

__all__ = ["TableEntry", "TableReader", "TaskView", "read_tables"]


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


def read_tables(store: KeyReader, changefeed_id: str) -> dict[str, TableEntry]:
    """Every table with a task or a record, by ``schema.table``, in table order."""
    return TableReader(store, changefeed_id).read()


class TableReader:
    """``read_tables`` for a reader that asks again and again (the owner, every cycle):
    each task and record is decoded once per change, not once per read, a key's table
    name is parsed once, and a record's schema is decoded again only when it changed;
    over a mirror, decoding is what a read of 10,000 tables costs.
    """

    def __init__(self, store: KeyReader, changefeed_id: str) -> None:
        self._store = store
        self._changefeed_id = changefeed_id
        self._names: dict[str, str] = {}
        self._tasks: dict[str, tuple[int, TableTask]] = {}
        self._records: dict[str, tuple[int, TableRecord]] = {}

    def _table(self, key: str, kind: type[TaskKey] | type[TableCheckpointKey]) -> str:
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self._store.keys.parse(key, kind).table
        return name

    def read(self) -> dict[str, TableEntry]:
        """Every table with a task or a record, by ``schema.table``, in table order."""
        keys = self._store.keys
        cf = self._changefeed_id
        tasks: dict[str, tuple[TableTask, int]] = {}
        seen_tasks: dict[str, tuple[int, TableTask]] = {}
        for item in self._store.get_prefix(keys.prefix_of(TaskKey, cf)):
            cached = self._tasks.get(item.key)
            if cached is None or cached[0] != item.mod_revision:
                cached = (item.mod_revision, TableTask.from_dict(item.json()))
            seen_tasks[item.key] = cached
            tasks[self._table(item.key, TaskKey)] = (cached[1], item.mod_revision)
        records: dict[str, TableRecord] = {}
        seen_records: dict[str, tuple[int, TableRecord]] = {}
        for item in self._store.get_prefix(keys.prefix_of(TableCheckpointKey, cf)):
            held = self._records.get(item.key)
            if held is None or held[0] != item.mod_revision:
                known = held[1] if held is not None else None
                held = (item.mod_revision, TableRecord.from_dict(item.json(), known))
            seen_records[item.key] = held
            records[self._table(item.key, TableCheckpointKey)] = held[1]
        gone = (self._tasks.keys() - seen_tasks.keys()) | (
            self._records.keys() - seen_records.keys()
        )
        for key in gone:
            self._names.pop(key, None)
        self._tasks, self._records = seen_tasks, seen_records
        out = {}
        for table in sorted(tasks.keys() | records.keys()):
            task, revision = tasks.get(table, (None, 0))
            out[table] = TableEntry(table, task, revision, records.get(table))
        return out
