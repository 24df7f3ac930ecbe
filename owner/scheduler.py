"""Which capture runs which table: a pure function from the cluster's state to actions.

Each owner cycle, per changefeed::

    1. tables without a task ─────────────────────────► Assign to the least loaded capture
    2. task {run} on a capture whose lease expired ───► Reassign to the least loaded capture
    3. task {stop}, the pipeline has stopped (or its
       capture is gone) and the changefeed runs ──────► Start on move_to (or the least loaded)
    4. the changefeed does not run: task {run} ───────► Stop
    5. balance, while fewer than ``max_moving`` moves are under way:
       most loaded - least loaded > 1 ────────────────► Stop(move_to = least loaded)

A move is a Stop with ``move_to`` followed, once the old capture has written
its final checkpoint, by a Start on the new capture (step 3): the table's
pipeline never runs on two captures at once, and the new one resumes from the
old one's checkpoint. Ties are broken by name, so the result is deterministic.

``together`` (a sink with one writer, such as a folder under a lock): every
table goes to one home capture, the live one already running most of the
changefeed's tables (else the first by name), and a table found elsewhere
moves there; there is nothing to balance.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from cdc.changefeed import TaskState, TaskView

__all__ = ["Action", "Assign", "Reassign", "Start", "Stop", "schedule"]


@dataclass(frozen=True)
class Assign:
    """Create the table's task: run on ``capture_id``."""

    table: str
    capture_id: str


@dataclass(frozen=True)
class Reassign:
    """The task's capture is gone: run the table on ``capture_id`` instead."""

    table: str
    capture_id: str


@dataclass(frozen=True)
class Start:
    """The table's pipeline has stopped: run it on ``capture_id``."""

    table: str
    capture_id: str


@dataclass(frozen=True)
class Stop:
    """Ask the table's capture to stop its pipeline (and hand the table to ``move_to``)."""

    table: str
    move_to: str | None = None


Action = Assign | Reassign | Start | Stop


def _least(load: Counter[str], captures: Iterable[str]) -> str:
    return min(captures, key=lambda c: (load[c], c))


def schedule(
    tables: Sequence[str],
    tasks: Mapping[str, TaskView],
    captures: Iterable[str],
    *,
    running: bool,
    max_moving: int = 1,
    together: bool = False,
) -> list[Action]:
    """The actions that bring ``tasks`` towards ``tables`` balanced over ``captures``.

    ``tables`` are the tables the changefeed captures (tasks of other tables
    are left alone: removing them is the caller's business); ``captures`` the
    live ones; ``running`` whether the changefeed's state runs pipelines;
    ``together`` whether all of them must run on one capture.
    """
    live = sorted(set(captures))
    wanted = sorted(set(tables))
    actions: list[Action] = []
    if not running:
        for table in wanted:
            task = tasks.get(table)
            if task is not None and task.state is TaskState.RUN and task.capture_id in live:
                actions.append(Stop(table))
        return actions
    if not live:
        return actions
    load: Counter[str] = Counter({c: 0 for c in live})
    for table in wanted:
        task = tasks.get(table)
        if task is None:
            continue
        if task.state is TaskState.RUN and task.capture_id in live:
            load[task.capture_id] += 1
        elif task.state is TaskState.STOP and task.move_to in live:
            load[task.move_to] += 1
    home = min(live, key=lambda c: (-load[c], c)) if together else None
    moving = 0
    for table in wanted:
        task = tasks.get(table)
        if task is None:
            target = home or _least(load, live)
            actions.append(Assign(table, target))
            load[target] += 1
        elif task.state is TaskState.RUN and task.capture_id not in live:
            target = home or _least(load, live)
            actions.append(Reassign(table, target))
            load[target] += 1
        elif task.state is TaskState.STOP:
            if task.idle or task.capture_id not in live:
                if home is not None:
                    actions.append(Start(table, home))
                elif task.move_to in live:
                    actions.append(Start(table, task.move_to))
                else:
                    target = _least(load, live)
                    actions.append(Start(table, target))
                    load[target] += 1
            elif task.move_to is not None:
                moving += 1
    if home is not None:
        actions.extend(_gather(wanted, tasks, live, home, max_moving - moving))
    else:
        actions.extend(_balance(wanted, tasks, live, load, max_moving - moving))
    return actions


def _gather(
    tables: Sequence[str],
    tasks: Mapping[str, TaskView],
    live: Sequence[str],
    home: str,
    budget: int,
) -> list[Stop]:
    """Moves the tables running on another live capture to ``home`` (``together``)."""
    away = [
        table
        for table in tables
        if (task := tasks.get(table)) is not None
        and task.state is TaskState.RUN
        and task.capture_id in live
        and task.capture_id != home
    ]
    return [Stop(table, move_to=home) for table in away[: max(budget, 0)]]


def _balance(
    tables: Sequence[str],
    tasks: Mapping[str, TaskView],
    live: Sequence[str],
    load: Counter[str],
    budget: int,
) -> list[Stop]:
    """Moves from the most to the least loaded capture until they differ by at most one."""
    movable: dict[str, list[str]] = {c: [] for c in live}
    for table in tables:
        task = tasks.get(table)
        if task is not None and task.state is TaskState.RUN and task.capture_id in movable:
            movable[task.capture_id].append(table)
    moves: list[Stop] = []
    while len(moves) < budget:
        most = max(live, key=lambda c: (load[c], c))
        least = _least(load, live)
        if load[most] - load[least] <= 1 or not movable[most]:
            break
        table = movable[most].pop()
        moves.append(Stop(table, move_to=least))
        load[most] -= 1
        load[least] += 1
    return moves
