"""The processor of one capture: runs the table pipelines the owner assigns to it.

Each pass (every ``interval`` seconds, and at once when a task key changes or a
pipeline ends) reads the tasks from a mirror of the ``task/`` keys
(``cdc.store.mirror``: read once, then kept by a watch), so a pass sends etcd
no request for them; it decodes only the tasks that changed since the last pass
(the mirror's journal) and looks only at their tables and at those whose
pipeline ended, and at every table every ``full_interval`` seconds. What it
does with a table (start, stop, abort, follow a rewritten task, answer a stop)
is decided by ``processor/decisions.py`` from the table's task and pipeline.

``suspend`` (the capture's lease is lost) aborts every pipeline and stops the
passes until ``resume`` (registered again): a capture whose lease expired may
already have lost its tables to others.

The pipelines of one changefeed share one ``SharedStream`` (one binlog reader
and one sink for all its tables here); a stream no running pipeline uses is
closed at the end of the pass, and one that failed (its sink) is replaced for
the pipelines started after it.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from cdc.changefeed import TableRecord, TableState, TableTask
from cdc.config.changefeed import ChangefeedConfig
from cdc.logs import get_logger
from cdc.store import (
    EtcdStore,
    KeyMirror,
    KeyReader,
    MirroredReads,
    ModRevisionIs,
    Put,
    StoreError,
    Versioned,
)
from cdc.store.keys import TaskKey
from processor.barrier_view import BarrierView
from processor.decisions import Act, PipelineView, TaskView, decide, ended_at
from processor.pipeline import Outcome, PipelineContext, PipelineOptions, TablePipeline
from processor.resnapshot import ResnapshotRunner
from processor.shared_stream import SharedStream, StreamOptions
from processor.snapshot_scheduler import SnapshotScheduler
from processor.start_slots import StartSlots
from processor.table_records import RecordWriter, TaskGuard

__all__ = ["Processor"]


@dataclass(frozen=True)
class _Task:
    changefeed_id: str
    table: str
    task: TableTask
    revision: int
    created: int


@dataclass
class _Running:
    pipeline: TablePipeline
    created: int
    stopping: bool = False


class _Held:
    """The tables whose pipelines run here and are not stopping (``in`` only): what a
    re-snapshot may run on, asked without building a set of every table each pass."""

    def __init__(self, running: dict[tuple[str, str], _Running]) -> None:
        self._running = running

    def __contains__(self, where: object) -> bool:
        running = self._running.get(where) if isinstance(where, tuple) else None
        return running is not None and running.pipeline.alive and not running.stopping


class Processor:
    """See the module docstring.

    ``spark(config)`` gives the Spark session for snapshot chunks; ``alive()``
    whether the capture's lease is known alive (pipelines write nothing otherwise);
    ``warm(master)`` starts it early, called when a table that may snapshot starts.
    """

    def __init__(
        self,
        store: EtcdStore,
        capture_id: str,
        spark: Callable[[ChangefeedConfig], Any],
        *,
        options: PipelineOptions | None = None,
        interval: float = 0.5,
        full_interval: float = 10.0,
        alive: Callable[[], bool] = lambda: True,
        warm: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.capture_id = capture_id
        self.spark = spark
        #: Starts the Spark session on a master in the background (``LazySpark.warm``).
        self.warm = warm
        self.alive = alive
        self.options = options or PipelineOptions()
        self.interval = interval
        self.full_interval = full_interval
        self.log = get_logger(__name__, capture=capture_id, role="processor")
        self._running: dict[tuple[str, str], _Running] = {}
        self._ended: dict[tuple[str, str], int] = {}
        self._barriers: dict[str, BarrierView] = {}
        self._streams: dict[str, list[SharedStream]] = {}
        self.snapshots = SnapshotScheduler(
            max_in_flight=self.options.snapshot_in_flight, slots=self.options.snapshot_slots
        )
        #: Source connections of the pipelines starting here (processor/start_slots.py).
        self._starts = StartSlots()
        #: Operators' re-snapshots of the tables running here (``cdcctl changefeed snapshot``).
        self._resnapshots = ResnapshotRunner(
            store, capture_id, self.snapshots, spark, batch_chunks=self.options.batch_chunks
        )
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._active = threading.Event()
        self._lock = threading.Lock()
        self._mirror: KeyMirror | None = None
        self._reads: KeyReader = store
        #: Per task key: its revision and its task if it names this capture, else None.
        self._decoded: dict[str, tuple[int, _Task | None]] = {}
        #: The tasks naming this capture, by (changefeed, table).
        self._view: dict[tuple[str, str], _Task] = {}
        #: Where the task mirror's journal stood at the last read (None: read it whole).
        self._journal_at: int | None = None
        #: When the next pass looks at every table.
        self._full_at = 0.0
        #: Tables whose pipeline's thread ended since the last pass.
        self._ended_now: set[tuple[str, str]] = set()
        self._ended_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="processor", daemon=True)

    # --- life --------------------------------------------------------------------------------

    def start(self, *, active: bool = True) -> None:
        """Starts the passes; with ``active=False`` they wait for ``resume``."""
        if active:
            self._active.set()
        prefix = self.store.keys.prefix_of(TaskKey)
        self._mirror = KeyMirror(self.store, prefix, self._on_task).start()
        self._reads = MirroredReads(self.store, [self._mirror])
        self._resnapshots.start(self._on_task)
        self._thread.start()

    def stop(self) -> None:
        """Stops every pipeline (each reports its final checkpoint) and the passes."""
        self._stop.set()
        self._wake.set()
        if self._mirror is not None:
            self._mirror.close()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            for running in self._running.values():
                running.pipeline.stop()
            for running in self._running.values():
                running.pipeline.join(timeout=30)
            self._running.clear()
            self._close_unused()
        self._resnapshots.close()
        self.snapshots.close()

    def suspend(self) -> None:
        """The capture's lease is lost: abort every pipeline now, pause the passes."""
        self._active.clear()
        with self._lock:
            for running in self._running.values():
                running.pipeline.abort()
            self._resnapshots.stop_all()
            if self._running:
                self.log.warning("lease lost: aborted %d table pipelines", len(self._running))
            self._ended.clear()

    def resume(self) -> None:
        """Registered again: the next pass starts what the tasks say (every table's)."""
        self._full_at = 0.0
        self._active.set()
        self._wake.set()

    def tables(self) -> dict[tuple[str, str], TablePipeline]:
        """The pipelines running here, by (changefeed, table)."""
        with self._lock:
            return {k: r.pipeline for k, r in self._running.items() if r.pipeline.alive}

    def streams(self) -> dict[str, list[SharedStream]]:
        """The changefeeds' shared streams open here (one, or two while a failed one's
        tables end), by changefeed id."""
        with self._lock:
            return {cf: list(streams) for cf, streams in self._streams.items()}

    def _on_task(self, _key: str) -> None:
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set() or not self._active.is_set():
                continue
            try:
                with self._lock:
                    self._pass()
            except StoreError as exc:
                self._look_at_all()
                self.log.error("processor pass: etcd error, retrying: %s", exc)
            except Exception:
                self._look_at_all()
                self.log.exception("processor pass failed, retrying")

    def _look_at_all(self) -> None:
        """After a failed pass: the next one reads every task and looks at every table
        (which of the changes it took in it acted on is unknown)."""
        self._journal_at = None
        self._full_at = 0.0

    # --- one pass ------------------------------------------------------------------------------

    def _mine(self, item: Versioned) -> _Task | None:
        task = TableTask.from_dict(item.json())
        if task.capture_id != self.capture_id:
            return None
        key = self.store.keys.parse(item.key, TaskKey)
        return _Task(key.changefeed_id, key.table, task, item.mod_revision, item.create_revision)

    def _decode(self, key: str, item: Versioned | None) -> tuple[str, str]:
        """Takes in the task key's change; the table it names."""
        parsed = self.store.keys.parse(key, TaskKey)
        where = (parsed.changefeed_id, parsed.table)
        cached = self._decoded.get(key)
        if item is None:
            self._decoded.pop(key, None)
            self._view.pop(where, None)
            return where
        if cached is None or cached[0] != item.mod_revision:
            cached = (item.mod_revision, self._mine(item))
            self._decoded[key] = cached
        if cached[1] is None:
            self._view.pop(where, None)
        else:
            self._view[where] = cached[1]
        return where

    def _read_tasks(self) -> set[tuple[str, str]] | None:
        """Brings the view of the tasks up to date; the tables whose task changed since
        the last read, or None when the prefix was read whole (the journal of the task
        mirror dropped changes, or none was read yet): then look at every table."""
        prefix = self.store.keys.prefix_of(TaskKey)
        if self._journal_at is not None:
            changes = self._reads.changes_since(prefix, self._journal_at)
            if changes is not None:
                self._journal_at = changes.end
                return {self._decode(key, self._reads.get(key)) for key in set(changes.keys)}
        self._journal_at = self._reads.journal_position(prefix)
        items = self._reads.get_prefix(prefix)
        seen = {item.key for item in items}
        for key in [k for k in self._decoded if k not in seen]:
            self._decode(key, None)
        for item in items:
            self._decode(item.key, item)
        return None

    def _on_end(self, where: tuple[str, str]) -> None:
        """A pipeline's thread ends: the next pass looks at its table."""
        with self._ended_lock:
            self._ended_now.add(where)
        self._wake.set()

    def _pass(self) -> None:
        """Looks at the tables whose task changed or whose pipeline ended since the last
        pass, and at every table every ``full_interval`` seconds (a start that found no
        changefeed, a stop answer that etcd refused) and after a failed pass: a pass
        costs what changed, not the number of tables (10,000 tables on three captures
        spent most of a capture's interpreter on passes over all of them)."""
        changed = self._read_tasks()
        with self._ended_lock:
            ended, self._ended_now = self._ended_now, set()
        now = time.monotonic()
        if changed is None or now >= self._full_at:
            self._full_at = now + self.full_interval
            look = set(self._running) | set(self._view)
        else:
            look = changed | ended
        configs: dict[str, ChangefeedConfig | None] = {}
        left = False
        for key in look:
            left |= self._visit(key, configs)
        if left:
            self._close_unused()
        self._resnapshots.tick(_Held(self._running))

    def _visit(self, key: tuple[str, str], configs: dict[str, ChangefeedConfig | None]) -> bool:
        """Carries out ``processor.decisions.decide`` for one table; whether a pipeline
        left (its thread ended)."""
        entry = self._view.get(key)
        running = self._running.get(key)
        left = False
        if running is not None and not running.pipeline.alive:
            pipeline = running.pipeline
            outcome = pipeline.outcome
            at = ended_at(
                outcome in (Outcome.ERROR, Outcome.FINISHED),
                pipeline.guard.revision,
                pipeline.moved_on_from,
            )
            if at is not None:
                self._ended[key] = at
            del self._running[key]
            running, left = None, True
            how = outcome.value if outcome is not None else "without an outcome"
            self.log.info("table %s/%s ended: %s", key[0], key[1], how)
        task = None if entry is None else TaskView(entry.task.state, entry.revision, entry.created)
        view = None if running is None else PipelineView(running.created, running.stopping)
        act = decide(task, view, self._ended.get(key))
        if act is Act.ABORT:
            assert running is not None
            running.pipeline.abort()
        elif act is Act.STOP or act is Act.FOLLOW:
            assert running is not None and entry is not None
            running.pipeline.guard.move(entry.revision)
            if act is Act.STOP:
                running.pipeline.stop()
                running.stopping = True
        elif act is Act.START:
            assert entry is not None
            self._start(entry, configs)
        elif act is Act.ANSWER_STOP:
            assert entry is not None
            self._report_stopped(entry)
        return left

    def _start(self, entry: _Task, configs: dict[str, ChangefeedConfig | None]) -> None:
        """Starts the table's pipeline; ``configs``: the changefeeds' configs read in this
        pass (each read once however many of its tables start)."""
        if entry.changefeed_id not in configs:
            info = self.store.get(self.store.keys.changefeed_info(entry.changefeed_id))
            configs[entry.changefeed_id] = (
                None if info is None else ChangefeedConfig.from_dict(info.json())
            )
        config = configs[entry.changefeed_id]
        if config is None:
            return
        records = RecordWriter(
            self.store, entry.changefeed_id, entry.table, self.capture_id, TaskGuard(entry.revision)
        )
        context = PipelineContext(
            self.store,
            config,
            records,
            self._stream(config),
            lambda: self.spark(config),
            self.options,
            self.alive,
            self.snapshots,
            self._starts,
            on_end=functools.partial(self._on_end, (entry.changefeed_id, entry.table)),
        )
        pipeline = TablePipeline(context, entry.table, entry.task)
        if self.warm is not None and pipeline.may_snapshot:
            self.warm(config.spark_master)  # while the table anchors and plans
        self._running[(entry.changefeed_id, entry.table)] = _Running(
            pipeline.start(), entry.created
        )
        self.log.info("table %s/%s started", entry.changefeed_id, entry.table)

    def _report_stopped(self, entry: _Task) -> None:
        keys = self.store.keys
        key = keys.table_checkpoint(entry.changefeed_id, entry.table)
        item = self.store.get(key)
        old = TableRecord.from_dict(item.json()) if item is not None else None
        if old is not None and old.answers(entry.revision):
            return
        if old is None:
            record = TableRecord(self.capture_id, TableState.STOPPED, entry.revision)
        elif old.state is TableState.ERROR:
            # A failed table answers the stop as it failed: `changefeed query` keeps
            # showing which table failed and why until the table runs again.
            record = replace(
                old,
                capture_id=self.capture_id,
                task_revision=entry.revision,
                updated_at=time.time(),
            )
        else:
            record = replace(
                old,
                capture_id=self.capture_id,
                state=TableState.STOPPED,
                task_revision=entry.revision,
                error=None,
                permanent=False,
                updated_at=time.time(),
            )
        task_key = keys.task(entry.changefeed_id, entry.table)
        self.store.txn([ModRevisionIs(task_key, entry.revision)], [Put(key, record.to_dict())])

    def _stream(self, config: ChangefeedConfig) -> SharedStream:
        """The changefeed's stream on this capture for a pipeline starting now."""
        cf = config.changefeed_id
        streams = self._streams.setdefault(cf, [])
        for stream in streams:
            # a table added by new table rules joins the stream the others read: the stream
            # reads no table rules (it holds the tables its pipelines give it)
            if stream.usable and (
                stream.config == config or not stream.config.other_changes(config)
            ):
                return stream
        view = self._barriers.get(cf)
        if view is None:
            view = self._barriers[cf] = BarrierView(self.store, cf)
        options = StreamOptions(self.options.checkpoint_interval)
        stream = SharedStream(
            self.store, config, view, self.alive, options, capture_id=self.capture_id
        )
        streams.append(stream)
        return stream

    def _close_unused(self) -> None:
        """Closes the streams (and barrier views) no running pipeline uses."""
        used = {id(r.pipeline.stream) for r in self._running.values()}
        for cf, streams in list(self._streams.items()):
            for stream in [s for s in streams if id(s) not in used]:
                streams.remove(stream)
                stream.close()
            if not streams:
                del self._streams[cf]
        for cf in [cf for cf in self._barriers if cf not in self._streams]:
            self._barriers.pop(cf).close()
