"""The owner's cycle decisions (owner/decisions.py): every transition of the module's
table, on views built here, without etcd."""

from __future__ import annotations

import pytest

from cdc.changefeed import (
    Barrier,
    BarrierKind,
    ChangefeedState,
    TableEntry,
    TableRecord,
    TableState,
    TableTask,
    TaskState,
)
from cdc.model.position import Position
from owner.decisions import (
    BarrierStep,
    CycleView,
    Decision,
    Step,
    barrier_step,
    checkpoint_to_save,
    decide,
    snapshot_done,
)


def pos(offset: int) -> Position:
    return Position("binlog.000001", offset)


def entry(
    table: str = "db.t",
    *,
    capture: str = "c1",
    state: TableState = TableState.RUNNING,
    checkpoint: int | None = 100,
    task_state: TaskState = TaskState.RUN,
    reread: bool = False,
) -> TableEntry:
    record = TableRecord(
        capture,
        state,
        7,
        None if checkpoint is None else pos(checkpoint),
        reread_from=pos(50) if reread else None,
    )
    return TableEntry(table, TableTask(capture, task_state), 7, record)


def view(**changes: object) -> CycleView:
    settings: dict[str, object] = {
        "state": ChangefeedState.NORMAL,
        "started": True,
        "retry_at": None,
        "now": 1000.0,
        "failed": {},
        "live_captures": frozenset({"c1", "c2"}),
    }
    settings.update(changes)
    return CycleView(**settings)  # type: ignore[arg-type]


def test_normal_without_a_start_point_initializes() -> None:
    assert decide(view(started=False)) == Decision(Step.INITIALIZE)


def test_normal_with_a_table_error_on_a_live_capture_takes_it() -> None:
    failed = {"db.b": entry("db.b", state=TableState.ERROR)}
    assert decide(view(failed=failed)) == Decision(Step.TABLE_ERROR, "db.b")


def test_a_table_error_on_a_capture_that_is_gone_is_left_to_the_scheduler() -> None:
    """Retrying would fail again at once, for ever: the task still names the dead capture
    until the scheduler moves it, which it does in the same cycle."""
    failed = {"db.b": entry("db.b", capture="c9", state=TableState.ERROR)}
    assert decide(view(failed=failed)) == Decision(Step.ADVANCE)


def test_an_error_the_task_no_longer_asks_for_is_not_the_changefeeds() -> None:
    failed = {"db.b": entry("db.b", state=TableState.ERROR, task_state=TaskState.STOP)}
    assert decide(view(failed=failed)) == Decision(Step.ADVANCE)


def test_a_failed_ddl_puller_is_an_error() -> None:
    assert decide(view(puller_failed=True)) == Decision(Step.PULLER_ERROR)


def test_a_table_error_comes_before_the_pullers() -> None:
    failed = {"db.b": entry("db.b", state=TableState.ERROR)}
    assert decide(view(failed=failed, puller_failed=True)).step is Step.TABLE_ERROR


def test_normal_otherwise_advances() -> None:
    assert decide(view()) == Decision(Step.ADVANCE)


@pytest.mark.parametrize(("now", "step"), [(999.0, Step.HOLD), (1000.0, Step.RETRY)])
def test_error_retries_at_its_retry_time(now: float, step: Step) -> None:
    assert decide(view(state=ChangefeedState.ERROR, retry_at=1000.0, now=now)).step is step


@pytest.mark.parametrize(
    "state", [ChangefeedState.STOPPED, ChangefeedState.FAILED, ChangefeedState.FINISHED]
)
def test_stopped_failed_and_finished_hold(state: ChangefeedState) -> None:
    assert decide(view(state=state, retry_at=1.0)) == Decision(Step.HOLD)


# --- checkpoints and the barrier ------------------------------------------------------------


def test_the_checkpoint_is_capped_by_the_barrier_unless_untracked() -> None:
    barrier = Barrier(BarrierKind.DDL, pos(250))
    save = {"has_tasks": True, "unsettled": False, "tracked": True}
    assert checkpoint_to_save(pos(200), barrier, **save) == (pos(200), pos(200))
    assert checkpoint_to_save(pos(400), barrier, **save) == (pos(250), pos(250))
    assert checkpoint_to_save(pos(400), barrier, **{**save, "tracked": False}) == (
        pos(400),
        pos(400),
    )


def test_nothing_is_persisted_while_a_snapshot_reads_chunks_again() -> None:
    barrier = Barrier(BarrierKind.RESOLVED, pos(900))
    assert checkpoint_to_save(
        pos(300), barrier, has_tasks=True, unsettled=True, tracked=True
    ) == (pos(300), None)


def test_an_unknown_table_checkpoint_or_barrier_gives_none() -> None:
    resolved = Barrier(BarrierKind.RESOLVED, pos(9))
    assert checkpoint_to_save(None, resolved, has_tasks=True, unsettled=False, tracked=True) == (
        None,
        None,
    )
    assert checkpoint_to_save(pos(5), None, has_tasks=True, unsettled=False, tracked=True) == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("checkpoint", "recorded", "limit", "is_ddl", "step"),
    [
        (100, 100, 200, True, BarrierStep.WAIT),
        (200, 200, 200, True, BarrierStep.APPLY_DDL),
        (300, 300, 200, False, BarrierStep.FINISH),
        (None, None, 200, True, BarrierStep.WAIT),
        (300, 300, None, True, BarrierStep.WAIT),
        # carried to the limit by a reader's progress, but a record is behind it
        (200, 150, 200, True, BarrierStep.WAIT),
        (300, None, 200, False, BarrierStep.WAIT),
    ],
)
def test_barrier_step(
    checkpoint: int | None, recorded: int | None, limit: int | None, is_ddl: bool, step: BarrierStep
) -> None:
    at = None if checkpoint is None else pos(checkpoint)
    to = None if limit is None else pos(limit)
    rec = None if recorded is None else pos(recorded)
    assert barrier_step(at, to, is_ddl=is_ddl, recorded=rec) is step


def test_a_snapshot_only_changefeed_is_done_when_every_table_finished() -> None:
    done = {"db.a": entry("db.a", state=TableState.FINISHED)}
    assert snapshot_done(done)
    assert not snapshot_done({**done, "db.b": entry("db.b")})
