"""A tables update survives the owner's death at each step (owner/table_update.py).

Found by review: the owner picked the update's position P1, created the task of a
table added without backfill (start P1) and died before recording the result. The
next owner's DDL puller followed the old rules from the checkpoint, so it ignored
that table; a DDL of it after P1 then passed unseen: the retry found the table's
task, added nothing, recorded a later position P2 and started the puller on the new
rules at P2. No puller ever read the DDL: never applied downstream, never in the
barrier, and the result left the table out.

Here the binlog is a script read by the real ``DdlTracker`` (its puller replaced:
DDL of tables its rules do not match are not delivered, as the puller filters them),
etcd an in-memory store, and an owner dies by an exception at one write."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from cdc.binlog.readahead import Resolved
from cdc.changefeed import (
    Changefeed,
    ChangefeedState,
    ChangefeedStore,
    TableRecord,
    TableState,
    TableTask,
    TaskState,
)
from cdc.changefeed.snapshot_shares import Share, ShareState
from cdc.changefeed.table_update import (
    BACKFILL,
    NO_BACKFILL,
    READD_HOLD_SECONDS,
    TablesUpdate,
    TablesUpdateResult,
    too_soon_to_add,
)
from cdc.config import load_changefeed_config
from cdc.config.changefeed import ChangefeedConfig
from cdc.filter.table_filter import TableFilter
from cdc.logs import ContextLogger
from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema
from cdc.schema.ddl import parse_ddl
from cdc.store import (
    Absent,
    CreateRevisionIs,
    Delete,
    DeletePrefix,
    Fence,
    ModRevisionIs,
    Put,
    Versioned,
)
from cdc.store.codec import decode, encode
from cdc.store.keys import KeySpace, SnapshotShareKey
from owner import changefeed as owner_changefeed
from owner.changefeed import ChangefeedOwner, OwnerOptions
from owner.ddl_tracker import DdlTracker
from owner.table_update import AppliedTables, StillRemoving, plan_tables

CF = "cf"
LIVE = {"c1"}
OLD_RULES = ("shop.a", "shop.gone")
NEW_RULES = ("shop.a", "shop.t1", "shop.t2")
ON_SOURCE = ["shop.a", "shop.gone", "shop.t1", "shop.t2"]
CHECKPOINT = Position("bin.000001", 100)
P1 = Position("bin.000001", 200)
DDL_AFTER_P1 = Position("bin.000001", 250)
LATER_END = Position("bin.000001", 400)


def pos(offset: int) -> Position:
    return Position("bin.000001", offset)


class Crash(Exception):
    """The owner's process dies at this write."""


class MemoryStore:
    """Enough of ``EtcdStore`` for the owner: transactions with their conditions, no
    mirror. ``crash(ops)``: True makes the transaction raise ``Crash``, writing nothing."""

    keys = KeySpace("/cdc/test")

    def __init__(self) -> None:
        self.items: dict[str, Versioned] = {}
        self.rev = 1
        self.crash: Callable[[Sequence[Any]], bool] = lambda ops: False

    def get(self, key: object) -> Versioned | None:
        return self.items.get(str(key))

    def get_at_one_revision(self, *keys: object) -> list[Versioned | None]:
        return [self.get(k) for k in keys]

    def get_prefix(self, prefix: str) -> list[Versioned]:
        return [v for k, v in sorted(self.items.items()) if k.startswith(prefix)]

    def applied_through(self, prefix: str) -> None:
        return None

    def changes_since(self, prefix: str, position: int) -> None:
        return None

    def journal_position(self, prefix: str) -> None:
        return None

    def revision(self) -> int:
        return self.rev

    def _holds(self, cond: object) -> bool:
        if isinstance(cond, Absent):
            return str(cond.key) not in self.items
        item = self.items.get(str(cond.key))  # type: ignore[attr-defined]
        if isinstance(cond, ModRevisionIs):
            return (item.mod_revision if item else 0) == cond.revision
        assert isinstance(cond, CreateRevisionIs)
        return (item.create_revision if item else 0) == cond.revision

    def txn(self, conditions: Sequence[object], ops: Sequence[Any], fence: object = None) -> bool:
        if self.crash(ops):
            raise Crash(f"died at {[str(getattr(op, 'key', op)) for op in ops]}")
        if not all(self._holds(c) for c in conditions):
            return False
        self.rev += 1
        for op in ops:
            if isinstance(op, Put):
                key = str(op.key)
                value = op.value if isinstance(op.value, bytes) else encode(op.value)
                old = self.items.get(key)
                created = old.create_revision if old else self.rev
                self.items[key] = Versioned(key, value, self.rev, created)
            elif isinstance(op, Delete):
                self.items.pop(str(op.key), None)
            else:
                assert isinstance(op, DeletePrefix)
                for key in [k for k in self.items if k.startswith(op.prefix)]:
                    del self.items[key]
        return True

    def update(self, key: object, fn: Callable[[Any], Any], *, fence: object = None) -> Any:
        while True:
            current = self.get(key)
            old = current.json() if current is not None else None
            new = fn(old)
            if new is None or new == old:
                return old
            cond = ModRevisionIs(key, current.mod_revision) if current else Absent(key)
            if self.txn([cond], [Put(key, new)], fence):
                return new

    def delete_prefix(self, prefix: str) -> int:
        self.txn([], [DeletePrefix(prefix)])
        return 0


#: The source's binlog as the test lets it grow.
BINLOG: list[Resolved | DdlEvent] = []


def scripted_run(self: DdlTracker) -> None:
    """``DdlTracker._run`` over ``BINLOG`` from the tracker's start, with its rules."""
    rules = TableFilter.parse(self.config.rules, self.config.case_sensitive)
    assert isinstance(self.start, Position)
    n = 0
    while not self._closed.is_set():
        if n >= len(BINLOG):
            time.sleep(0.005)
            continue
        event, n = BINLOG[n], n + 1
        if event.position.key() <= self.start.key():
            continue
        if isinstance(event, DdlEvent) and not any(
            rules.matches(t.schema, t.table) for t in event.tables
        ):
            continue  # the puller delivers no DDL of a table the rules do not match
        if self._on_event(event):
            return


def schema(table: str) -> TableSchema:
    return TableSchema(
        TableName.parse(table), (Column("id", "int", "int", nullable=False),), ("id",)
    )


class Source:
    """What ``apply_tables_update`` reads from the source: the tables, and where the
    binlog ends (``end``) when the update runs."""

    def __init__(self) -> None:
        self.end = P1
        self.calls = 0

    def apply(
        self,
        update: TablesUpdate,
        config: ChangefeedConfig,
        tasks: Collection[str],
        stop_puller: Callable[[Position], Position] | None,
        log: ContextLogger,
        removed_at: Mapping[str, float],
        removing: Collection[str] = (),
        created_by_ddl: Callable[[], Collection[str]] = lambda: (),
    ) -> AppliedTables:
        self.calls += 1
        rules = TableFilter.parse(config.rules, config.case_sensitive)
        matched = [t for t in ON_SOURCE if rules.matches(*t.split("."))]
        changes = plan_tables(update, config, matched, tasks)
        if set(changes.added) & set(removing):  # as the real one
            raise StillRemoving("still being removed")
        early = too_soon_to_add(changes.added, removed_at, time.time())  # as the real one
        if early is not None:
            return AppliedTables(TablesUpdateResult(update.id, None, error=early), {})
        position = stop_puller(self.end) if stop_puller is not None else self.end
        new_tasks = {
            t: TableTask("", TaskState.STOP)
            if how == BACKFILL
            else TableTask("", TaskState.STOP, start=position, schema=schema(t))
            for t, how in changes.added.items()
        }
        result = TablesUpdateResult(update.id, position, dict(changes.added), changes.removed)
        return AppliedTables(result, new_tasks)


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryStore, Source]]:
    monkeypatch.setattr(DdlTracker, "_run", scripted_run)
    source = Source()
    monkeypatch.setattr(owner_changefeed, "apply_tables_update", source.apply)
    BINLOG[:] = [Resolved(pos(150)), Resolved(P1)]
    store = MemoryStore()
    old = config(OLD_RULES)
    ChangefeedStore(store).create(old)  # type: ignore[arg-type]
    writer = ChangefeedStore(store).get(CF)
    for table in OLD_RULES:
        key = store.keys.task(CF, table)
        store.txn([], [Put(key, TableTask("c1", TaskState.RUN, start=CHECKPOINT).to_dict())])
    # the user's update: new rules in the info, the pending update in the status
    status = writer.status.changed(
        start=CHECKPOINT, checkpoint=CHECKPOINT, tables_update=TablesUpdate(OLD_RULES)
    )
    store.txn(
        [],
        [
            Put(store.keys.changefeed_info(CF), config(NEW_RULES).to_dict(mask=False)),
            Put(store.keys.changefeed_status(CF), status.to_dict()),
        ],
    )
    yield store, source
    BINLOG.clear()


def config(rules: tuple[str, ...]) -> ChangefeedConfig:
    base = load_changefeed_config(
        None,
        {
            "changefeed_id": CF,
            "source_uri": "mysql://repl@db1:3306/?password-env=SRC_PW",
            "sink_uri": "blackhole://",
        },
    )
    return replace(base, rules=rules, no_backfill=("shop.t1",))


def owner_of(store: MemoryStore) -> tuple[ChangefeedOwner, Changefeed]:
    cf = ChangefeedStore(store).get(CF)  # type: ignore[arg-type]
    options = OwnerOptions(barrier_interval=0.0)
    return ChangefeedOwner(store, Fence("/owner", 1), cf, options), cf  # type: ignore[arg-type]


def run_update(store: MemoryStore) -> ChangefeedOwner:
    """One owner's cycle applying the pending update (running)."""
    owner, cf = owner_of(store)
    try:
        owner._update_tables(cf, owner.tables.read(), LIVE, running=True)
    except Crash:
        owner.close()  # the process is gone, and its puller with it
        raise
    return owner


def task(store: MemoryStore, table: str) -> TableTask | None:
    item = store.get(store.keys.task(CF, table))
    return None if item is None else TableTask.from_dict(item.json())


def wait_for(what: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def puts(ops: Sequence[Any]) -> list[str]:
    return [str(op.key) for op in ops if isinstance(op, Put)]


def writes_task(table: str) -> Callable[[Sequence[Any]], bool]:
    return lambda ops: any(k.endswith(f"/task/{CF}/{table}") for k in puts(ops))


def records_result(ops: Sequence[Any]) -> bool:
    return any(
        isinstance(op, Put)
        and "/changefeed/status/" in str(op.key)
        and "last_tables_update"
        in (decode(op.value, str(op.key)) if isinstance(op.value, bytes) else op.value)
        for op in ops
    )


def t1_ddl() -> DdlEvent:
    return parse_ddl("ALTER TABLE t1 ADD COLUMN c INT", "shop", DDL_AFTER_P1)


def die_then_retry(store: MemoryStore, source: Source, at: Callable[..., bool]) -> ChangefeedOwner:
    """The first owner dies at the write ``at``; the source goes on (a DDL of the table
    added without backfill after P1, the binlog grows to LATER_END); the next owner
    applies the update."""
    store.crash = at
    with pytest.raises(Crash):
        run_update(store)
    store.crash = lambda ops: False
    BINLOG.extend([t1_ddl(), Resolved(pos(260)), Resolved(LATER_END)])
    source.end = LATER_END
    return run_update(store)


def recorded(store: MemoryStore) -> TablesUpdateResult:
    cf = ChangefeedStore(store).get(CF)  # type: ignore[arg-type]
    assert cf.status.tables_update is None and cf.status.state is ChangefeedState.NORMAL
    assert cf.status.last_tables_update is not None
    return cf.status.last_tables_update


def pending_ddl_positions(owner: ChangefeedOwner) -> list[Position]:
    tracker = owner.tracker
    assert tracker is not None
    with tracker._lock:
        return [p.position for p in tracker._pending if p.ddl is not None]


ADDED = {"shop.t1": NO_BACKFILL, "shop.t2": BACKFILL}


@pytest.mark.parametrize(
    "at",
    [
        pytest.param(records_result, id="after-the-tasks-before-the-result"),
        pytest.param(writes_task("shop.t2"), id="among-the-tasks"),
    ],
)
def test_an_owner_taking_over_a_decided_update_finishes_it_at_its_position(
    world: tuple[MemoryStore, Source], at: Callable[..., bool]
) -> None:
    store, source = world
    owner = die_then_retry(store, source, at)
    try:
        result = recorded(store)
        # the first owner's decision, whole: its position, every table added and removed
        assert (result.position, dict(result.added), result.removed) == (
            P1,
            ADDED,
            ("shop.gone",),
        )
        t1 = task(store, "shop.t1")
        assert t1 is not None and t1.start == P1 and t1.schema == schema("shop.t1")
        gone = task(store, "shop.gone")
        assert task(store, "shop.t2") is not None and gone is not None and gone.removing
        # the DDL puller follows the new rules from P1: the DDL of t1 after P1 is in the
        # barrier, to be applied downstream as for every table
        tracker = owner.tracker
        assert tracker is not None and tracker.config.rules == NEW_RULES
        assert tracker.start == P1
        wait_for(lambda: DDL_AFTER_P1 in pending_ddl_positions(owner))
        assert source.calls == 1  # the retry computed nothing again
    finally:
        owner.close()


def test_an_owner_dying_before_the_plan_is_stored_leaves_nothing_to_finish(
    world: tuple[MemoryStore, Source],
) -> None:
    """The next owner computes the update again: a later position, every table."""
    store, source = world
    owner = die_then_retry(store, source, writes_task("shop.t1"))
    try:
        result = recorded(store)
        assert (result.position, dict(result.added), result.removed) == (
            LATER_END,
            ADDED,
            ("shop.gone",),
        )
        t1 = task(store, "shop.t1")
        assert t1 is not None and t1.start == LATER_END
        # the DDL of t1 is before its start: its schema there has it, nothing to wait for
        assert owner.tracker is not None and owner.tracker.start == LATER_END
        time.sleep(0.05)
        assert pending_ddl_positions(owner) == []
    finally:
        owner.close()


def test_after_the_result_an_owner_follows_the_new_rules_from_the_checkpoint(
    world: tuple[MemoryStore, Source],
) -> None:
    store, _source = world
    run_update(store).close()
    assert recorded(store).position == P1
    BINLOG.extend([t1_ddl(), Resolved(LATER_END)])
    owner, cf = owner_of(store)
    try:
        tracker = owner._ensure_tracker(cf)
        assert tracker is not None and tracker.config.rules == NEW_RULES
        assert tracker.start == CHECKPOINT and tracker.stop_at is None
        wait_for(lambda: DDL_AFTER_P1 in pending_ddl_positions(owner))
    finally:
        owner.close()


def test_an_owner_seeing_the_pending_update_before_the_new_rules_applies_the_new_rules(
    world: tuple[MemoryStore, Source],
) -> None:
    """Found by CI: the owner's mirrors of info and status follow two watches, so a cycle
    saw the pending update (status) with the old rules (info) written in the same
    transaction; it added nothing and recorded the update as done, and the added table
    was never replicated."""
    store, _source = world
    owner, cf = owner_of(store)
    skewed = replace(cf, config=config(OLD_RULES))
    try:
        owner._update_tables(skewed, owner.tables.read(), LIVE, running=True)
    finally:
        owner.close()
    result = recorded(store)
    assert (dict(result.added), result.removed) == (ADDED, ("shop.gone",))
    assert task(store, "shop.t2") is not None


def ask(store: MemoryStore, source: Source, rules: tuple[str, ...]) -> None:
    """The user's next update, to ``rules``, and one owner cycle applying it."""
    cf = ChangefeedStore(store).get(CF)  # type: ignore[arg-type]
    status = cf.status.changed(tables_update=TablesUpdate(cf.config.rules))
    store.txn(
        [],
        [
            Put(store.keys.changefeed_info(CF), config(rules).to_dict(mask=False)),
            Put(store.keys.changefeed_status(CF), status.to_dict()),
        ],
    )
    BINLOG.append(Resolved(pos(BINLOG[-1].position.offset + 10)))
    source.end = BINLOG[-1].position
    run_update(store).close()


def answer_stop(store: MemoryStore, table: str) -> None:
    """The capture running ``table`` answers its task: stopped, its sink flushed."""
    item = store.get(store.keys.task(CF, table))
    assert item is not None
    record = TableRecord("c1", TableState.STOPPED, item.mod_revision, CHECKPOINT)
    store.txn([], [Put(store.keys.table_checkpoint(CF, table), record.to_dict())])


def share(store: MemoryStore, table: str, n: int, capture: str | None, state: ShareState) -> None:
    key = store.keys.snapshot_share(CF, table, n)
    store.txn([], [Put(key, Share(n, n * 16, n * 16 + 16, capture, state).to_dict())])


def test_a_removed_table_goes_once_its_pipeline_answered_the_stop_and_can_come_back_at_once(
    world: tuple[MemoryStore, Source],
) -> None:
    """F5: the removed table's task is a stop first; an update adding it back waits
    (stays pending, nothing refused) until the capture answered and the keys are gone,
    then adds it as any table. Before, its keys were deleted at once and the re-add
    refused for 300 s, since rows still queued in the capture's sink could land late."""
    store, source = world
    run_update(store).close()
    assert recorded(store).removed == ("shop.gone",)
    marked = task(store, "shop.gone")
    assert marked is not None and marked.removing and marked.state is TaskState.STOP
    assert marked.capture_id == "c1"

    ask(store, source, (*NEW_RULES, "shop.gone"))
    cf = ChangefeedStore(store).get(CF)  # type: ignore[arg-type]
    assert cf.status.tables_update is not None, "the update waits for the removal"
    assert task(store, "shop.gone") == marked

    answer_stop(store, "shop.gone")
    run_update(store).close()  # the removal finishes ...
    assert task(store, "shop.gone") is None
    assert store.get(store.keys.table_checkpoint(CF, "shop.gone")) is None
    run_update(store).close()  # ... and the waiting update adds the table back
    assert recorded(store).added == {"shop.gone": BACKFILL}
    added = task(store, "shop.gone")
    assert added is not None and not added.removing


def test_a_removal_marks_a_task_its_mirror_shows_at_an_older_revision(
    world: tuple[MemoryStore, Source],
) -> None:
    """The owner reads tasks from its mirrors, which may lag its own last write (a
    move's stop): the marking is refused at the old revision, and the task is read
    again and marked rather than left running with the update recorded as done."""
    store, _source = world
    owner, _cf = owner_of(store)
    stale = owner.tables.read()
    key = store.keys.task(CF, "shop.gone")
    store.txn([], [Put(key, TableTask("c1", TaskState.STOP, move_to="c2").to_dict())])
    assert owner.removals.mark(["shop.gone"], stale)
    marked = task(store, "shop.gone")
    assert marked is not None and marked.removing and marked.move_to is None


def test_a_removal_waits_for_the_shares_running_on_live_captures(
    world: tuple[MemoryStore, Source],
) -> None:
    """A share open on a live capture runs to its end: the removal waits for it. One
    open on a gone capture is stopped (nobody takes it) and does not hold it up."""
    store, _source = world
    run_update(store).close()
    share(store, "shop.gone", 0, "c1", ShareState.OPEN)
    share(store, "shop.gone", 1, "c-gone", ShareState.OPEN)
    answer_stop(store, "shop.gone")
    owner, _cf = owner_of(store)
    owner.tables.read()
    assert owner.removals.finish(owner.tables.removing, LIVE) == []
    assert task(store, "shop.gone") is not None
    stopped = store.get(store.keys.snapshot_share(CF, "shop.gone", 1))
    assert stopped is not None and stopped.json()["state"] == ShareState.STOPPED.value
    share(store, "shop.gone", 0, "c1", ShareState.DONE)
    owner.tables.read()
    assert owner.removals.finish(owner.tables.removing, LIVE) == ["shop.gone"]
    assert task(store, "shop.gone") is None
    assert not store.get_prefix(store.keys.prefix_of(SnapshotShareKey, CF, "shop.gone"))
    assert "shop.gone" not in ChangefeedStore(store).get(CF).status.removed_at  # type: ignore[arg-type]


def test_a_table_removed_with_a_share_stopped_on_a_live_capture_is_held_back(
    world: tuple[MemoryStore, Source], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A share the holder stopped may have had a Spark job running on its capture,
    unseen: that table is not added back within READD_HOLD_SECONDS (refused, the rules
    put back), and is added as any table afterwards."""
    store, source = world
    run_update(store).close()
    share(store, "shop.gone", 0, "c1", ShareState.STOPPED)
    answer_stop(store, "shop.gone")
    owner, _cf = owner_of(store)
    owner.tables.read()
    assert owner.removals.finish(owner.tables.removing, LIVE) == ["shop.gone"]
    ask(store, source, (*NEW_RULES, "shop.gone"))
    refused = recorded(store)
    assert refused.error is not None and "shop.gone was removed by an update" in refused.error
    assert ChangefeedStore(store).get(CF).config.rules == NEW_RULES  # type: ignore[arg-type]
    assert task(store, "shop.gone") is None
    later = time.time() + READD_HOLD_SECONDS
    monkeypatch.setattr(time, "time", lambda: later)
    ask(store, source, (*NEW_RULES, "shop.gone"))
    assert recorded(store).added == {"shop.gone": BACKFILL}
    assert task(store, "shop.gone") is not None


def test_the_plan_and_the_tables_added_without_backfill_are_one_write(
    world: tuple[MemoryStore, Source],
) -> None:
    """Their tasks hold the schema at P1, which a later owner could not read again."""
    store, _source = world
    writes: list[list[str]] = []
    store.crash = lambda ops: bool(writes.append(puts(ops)))
    run_update(store).close()
    plan = next(w for w in writes if any(k.endswith("/shop.t1") for k in w))
    assert any("/changefeed/status/" in k for k in plan)
    assert not any(k.endswith("/shop.t2") for k in plan)


# --- the DDL puller stopping exactly at the update's position ---------------------------


def tracker(stop_at: Position | None) -> DdlTracker:
    return DdlTracker(config(OLD_RULES), CHECKPOINT, None, None, lambda b: None, stop_at=stop_at)


def test_a_tracker_stops_at_its_stop_position_past_a_resolved_one() -> None:
    t = tracker(P1)
    assert not t._on_event(Resolved(pos(150)))
    ddl = parse_ddl("ALTER TABLE a ADD COLUMN c INT", "shop", P1)
    assert not t._on_event(Resolved(pos(190)))
    assert t._on_event(ddl)  # a DDL at the position itself is taken, and it stops there
    assert t.resolved == P1 and t.next() is not None and t.next().ddl is ddl  # type: ignore[union-attr]
    u = tracker(P1)
    assert u._on_event(Resolved(pos(300)))
    assert u.resolved == P1


def test_a_tracker_takes_no_ddl_after_its_stop_position() -> None:
    t = tracker(P1)
    assert t._on_event(parse_ddl("ALTER TABLE a ADD COLUMN c INT", "shop", pos(250)))
    assert t.resolved == P1 and t.next() is None
    new = t.successor(config(NEW_RULES))
    assert new is not None and new.start == P1 and new.stop_at is None


def test_a_tracker_stopping_by_itself_ends_its_thread() -> None:
    BINLOG[:] = [Resolved(pos(150)), Resolved(pos(300))]
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(DdlTracker, "_run", scripted_run)
            t = tracker(P1).start_thread()
            wait_for(lambda: not t.alive)
            assert t.resolved == P1
            t.close()
    finally:
        BINLOG.clear()
    assert threading.active_count() >= 1
