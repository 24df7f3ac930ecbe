"""One changefeed, driven by the owner one cycle at a time.

``ChangefeedOwner.tick`` reads the changefeed's tables (from the owner's
mirrors), asks ``decisions.decide`` what this cycle does, and does it::

    INITIALIZE    start point and tables (initial.py); tasks created unassigned
    TABLE_ERROR,  state error (retry with backoff) or failed (retry.py)
    PULLER_ERROR
    ADVANCE       1. checkpoint = min(table checkpoints), capped by the barrier
                     (decisions.checkpoint_to_save), persisted if it advanced
                  2. barrier (decisions.barrier_step, ddl.py): the checkpoint reached
                     the next DDL's limit ──► apply it, follow its tables, record it,
                     move the barrier on; the target position, or a finished
                     snapshot-only run ──► state finished
                  3. schedule (scheduler.py): assign, reassign, move, balance
    RETRY         state normal (the next cycle starts again)
    HOLD          tables stopped (error before its retry time, stopped, failed, finished)

Every write is the owner's: fenced, and bound to the changefeed's incarnation.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from cdc.changefeed import (
    Barrier,
    BarrierDdl,
    Changefeed,
    ChangefeedState,
    ChangefeedStatus,
    ChangefeedStore,
    ErrorInfo,
    SkippedDdl,
    TableEntry,
    TableReader,
    TableTask,
    TaskState,
    is_permanent,
)
from cdc.changefeed.failover import follow_source
from cdc.changefeed.table_update import (
    BACKFILL,
    TablesUpdate,
    TablesUpdateResult,
    held_back,
)
from cdc.config.changefeed import ChangefeedConfig, SnapshotMode
from cdc.filter.event_filter import EventFilter
from cdc.filter.table_filter import TableFilter
from cdc.logs import get_logger
from cdc.metrics import ERRORS
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.kind import CheckpointWriter
from cdc.sink.registry import kind_of
from cdc.snapshot.records import ChunkRecord, settled_at
from cdc.source.checks import ChangesUnavailable
from cdc.store import EtcdStore, Fence, KeyReader, ModRevisionIs, Put, StoreError
from cdc.store.keys import SnapshotChunkKey, StreamProgressKey
from owner.ddl import (
    DdlRefused,
    anchored_tables,
    apply_downstream,
    carry_out,
    decision_for,
    new_tasks,
    table_effects,
)
from owner.ddl_tracker import DdlTracker, PendingDdl
from owner.decisions import (
    BarrierStep,
    CycleView,
    Step,
    barrier_step,
    checkpoint_to_save,
    decide,
    snapshot_done,
    unsettled,
)
from owner.initial import plan_initial
from owner.removals import Removals
from owner.retry import RetryPolicy, record_error
from owner.scheduler import Stop, schedule
from owner.table_update import CATCH_UP_SECONDS, StillRemoving, apply_tables_update
from owner.tables import TaskWriter

__all__ = ["ChangefeedOwner", "OwnerOptions"]


@dataclass(frozen=True)
class OwnerOptions:
    """How the owner paces itself; tests shorten these."""

    cycle_interval: float = 1.0
    #: The least time from one cycle's start to the next woken one.
    min_cycle_gap: float = 0.05
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    barrier_interval: float = 0.2
    #: Moves under way at once when balancing. A move pauses its table only for the stop
    #: and the start (tables share their capture's stream: joining costs no reader of its
    #: own), so a capture joining 10,000 tables takes its share in rounds of this many,
    #: not one table at a time (bench/control_plane_bench.py). TiCDC's max-task-concurrency
    #: defaults to 10.
    max_moving: int = 256


class ChangefeedOwner:
    """The owner's side of one changefeed incarnation (see the module docstring)."""

    def __init__(
        self,
        store: EtcdStore,
        fence: Fence,
        changefeed: Changefeed,
        options: OwnerOptions,
        reads: KeyReader | None = None,
    ) -> None:
        self.store = store
        #: Where the cycle reads tasks and records: the owner's mirrors (no request).
        self.reads: KeyReader = reads if reads is not None else store
        self.tables = TableReader(self.reads, changefeed.changefeed_id)
        self.fence = fence
        self.options = options
        self.changefeed_id = changefeed.changefeed_id
        self.created = changefeed.created
        self.feeds = ChangefeedStore(store)
        self.writer = TaskWriter(store, fence, changefeed)
        self.log = get_logger(__name__, changefeed=self.changefeed_id, role="owner")
        self.removals = Removals(store, fence, self.changefeed_id, self.writer, self.log)
        self.tracker: DdlTracker | None = None
        #: Where new checkpoints are announced downstream (Kafka watermarks), once asked.
        self.announcer: CheckpointWriter | None = None
        self._announced: Position | None = None
        self._settled: tuple[int, frozenset[str], bool] | None = None

    def close(self) -> None:
        self._stop_tracker()
        if self.announcer is not None:
            self.announcer.close()
            self.announcer = None

    # --- the cycle -------------------------------------------------------------------------

    def tick(self, cf: Changefeed, captures: set[str]) -> str:
        """One cycle for this changefeed; a short status for the owner's line."""
        now = time.time()
        state = cf.status.state
        if state is ChangefeedState.NORMAL:
            try:
                return self._run(cf, captures)
            except StoreError:
                raise
            except DdlRefused as exc:  # stops at the DDL, for the operator to decide
                self.log.error("changefeed stopped at a DDL: %s", exc)
                error = ErrorInfo(
                    str(exc), now, None, is_permanent(exc.cause), BarrierDdl.of(exc.ddl)
                )
                self._error(error, "owner")
                return "error ddl"
            except Exception as exc:  # becomes the changefeed's error state
                self.log.exception("changefeed failed in the owner")
                error = ErrorInfo(f"{type(exc).__name__}: {exc}", now, None, is_permanent(exc))
                self._error(error, "owner")
                return "error"
        self._stop_tracker()
        tables = self.tables.read()
        if cf.status.tables_update is not None and state is ChangefeedState.STOPPED:
            return self._update_tables(cf, tables, captures, running=False)
        step = decide(self._view(cf, tables, captures, now)).step
        if step is Step.RETRY:
            self._retry()
            return "retrying"
        self.removals.finish(self.tables.removing, captures)
        self._act(cf, tables, captures, running=False)
        if state is ChangefeedState.ERROR and cf.status.retry_at is not None:
            return f"error retry-in={cf.status.retry_at - now:.1f}s"
        return state.value

    def _forget_dead_readers(self, captures: set[str]) -> None:
        """Removes the progress keys of captures that are gone: their readers died with
        them (a reader removes its own key when it ends), and their tables go to other
        captures, which answer with records of their own."""
        for capture in self.tables.reporting_captures - captures:
            prefix = self.store.keys.prefix_of(StreamProgressKey, self.changefeed_id, capture)
            self.store.delete_prefix(prefix)
            self.log.info("progress keys of the gone capture %s removed", capture)

    def _view(
        self, cf: Changefeed, tables: Mapping[str, TableEntry], captures: set[str], now: float
    ) -> CycleView:
        tracker = self.tracker
        return CycleView(
            state=cf.status.state,
            started=cf.status.start is not None,
            retry_at=cf.status.retry_at,
            now=now,
            failed=self.tables.failed if tables else {},
            live_captures=frozenset(captures),
            puller_failed=tracker is not None and tracker.error is not None,
        )

    def _run(self, cf: Changefeed, captures: set[str]) -> str:
        config = cf.config
        now = time.time()
        tables = self.tables.read() if cf.status.start is not None else {}
        decision = decide(self._view(cf, tables, captures, now))
        if decision.step is Step.INITIALIZE:
            return self._initialize(cf)
        if decision.step is Step.TABLE_ERROR:
            assert decision.table is not None
            entry = tables[decision.table]
            assert entry.record is not None
            self._error(
                ErrorInfo(
                    entry.record.error or "table pipeline failed",
                    now,
                    entry.table,
                    entry.record.permanent,
                ),
                "table",
            )
            return f"error table={entry.table}"
        if decision.step is Step.PULLER_ERROR:
            assert self.tracker is not None and self.tracker.error is not None
            error = self.tracker.error
            self._error(
                ErrorInfo(
                    f"DDL puller: {type(error).__name__}: {error}",
                    now,
                    None,
                    is_permanent(error),
                ),
                "ddl_puller",
            )
            return "error ddl-puller"
        if cf.status.tables_update is not None:
            return self._update_tables(cf, tables, captures, running=True)
        self._forget_dead_readers(captures)
        tracker = self._ensure_tracker(cf)
        if tracker is not None:
            tracker.refresh()
        barrier = tracker.barrier() if tracker is not None else None
        reader = self.tables
        checkpoint, to_save = checkpoint_to_save(
            reader.lowest_checkpoint(),
            barrier,
            has_tasks=reader.has_tasks,
            unsettled=reader.unsettled,
            tracked=tracker is not None,
        )
        saved = self._save_progress(cf, to_save, tracker)
        self._announce(cf, saved, tables)
        if tracker is not None and checkpoint is not None:
            finished, changed = self._barrier_step(cf, tables, tracker, checkpoint)
            if finished:
                return "finished"
            if changed:
                tables = self.tables.read()
        if config.snapshot_mode is SnapshotMode.SNAPSHOT_ONLY and snapshot_done(tables):
            self._finish()
            return "finished"
        self.removals.finish(self.tables.removing, captures)
        self._act(cf, tables, captures, running=True)
        barrier = tracker.barrier() if tracker is not None else None
        return f"normal tables={len(tables)} checkpoint={checkpoint or '-'}" + (
            f" barrier={barrier.kind.value}@{barrier.limit}" if barrier else ""
        )

    # --- start --------------------------------------------------------------------------------

    def _initialize(self, cf: Changefeed) -> str:
        plan = plan_initial(cf.config)
        for table, task in plan.tasks.items():
            self.writer.create(table, task)
        never = cf.config.snapshot_mode is SnapshotMode.NEVER
        checkpoint = plan.start if never and isinstance(plan.start, Position) else None

        def start(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.start is not None or status.state is not ChangefeedState.NORMAL:
                return status
            return status.changed(start=plan.start, checkpoint=checkpoint)

        self.feeds.update_status(self.changefeed_id, start, fence=self.fence)
        self.log.info("changefeed starts at %s with %d tables", plan.start, len(plan.tasks))
        return f"initialized tables={len(plan.tasks)}"

    def _ensure_tracker(self, cf: Changefeed) -> DdlTracker | None:
        if cf.config.snapshot_mode is SnapshotMode.SNAPSHOT_ONLY:
            return None
        if self.tracker is not None:
            return self.tracker
        status = cf.status
        start = status.checkpoint or status.start
        assert start is not None
        stored = self.store.get(self.store.keys.barrier(self.changefeed_id))
        floor = Barrier.from_dict(stored.json()).limit if stored is not None else None
        pending = status.tables_update
        # A tables update whose position is decided: the old rules up to it, not past it.
        planned = pending.planned if pending is not None else None
        self.tracker = DdlTracker(
            cf.config if pending is None else pending.tracked(cf.config),
            start,
            status.ddl_position,
            floor,
            self._publish,
            interval=self.options.barrier_interval,
            identify=partial(follow_source, self.store, self.changefeed_id, fence=self.fence),
            stop_at=planned.position if planned is not None else None,
        ).start_thread()
        return self.tracker

    def _publish(self, barrier: Barrier) -> None:
        self.writer.put_barrier(barrier.to_dict())

    def _stop_tracker(self) -> None:
        tracker, self.tracker = self.tracker, None
        if tracker is not None:
            tracker.close()

    # --- status ---------------------------------------------------------------------------

    def _error(self, error: ErrorInfo, kind: str) -> None:
        """State error (or failed) with ``error``; ``kind`` says where it came from (metrics)."""
        policy, now = self.options.retry, time.time()
        self._stop_tracker()

        def fail(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.state is not ChangefeedState.NORMAL:
                return status
            return record_error(status, error, policy, now)

        status = self.feeds.update_status(self.changefeed_id, fail, fence=self.fence)
        if status is not None:
            ERRORS.labels(self.changefeed_id, kind).inc()
            self.log.error(
                "changefeed %s: %s%s",
                status.state.value,
                error.message,
                f" (retry at {time.strftime('%H:%M:%S', time.localtime(status.retry_at))})"
                if status.retry_at
                else "",
            )

    def _retry(self) -> None:
        def retry(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.state is not ChangefeedState.ERROR:
                return status
            return status.changed(state=ChangefeedState.NORMAL, retry_at=None)

        self.feeds.update_status(self.changefeed_id, retry, fence=self.fence)
        self.log.info("retrying after error")

    def _finish(self) -> None:
        self._stop_tracker()

        def finish(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.state is not ChangefeedState.NORMAL:
                return status
            return status.changed(state=ChangefeedState.FINISHED)

        self.feeds.update_status(self.changefeed_id, finish, fence=self.fence)
        self.log.info("changefeed finished")

    def _save_progress(
        self, cf: Changefeed, checkpoint: Position | None, tracker: DdlTracker | None
    ) -> Position | None:
        """Persists the checkpoint and resolved position where they advanced past ``cf``'s
        (the status this cycle read from the watched view: a cycle in which neither moved
        sends etcd nothing); the checkpoint persisted now."""
        resolved = tracker.resolved if tracker is not None else None

        def advance(status: ChangefeedStatus) -> ChangefeedStatus:
            changes: dict[str, Position] = {}
            if checkpoint is not None and (
                status.checkpoint is None or checkpoint.key() > status.checkpoint.key()
            ):
                changes["checkpoint"] = checkpoint
            if resolved is not None and (
                status.resolved is None or resolved.key() > status.resolved.key()
            ):
                changes["resolved"] = resolved
            return status.changed(**changes) if changes else status

        status = self.feeds.update_status_from(cf, advance, fence=self.fence)
        return status.checkpoint if status is not None else None

    def _announce(
        self, cf: Changefeed, checkpoint: Position | None, tables: Mapping[str, TableEntry]
    ) -> None:
        """Hands a persisted checkpoint that advanced to the sink kind's announcer: every
        change up to it is durable in the sink (a Kafka sink writes it as a watermark)."""
        if checkpoint is None or (
            self._announced is not None and checkpoint.key() <= self._announced.key()
        ):
            return
        uri = cf.config.sink_uri
        if self.announcer is None:
            self.announcer = kind_of(uri).checkpoint_writer(uri, self.changefeed_id)
            if self.announcer is None:
                self._announced = checkpoint
                return
        self.announcer.write(checkpoint, [TableName.parse(t) for t in tables])
        self._announced = checkpoint

    # --- new table rules (owner/table_update.py) --------------------------------------------

    def _update_tables(
        self,
        cf: Changefeed,
        tables: Mapping[str, TableEntry],
        captures: set[str],
        *,
        running: bool,
    ) -> str:
        """Applies the pending update of the table rules; the tables that stay are not
        touched. A refusal puts the old rules back into the config. The plan (position,
        tables added and removed) is stored with the tasks of the tables added without
        backfill before any other write, and an update whose plan is stored is finished
        as planned (owner/table_update.py, an owner's death at each step)."""
        # The mirrors of info and status follow two watches: the status (the pending
        # update) may be seen before the info (the new rules) written with it, and an
        # update applied with the old rules adds nothing. One read of both at one revision.
        cf = self.feeds.get(cf.changefeed_id)
        update = cf.status.tables_update
        if update is None:
            return "tables update: already applied"
        if cf.status.start is None:  # not listed yet: the first listing takes the new rules
            self._record_update(update, TablesUpdateResult(update.id, None))
            return "tables update: the first listing takes the new rules"
        planned = update.planned
        tracker = self.tracker
        if planned is not None and tracker is not None and tracker.stop_at != planned.position:
            self._stop_tracker()  # made before the plan was stored: it would pass P
        stop, old = None, None
        if running and cf.config.snapshot_mode is not SnapshotMode.SNAPSHOT_ONLY:
            old = self._ensure_tracker(cf)
            stop = partial(self._stop_puller_past, old)
        try:
            if planned is None:
                applied = apply_tables_update(
                    update,
                    cf.config,
                    list(_scheduled(tables)),
                    stop,
                    self.log,
                    cf.status.removed_at,
                    self.tables.removing,
                    partial(_created_by_ddl, old, cf.config, tables),
                )
            elif stop is not None and planned.position is not None:
                # the plan of an owner before this one: the old rules up to its position
                stop(planned.position)
        except _PullerBehind as exc:
            self.log.info("tables update waits: %s", exc)
            return "tables update waiting for the DDL puller"
        except StillRemoving as exc:
            self.log.info("tables update waits: %s", exc)
            self.removals.finish(self.tables.removing, captures)
            return "tables update waiting for a removal"
        if planned is None:
            result = applied.result
            if result.error is not None:
                self._refuse_update(cf, update, result)
                self._follow_on(old, update.tracked(cf.config))
                return "tables update refused"
            streamed = {t: task for t, task in applied.tasks.items() if task.start is not None}
            if not self._store_plan(cf, update, result, streamed):
                # the status changed meanwhile (a pause, a resume): computed again next
                # cycle, the DDL puller on the old rules from the checkpoint again
                return "tables update: the status changed meanwhile, tried again"
            planned = result
        else:
            self.log.info("tables update %s: finishing the stored plan", update.id)
        if not self.removals.mark(planned.removed, tables):
            return "tables update: a removed table's task kept changing, tried again"
        for table, how in planned.added.items():
            if how == BACKFILL:
                self.writer.create(table, TableTask("", TaskState.STOP))
        self._record_update(update, planned)
        self._follow_on(old, cf.config)
        self._settled = None
        return "tables updated"

    def _store_plan(
        self,
        cf: Changefeed,
        update: TablesUpdate,
        planned: TablesUpdateResult,
        streamed: Mapping[str, TableTask],
    ) -> bool:
        """Step 6 of owner/table_update.py: ``planned`` stored in the pending update and the
        tasks of the tables added without backfill created, in one transaction on the
        status as read now; False (nothing written) if it changed meanwhile."""
        now = self.feeds.get(cf.changefeed_id)
        pending = now.status.tables_update
        if pending is None or pending.id != update.id or pending.planned is not None:
            return False
        status = now.status.changed(tables_update=pending.with_plan(planned))
        status_key = self.store.keys.changefeed_status(cf.changefeed_id)
        return self.writer.create_all(
            streamed,
            ModRevisionIs(status_key, now.status_revision),
            Put(status_key, status.to_dict()),
        )

    def _follow_on(self, old: DdlTracker | None, config: ChangefeedConfig) -> None:
        """The DDL puller by ``config``'s rules after an update: the stopped one's successor,
        from where it stood; else (none stopped, a target position) the next cycle makes
        one from the checkpoint."""
        if old is None or old.alive:
            return
        successor = old.successor(config)
        if successor is not None:
            self.tracker = successor.start_thread()

    def _stop_puller_past(self, tracker: DdlTracker | None, position: Position) -> Position:
        """Waits until the DDL puller has read past ``position``, stops it, and returns where
        it stood (``_PullerBehind`` when it does not get there in time)."""
        if tracker is None:
            return position
        deadline = time.monotonic() + CATCH_UP_SECONDS
        while True:
            if tracker.error is not None:
                raise tracker.error
            resolved = tracker.resolved
            if resolved is not None and resolved.key() >= position.key():
                break
            if time.monotonic() > deadline:
                raise _PullerBehind(f"the DDL puller stands at {resolved}, before {position}")
            time.sleep(0.05)
        self._stop_tracker()
        stood = tracker.resolved
        assert stood is not None
        return stood

    def _record_update(self, update: TablesUpdate, result: TablesUpdateResult) -> None:
        def record(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.tables_update is None or status.tables_update.id != update.id:
                return status
            removed_at = held_back(status.removed_at, (), time.time())
            return status.changed(
                tables_update=None, last_tables_update=result, removed_at=removed_at
            )

        self.feeds.update_status(self.changefeed_id, record, fence=self.fence)
        self.log.info("%s", result.summary())

    def _refuse_update(
        self, cf: Changefeed, update: TablesUpdate, result: TablesUpdateResult
    ) -> None:
        """Puts the rules the changefeed had back into its config and records the refusal,
        in one transaction on the keys as read now (a user's write in between makes the
        next cycle try again). A DDL puller still running follows the old rules already."""
        keys = self.store.keys
        info_key = keys.changefeed_info(cf.changefeed_id)
        status_key = keys.changefeed_status(cf.changefeed_id)
        now = self.feeds.get(cf.changefeed_id)
        pending = now.status.tables_update
        if pending is None or pending.id != update.id:
            return
        config = replace(now.config, rules=update.old_rules)
        status = now.status.changed(tables_update=None, last_tables_update=result)
        done = self.store.txn(
            [
                ModRevisionIs(info_key, now.info_revision),
                ModRevisionIs(status_key, now.status_revision),
            ],
            [Put(info_key, config.to_dict(mask=False)), Put(status_key, status.to_dict())],
            fence=self.fence,
        )
        if done:
            self.log.warning(
                "%s; the rules are back to %s", result.summary(), list(update.old_rules)
            )

    # --- the barrier ------------------------------------------------------------------------

    def _barrier_step(
        self,
        cf: Changefeed,
        tables: Mapping[str, TableEntry],
        tracker: DdlTracker,
        checkpoint: Position,
    ) -> tuple[bool, bool]:
        """Handles the DDL whose limit the checkpoint reached; (finished, tables changed)."""
        pending = tracker.next()
        step = barrier_step(
            checkpoint,
            pending.limit if pending is not None else None,
            is_ddl=pending is not None and pending.ddl is not None,
            recorded=self.tables.lowest_recorded() if self.tables.has_tasks else checkpoint,
        )
        if step is BarrierStep.WAIT or pending is None:
            return False, False
        if step is BarrierStep.FINISH:
            _check_settled(tables)
            self._finish()
            return True, False
        changed = self._handle_ddl(cf, tables, pending)
        tracker.done(pending)
        return False, changed

    def _handle_ddl(
        self, cf: Changefeed, tables: Mapping[str, TableEntry], pending: PendingDdl
    ) -> bool:
        ddl = pending.ddl
        assert ddl is not None
        config = cf.config
        log = self.log.bind(ddl_position=str(ddl.position))
        # A DDL replayed late by a deposed owner could undo a later one: prove the term first.
        self.store.txn([], [], fence=self.fence)
        skipped: SkippedDdl | None = None
        anchored = anchored_tables(ddl, {t: e.record for t, e in tables.items()}, _starts(tables))
        if anchored:
            log.info(
                "%s at %s is already in the downstream table(s) %s: their snapshot read the "
                "schema after it",
                ddl.kind.value,
                ddl.position,
                ", ".join(anchored),
            )
        elif (decision := decision_for(cf.status.ddl_decision, ddl)) is not None:
            skipped = carry_out(config, ddl, decision, log)
        else:
            events = EventFilter(config.event_filters, config.case_sensitive)
            try:
                skipped = apply_downstream(config, ddl, events, log)
            except Exception as exc:
                raise DdlRefused(self.changefeed_id, ddl, exc) from exc
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        effects = table_effects(
            ddl, {t for t, e in tables.items() if e.task is not None}, rules.matches
        )
        if effects:
            known = _known_schemas(tables.values())
            unsettled = frozenset(
                origin
                for origin in set(effects.created.values()) & set(tables)
                if not self._snapshot_settled(tables[origin], ddl.position)
            )
            tasks = new_tasks(ddl, effects, known, config, log, unsettled)
            self.writer.remove(effects.dropped)
            for table, task in tasks.items():
                self.writer.create(table, task)
            log.info(
                "tables after %s: dropped %s, added %s",
                ddl.kind.value,
                ", ".join(effects.dropped) or "none",
                ", ".join(tasks) or "none",
            )
        self._record_ddl(ddl.position, skipped)
        return bool(effects)

    def _snapshot_settled(self, entry: TableEntry, position: Position) -> bool:
        """Whether the table's snapshot (if it had one) read every chunk before a DDL of
        it at ``position``: its record is not waiting to read chunks again, and every chunk
        is done with a high watermark before the DDL. A chunk read after a rename swap
        holds the other table's rows, so a renamed table that is not settled is
        snapshotted again (docs/ddl-during-snapshot.md)."""
        record = entry.record
        if record is not None and (
            record.pending_until is not None or record.reread_from is not None
        ):
            return False
        prefix = self.store.keys.prefix_of(SnapshotChunkKey, self.changefeed_id, entry.table)
        chunks = [ChunkRecord.from_dict(item.json()) for item in self.store.get_prefix(prefix)]
        return settled_at(chunks, position)

    def _record_ddl(self, position: Position, skipped: SkippedDdl | None) -> None:
        """Records the DDL at ``position`` done (applied, or skipped with ``skipped``); an
        operator's decision about it is carried out and goes."""

        def record(status: ChangefeedStatus) -> ChangefeedStatus:
            if status.ddl_position is not None and status.ddl_position.key() >= position.key():
                return status
            decision = status.ddl_decision
            if decision is not None and decision.position.key() <= position.key():
                status = status.changed(ddl_decision=None)
            if skipped is not None:
                return status.with_skipped(skipped).changed(ddl_position=position)
            return status.changed(ddl_position=position, schema_version=status.schema_version + 1)

        self.feeds.update_status(self.changefeed_id, record, fence=self.fence)

    # --- scheduling ------------------------------------------------------------------------

    def _act(
        self, cf: Changefeed, tables: Mapping[str, TableEntry], captures: set[str], *, running: bool
    ) -> None:
        """Schedules; nothing to do while tasks, records, captures and state are what they
        were when the last schedule found nothing to do (the table reader's ``version``
        stands still while no task changed and no record answers its task differently):
        at steady state a cycle then costs nothing per table here."""
        settled = (self.tables.version, frozenset(captures), running)
        if settled == self._settled:
            return
        self._settled = None
        tasks = _scheduled(tables)
        views = {t: e.view() for t, e in tasks.items()}
        actions = schedule(
            list(tasks),
            views,
            captures,
            running=running,
            max_moving=self.options.max_moving,
            together=kind_of(cf.config.sink_uri).one_writer,
        )
        if not actions:
            self._settled = settled
            return
        changes: list[tuple[str, TableTask, int]] = []
        said: dict[str, str] = {}
        for action in actions:
            entry = tasks.get(action.table)
            if entry is None or entry.task is None:
                continue
            if isinstance(action, Stop):
                task = entry.task.stop(action.move_to)
                what = f"stop (move to {action.move_to})" if action.move_to else "stop"
            else:
                task = entry.task.run_on(action.capture_id)
                what = f"run on {action.capture_id}"
            changes.append((action.table, task, entry.task_revision))
            said[action.table] = what
        for table in self.writer.replace_all(changes):
            self.log.info("table %s: %s", table, said[table])


def _starts(tables: Mapping[str, TableEntry]) -> dict[str, Position]:
    """The tables whose task starts at a position with the schema there (no snapshot)."""
    return {
        t: e.task.start
        for t, e in tables.items()
        if e.task is not None and isinstance(e.task.start, Position) and e.task.schema is not None
    }


def _created_by_ddl(
    tracker: DdlTracker | None, config: ChangefeedConfig, tables: Mapping[str, TableEntry]
) -> set[str]:
    """The tables the stopped DDL puller's pending DDL create under ``config``'s rules."""
    if tracker is None:
        return set()
    return tracker.tables_created(config, list(_scheduled(tables)))


def _scheduled(tables: Mapping[str, TableEntry]) -> dict[str, TableEntry]:
    """The entries with a task that counts: every task but those removing their table."""
    return {t: e for t, e in tables.items() if e.task is not None and not e.task.removing}


class _PullerBehind(Exception):
    """The DDL puller did not read past the update's position in time (tried again)."""


def _check_settled(tables: Mapping[str, TableEntry]) -> None:
    """Fails closed at the target position while a table's snapshot still has chunks to
    read: they wait for a DDL after the target, which this changefeed never reaches."""
    waiting = sorted(t for t, e in tables.items() if unsettled(e))
    if waiting:
        raise ChangesUnavailable(
            f"the changefeed reached its target position, but the snapshot of "
            f"{', '.join(waiting[:5])} still has chunks to read again after a DDL of the "
            "table that lies beyond the target; create the changefeed again with a later "
            "target-position, or without one"
        )


def _known_schemas(entries: Iterable[TableEntry]) -> dict[TableName, TableSchema]:
    known = {}
    for entry in entries:
        schema = entry.record.schema if entry.record is not None else None
        if schema is None and entry.task is not None:
            schema = entry.task.schema
        if schema is not None:
            known[schema.name] = schema
    return known
