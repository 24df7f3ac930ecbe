"""The tables of one changefeed as read from etcd: each table's task and record together.

``read_tables`` reads the changefeed's stream progress keys, then every task and
every record (three range reads, from etcd or from the owner's mirrors of it).
It is the one way to read them: the owner schedules and advances the
changefeed from it, and the admin API (``cdcctl changefeed query``) shows it.
A table's checkpoint is its record's, carried further by the progress of the
reader holding it (``stream_progress.apply_progress``).
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.changefeed.stream_progress import StreamProgress, apply_progress
from cdc.changefeed.tables import TableRecord, TableState, TableTask, TaskState
from cdc.model.position import Position
from cdc.store import DecodedValues, KeyReader, Versioned
from cdc.store.keys import StreamProgressKey, TableCheckpointKey, TaskKey

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
    """One table: its task (and the revision it was read at), its processor's record, and
    the position the binlog reader holding it reported since (``streamed``)."""

    table: str
    task: TableTask | None
    task_revision: int
    record: TableRecord | None
    streamed: StreamProgress | None = None

    @property
    def checkpoint(self) -> Position | None:
        """Every change of the table up to here is in the sink (None: not known yet)."""
        if self.record is not None and self.record.checkpoint is not None:
            recorded = self.record.checkpoint
            streamed = self.streamed
            if streamed is not None and streamed.position.key() > recorded.key():
                return streamed.position
            return recorded
        if self.task is not None and isinstance(self.task.start, Position):
            return self.task.start
        return None

    @property
    def updated_at(self) -> float:
        """When the table's checkpoint was last reported (its record, or its reader's
        progress); 0 without a record."""
        if self.record is None:
            return 0.0
        if self.streamed is not None:
            return max(self.record.updated_at, self.streamed.updated_at)
        return self.record.updated_at

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
    each task and record is decoded once per change (``DecodedValues``), a key's table
    name is parsed once, and a record's schema is decoded again only when it changed.
    """

    def __init__(self, store: KeyReader, changefeed_id: str) -> None:
        self._store = store
        self._changefeed_id = changefeed_id
        self._tasks = DecodedValues(self._task)
        self._records = DecodedValues(self._record)
        self._progress = DecodedValues(self._reader_progress)

    def _task(
        self, item: Versioned, previous: tuple[str, TableTask, int] | None
    ) -> tuple[str, TableTask, int]:
        name = previous[0] if previous else self._store.keys.parse(item.key, TaskKey).table
        return name, TableTask.from_dict(item.json()), item.mod_revision

    def _record(
        self, item: Versioned, previous: tuple[str, TableRecord] | None
    ) -> tuple[str, TableRecord]:
        if previous is None:
            name = self._store.keys.parse(item.key, TableCheckpointKey).table
            return name, TableRecord.from_dict(item.json())
        return previous[0], TableRecord.from_dict(item.json(), previous[1])

    def _reader_progress(
        self, item: Versioned, previous: tuple[tuple[str, str], StreamProgress] | None
    ) -> tuple[tuple[str, str], StreamProgress]:
        if previous is None:
            key = self._store.keys.parse(item.key, StreamProgressKey)
            return (key.capture_id, key.reader), StreamProgress.decode(item)
        return previous[0], StreamProgress.decode(item)

    def read(self) -> dict[str, TableEntry]:
        """Every table with a task or a record, by ``schema.table``, in table order."""
        keys = self._store.keys
        cf = self._changefeed_id
        # Progress first, then how far the records read will be complete, then the
        # records: a progress is applied only where those records include its writer's
        # last record write (stream_progress's module docstring).
        progress = dict(
            self._progress.read(self._store.get_prefix(keys.prefix_of(StreamProgressKey, cf)))
        )
        records_prefix = keys.prefix_of(TableCheckpointKey, cf)
        through = self._store.applied_through(records_prefix)
        tasks = {
            name: (task, revision)
            for name, task, revision in self._tasks.read(
                self._store.get_prefix(keys.prefix_of(TaskKey, cf))
            )
        }
        records = dict(self._records.read(self._store.get_prefix(records_prefix)))
        out = {}
        for table in sorted(tasks.keys() | records.keys()):
            task, revision = tasks.get(table, (None, 0))
            record = records.get(table)
            streamed = (
                apply_progress(task, revision, record, progress, through) if progress else None
            )
            out[table] = TableEntry(table, task, revision, record, streamed)
        return out
