"""The scheduler's decisions: assignment, balance on join, reassignment, safe-point moves."""

from __future__ import annotations

from collections import Counter

import pytest

from cdc.changefeed import TaskState, TaskView
from owner.scheduler import Assign, Reassign, Start, Stop, schedule

RUN, STOP = TaskState.RUN, TaskState.STOP
TABLES = [f"db.t{i}" for i in range(8)]


def run_on(assignment: dict[str, str]) -> dict[str, TaskView]:
    return {t: TaskView(c, RUN) for t, c in assignment.items()}


def test_new_tables_spread_evenly() -> None:
    actions = schedule(TABLES, {}, ["c1", "c2", "c3"], running=True)
    assert all(isinstance(a, Assign) for a in actions)
    assert sorted(Counter(a.capture_id for a in actions).values()) == [2, 3, 3]
    assert [a.table for a in actions] == TABLES


def test_balanced_cluster_is_left_alone() -> None:
    tasks = run_on({t: ("c1" if i % 2 else "c2") for i, t in enumerate(TABLES)})
    assert schedule(TABLES, tasks, ["c1", "c2"], running=True) == []


def test_a_joining_capture_gets_tables_one_move_at_a_time() -> None:
    tasks = run_on({t: ("c1" if i % 2 else "c2") for i, t in enumerate(TABLES)})
    actions = schedule(TABLES, tasks, ["c1", "c2", "c3"], running=True)
    assert actions == [Stop("db.t6", move_to="c3")]
    actions = schedule(TABLES, tasks, ["c1", "c2", "c3"], running=True, max_moving=3)
    assert [a.move_to for a in actions] == ["c3", "c3"]
    assert all(isinstance(a, Stop) for a in actions)


def test_a_move_under_way_blocks_further_balancing() -> None:
    tasks = run_on({t: "c1" for t in TABLES})
    tasks["db.t0"] = TaskView("c1", STOP, move_to="c2")
    assert schedule(TABLES, tasks, ["c1", "c2"], running=True) == []


def test_a_stopped_table_starts_on_its_target_once_idle() -> None:
    tasks = run_on({t: "c1" for t in TABLES})
    tasks["db.t0"] = TaskView("c1", STOP, move_to="c2", idle=True)
    actions = schedule(TABLES, tasks, ["c1", "c2"], running=True)
    assert actions[0] == Start("db.t0", "c2")
    assert all(isinstance(a, Stop) and a.move_to == "c2" for a in actions[1:])


def test_tables_of_a_dead_capture_are_reassigned_at_once() -> None:
    tasks = run_on({t: ("c1" if i < 4 else "dead") for i, t in enumerate(TABLES)})
    actions = schedule(TABLES, tasks, ["c1", "c2"], running=True)
    assert {a.table for a in actions} == set(TABLES[4:])
    assert all(isinstance(a, Reassign) and a.capture_id == "c2" for a in actions)


def test_a_move_whose_source_died_starts_without_waiting() -> None:
    tasks = {"db.t0": TaskView("dead", STOP, move_to="c2")}
    assert schedule(["db.t0"], tasks, ["c1", "c2"], running=True) == [Start("db.t0", "c2")]


def test_a_move_whose_target_died_goes_to_the_least_loaded() -> None:
    tasks = {"db.t0": TaskView("c1", STOP, move_to="gone", idle=True), "db.t1": TaskView("c1", RUN)}
    assert schedule(["db.t0", "db.t1"], tasks, ["c1", "c2"], running=True) == [Start("db.t0", "c2")]


def test_a_stopping_pipeline_is_waited_for() -> None:
    tasks = {"db.t0": TaskView("c1", STOP)}
    assert schedule(["db.t0"], tasks, ["c1", "c2"], running=True) == []


@pytest.mark.parametrize("captures", [["c1"], ["c1", "c2"]])
def test_a_changefeed_that_does_not_run_stops_its_live_tables(captures: list[str]) -> None:
    tasks = run_on({"db.t0": "c1", "db.t1": "dead"})
    tasks["db.t2"] = TaskView("c1", STOP)
    assert schedule(["db.t0", "db.t1", "db.t2"], tasks, captures, running=False) == [Stop("db.t0")]


def test_no_live_capture_means_no_action() -> None:
    assert schedule(TABLES, {}, [], running=True) == []


def test_tasks_of_tables_not_wanted_are_not_touched() -> None:
    tasks = run_on({"db.old": "dead"})
    assert schedule([], tasks, ["c1"], running=True) == []


def test_together_puts_every_table_on_one_capture() -> None:
    """A one-writer sink (a file-sink folder under its lock): all of a changefeed's tables
    run on one capture, new ones and restarted ones join it, and nothing balances."""
    actions = schedule(TABLES, {}, ["c1", "c2", "c3"], running=True, together=True)
    assert actions == [Assign(t, "c1") for t in TABLES]

    tasks = run_on({t: "c2" for t in TABLES[:6]})
    tasks["db.t6"] = TaskView("", STOP)  # a table a CREATE TABLE added
    tasks["db.t7"] = TaskView("c2", STOP, move_to="c3", idle=True)
    actions = schedule(TABLES, tasks, ["c1", "c2", "c3"], running=True, together=True)
    assert actions == [Start("db.t6", "c2"), Start("db.t7", "c2")]


def test_together_follows_the_tables_when_their_capture_goes() -> None:
    tasks = run_on({t: "c2" for t in TABLES})
    actions = schedule(TABLES, tasks, ["c1", "c3"], running=True, together=True)
    assert actions == [Reassign(t, "c1") for t in TABLES]


def test_together_gathers_tables_found_apart_one_move_at_a_time() -> None:
    """Tables split over captures (scheduled before the sink needed one writer) go to the
    capture holding most of them, within the move budget."""
    tasks = run_on({t: ("c1" if i < 2 else "c2") for i, t in enumerate(TABLES)})
    actions = schedule(TABLES, tasks, ["c1", "c2"], running=True, together=True)
    assert actions == [Stop("db.t0", move_to="c2")]
    tasks["db.t0"] = TaskView("c1", STOP, move_to="c2")
    assert schedule(TABLES, tasks, ["c1", "c2"], running=True, together=True) == []
    actions = schedule(TABLES, tasks, ["c1", "c2"], running=True, together=True, max_moving=2)
    assert actions == [Stop("db.t1", move_to="c2")]
