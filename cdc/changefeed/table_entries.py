"""The tables of one changefeed as read from etcd: each table's task and record together.

``read_tables`` reads the changefeed's stream progress keys, then every task and
every record (three range reads, from etcd or from the owner's mirrors of it).
It is the one way to read them: the owner schedules and advances the
changefeed from it, and the admin API (``cdcctl changefeed query``) shows it.
A table's checkpoint is its record's, carried further by the progress of the
reader holding it (``TableEntry.streamed``, ``cdc/changefeed/stream_progress.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cdc.changefeed.stream_progress import ProgressBoard, StreamProgress
from cdc.changefeed.tables import TableRecord, TableState, TableTask, TaskState
from cdc.model.position import Position
from cdc.store import KeyReader, Versioned
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
    the progress keys (``progress``) whose reader may carry it further (``streamed``)."""

    table: str
    task: TableTask | None
    task_revision: int
    record: TableRecord | None
    progress: ProgressBoard | None = field(default=None, compare=False, repr=False)

    @property
    def streamed(self) -> StreamProgress | None:
        """The progress of the reader holding the table, where it speaks for the table."""
        group = self.carry_group
        if group is None or self.progress is None:
            return None
        return self.progress.progress_of(group)

    @property
    def carry_group(self) -> tuple[str, str] | None:
        """``(capture, reader)`` of the progress key that may carry this table: its record
        runs and names a reader, and answers its current task (same capture, same task
        revision: a task the owner moved or stopped keeps its record's checkpoint until
        the capture answers)."""
        task, record = self.task, self.record
        if (
            record is None
            or record.reader is None
            or record.state is not TableState.RUNNING
            or task is None
            or task.state is not TaskState.RUN
            or task.capture_id != record.capture_id
            or record.task_revision != self.task_revision
        ):
            return None
        return (record.capture_id, record.reader)

    @property
    def checkpoint(self) -> Position | None:
        """Every change of the table up to here is in the sink (None: not known yet)."""
        if self.record is not None and self.record.checkpoint is not None:
            recorded = self.record.checkpoint
            streamed = self.streamed if self.record.reader is not None else None
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
        streamed = self.streamed
        if streamed is not None:
            return max(self.record.updated_at, streamed.updated_at)
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
    """``read_tables`` for a reader that asks again and again (the owner, every cycle).

    Over the owner's mirrors it handles only what changed since its last read
    (``KeyReader.changes_since``): each changed task, record or progress key is
    read and decoded once, and only its table's entry is made again; a
    record's schema is decoded again only when it changed. It keeps what the
    owner's cycle asks of all tables current as entries change, so a cycle
    costs nothing per table that did not change: ``failed``, ``unsettled``,
    ``has_tasks``, ``lowest_checkpoint`` (per reader group, see
    ``stream_progress``) and ``version`` (which moves when the scheduler's view
    of a task changes). Over etcd itself (the admin API) every read reads the
    prefixes whole.
    """

    def __init__(self, store: KeyReader, changefeed_id: str) -> None:
        self._store = store
        self._changefeed_id = changefeed_id
        keys = store.keys
        self._prefixes = (
            keys.prefix_of(StreamProgressKey, changefeed_id),
            keys.prefix_of(TableCheckpointKey, changefeed_id),
            keys.prefix_of(TaskKey, changefeed_id),
        )
        self._board = ProgressBoard()
        self._tasks: dict[str, tuple[TableTask, int]] = {}
        self._task_revisions: dict[str, int] = {}
        self._records: dict[str, TableRecord] = {}
        self._record_revisions: dict[str, int] = {}
        self._progress: dict[tuple[str, str], StreamProgress] = {}
        self._positions: tuple[int, int, int] | None = None
        self._out: dict[str, TableEntry] | None = None
        self._failed: dict[str, TableEntry] = {}
        self._removing: dict[str, TableEntry] = {}
        self._unsettled: set[str] = set()
        self._unknown: set[str] = set()
        self._groups: dict[tuple[str, str] | None, dict[str, Position]] = {}
        self._group_of: dict[str, tuple[str, str] | None] = {}
        self._names: dict[str, str] = {}
        """Table names by record and task key: a key is parsed once."""
        self.version = 0
        """Moves whenever a task changes or a record answers its task differently: the
        owner's scheduler sees the same views while it stands still."""

    # --- what the owner asks of all tables -------------------------------------------------

    @property
    def failed(self) -> dict[str, TableEntry]:
        """The entries whose pipeline reports an error while the task says run."""
        return self._failed

    @property
    def removing(self) -> dict[str, TableEntry]:
        """The entries whose task removes the table (``TableTask.removing``): they count
        for no checkpoint, barrier or schedule, only for their removal."""
        return self._removing

    @property
    def unsettled(self) -> bool:
        """Whether some table's snapshot has chunks to read again after a DDL."""
        return bool(self._unsettled)

    @property
    def has_tasks(self) -> bool:
        return bool(self._tasks)

    @property
    def reporting_captures(self) -> set[str]:
        """The captures with a reader's progress key in the changefeed."""
        return {capture for capture, _ in self._progress}

    def lowest_checkpoint(self) -> Position | None:
        """The lowest table checkpoint (None while one is unknown, or without tables).

        For the tables a reader's progress carries, min(max(record, P)) is
        max(P, min(record)): one comparison per reader group, not per table."""
        if self._unknown or not self._tasks:
            return None
        lowest: Position | None = None
        board = self._board
        for group, members in self._groups.items():
            if not members:
                continue
            low = min(members.values(), key=Position.key)
            if group is not None:
                progress = board.progress_of(group)
                if progress is not None and progress.position.key() > low.key():
                    low = progress.position
            if lowest is None or low.key() < lowest.key():
                lowest = low
        return lowest

    def lowest_recorded(self) -> Position | None:
        """The lowest checkpoint the tables' records hold, no progress counted: where the
        slowest table would restart from (None while one is unknown, or without tables)."""
        if self._unknown or not self._tasks:
            return None
        lows = [min(m.values(), key=Position.key) for m in self._groups.values() if m]
        return min(lows, key=Position.key) if lows else None

    # --- reading -----------------------------------------------------------------------------

    def read(self) -> dict[str, TableEntry]:
        """Every table with a task or a record, by ``schema.table``, in table order.

        The entries' progress is the one of this read (they share one board): hold
        the mapping of one read for one decision."""
        if self._out is None or self._positions is None:
            return self._read_all()
        progress_prefix, records_prefix, tasks_prefix = self._prefixes
        store = self._store
        p_at, r_at, t_at = self._positions
        progress = store.changes_since(progress_prefix, p_at)
        records = store.changes_since(records_prefix, r_at)
        tasks = store.changes_since(tasks_prefix, t_at)
        if progress is None or records is None or tasks is None:
            return self._read_all()
        self._positions = (progress.end, records.end, tasks.end)
        for key in _ours(progress.keys, progress_prefix):
            self._set_progress(key, store.get(key))
        self._board.readers = dict(self._progress)
        self._board.records_through = records.applied_through
        changed: set[str] = set()
        for key in _ours(records.keys, records_prefix):
            changed.add(self._set_record(key, store.get(key)))
        for key in _ours(tasks.keys, tasks_prefix):
            changed.add(self._set_task(key, store.get(key)))
        if changed:
            self._out = self._entries(changed)
        return self._out

    def _read_all(self) -> dict[str, TableEntry]:
        store = self._store
        progress_prefix, records_prefix, tasks_prefix = self._prefixes
        positions = [store.journal_position(p) for p in self._prefixes]
        # Progress first, then how far the records read will be complete, then the
        # records: a progress is applied only where those records include its writer's
        # last record write (stream_progress's module docstring).
        progress_items = store.get_prefix(progress_prefix)
        through = store.applied_through(records_prefix)
        record_items = store.get_prefix(records_prefix)
        task_items = store.get_prefix(tasks_prefix)
        # What was decoded before is kept where its key did not change (a record's schema,
        # above all); what the read no longer holds goes.
        self._progress = {}
        for item in progress_items:
            self._set_progress(item.key, item)
        # A board of its own for the entries of a whole read: entries of an earlier read
        # that someone still holds (another thread's) keep what they were read with.
        self._board = ProgressBoard(dict(self._progress), through)
        records = {self._set_record(item.key, item) for item in record_items}
        tasks = {self._set_task(item.key, item) for item in task_items}
        keys, cf = self._store.keys, self._changefeed_id
        for table in set(self._records) - records:
            self._set_record(str(keys.table_checkpoint(cf, table)), None)
        for table in set(self._tasks) - tasks:
            self._set_task(str(keys.task(cf, table)), None)
        p_at, r_at, t_at = positions
        self._positions = (
            (p_at, r_at, t_at)
            if p_at is not None and r_at is not None and t_at is not None
            else None
        )
        self._out = None
        self._failed, self._removing, self._unsettled, self._unknown = {}, {}, set(), set()
        self._groups, self._group_of = {}, {}
        self._out = self._entries(set(self._tasks) | set(self._records))
        return self._out

    def _set_progress(self, key: str, item: Versioned | None) -> None:
        parsed = self._store.keys.parse(key, StreamProgressKey)
        group = (parsed.capture_id, parsed.reader)
        if item is None:
            self._progress.pop(group, None)
        else:
            self._progress[group] = StreamProgress.decode(item)

    def _table(self, key: str, kind: type[TableCheckpointKey] | type[TaskKey]) -> str:
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self._store.keys.parse(key, kind).table
        return name

    def _set_record(self, key: str, item: Versioned | None) -> str:
        table = self._table(key, TableCheckpointKey)
        if item is None:
            self._names.pop(key, None)
            self._records.pop(table, None)
            self._record_revisions.pop(table, None)
            return table
        if self._record_revisions.get(table) == item.mod_revision:
            return table
        self._records[table] = TableRecord.from_dict(item.json(), self._records.get(table))
        self._record_revisions[table] = item.mod_revision
        return table

    def _set_task(self, key: str, item: Versioned | None) -> str:
        table = self._table(key, TaskKey)
        if item is None:
            self._names.pop(key, None)
            self._tasks.pop(table, None)
            self._task_revisions.pop(table, None)
            return table
        if self._task_revisions.get(table) == item.mod_revision:
            return table
        self._tasks[table] = (TableTask.from_dict(item.json()), item.mod_revision)
        self._task_revisions[table] = item.mod_revision
        return table

    def _entries(self, changed: set[str]) -> dict[str, TableEntry]:
        """The entries with those of ``changed`` made again (and the aggregates with them)."""
        out = dict(self._out) if self._out is not None else {}
        added = False
        for table in changed:
            old = out.get(table)
            task, revision = self._tasks.get(table, (None, 0))
            record = self._records.get(table)
            if task is None and record is None:
                out.pop(table, None)
                self._forget(table)
                if old is not None and old.task is not None:
                    self.version += 1
                continue
            entry = TableEntry(table, task, revision, record, self._board)
            if old is None:
                added = True
            if old is None or _schedule_view(old) != _schedule_view(entry):
                self.version += 1
            out[table] = entry
            self._index(entry)
        if added:
            out = dict(sorted(out.items()))
        return out

    def _forget(self, table: str) -> None:
        self._failed.pop(table, None)
        self._removing.pop(table, None)
        self._unsettled.discard(table)
        self._unknown.discard(table)
        group = self._group_of.pop(table, None)
        members = self._groups.get(group)
        if members is not None:
            members.pop(table, None)

    def _index(self, entry: TableEntry) -> None:
        table = entry.table
        self._forget(table)
        if entry.failed:
            self._failed[table] = entry
        record = entry.record
        if entry.task is None:
            return
        if entry.task.removing:
            self._removing[table] = entry
            return
        if record is not None and (
            record.pending_until is not None or record.reread_from is not None
        ):
            self._unsettled.add(table)
        if record is not None and record.checkpoint is not None:
            group = entry.carry_group
            self._group_of[table] = group
            self._groups.setdefault(group, {})[table] = record.checkpoint
        elif isinstance(entry.task.start, Position):
            self._group_of[table] = None
            self._groups.setdefault(None, {})[table] = entry.task.start
        else:
            self._unknown.add(table)


def _ours(keys: list[str], prefix: str) -> set[str]:
    return {key for key in keys if key.startswith(prefix)}


def _schedule_view(entry: TableEntry) -> object:
    """What of an entry the owner's scheduler and decisions see (besides checkpoints)."""
    record = entry.record
    return (
        entry.task,
        entry.task_revision,
        None if record is None else (record.capture_id, record.state, record.task_revision),
    )
