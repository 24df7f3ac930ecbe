"""What the processor does with one table in a pass, decided from what it holds.

Pure functions over the table's task (as the processor's view of the ``task/``
keys shows it) and its pipeline here: no etcd, no threads, so every transition
is unit-tested (tests/unit/processor/test_processor_decisions.py). The pass
(``processor/processor.py``) first forgets a pipeline whose thread ended
(``ended_at``: the task revision it must not start again at), then asks
``decide`` and carries out the act::

    pipeline here              task naming this capture          act
    ─────────────────────────  ───────────────────────────────── ───────────
    running                    none, or of another incarnation   ABORT
                               (the table was dropped and made
                               again: another create revision)
    running, not stopping      stop                              STOP
    running                    run                               FOLLOW
    running, stopping          stop                              NOTHING
    none                       run, ended at this revision       NOTHING
    none                       run                               START
    none                       stop                              ANSWER_STOP
    none                       none                              NOTHING

ABORT: stop at once, report nothing (the table is no longer this capture's).
STOP: move the pipeline's guard to the stop's revision and stop it (it
flushes and reports stopped). FOLLOW: move its guard to the task's revision
(the owner rewrote a task that still names this capture). ANSWER_STOP: report
stopped at the stop's revision, keeping the last checkpoint, unless reported.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cdc.changefeed import TaskState

__all__ = ["Act", "PipelineView", "TaskView", "decide", "ended_at"]


class Act(enum.Enum):
    NOTHING = "nothing"
    ABORT = "abort"
    STOP = "stop"
    FOLLOW = "follow"
    START = "start"
    ANSWER_STOP = "answer-stop"


@dataclass(frozen=True)
class TaskView:
    """A task naming this capture: its state, its revision and its key's create revision
    (the table's incarnation)."""

    state: TaskState
    revision: int
    created: int


@dataclass(frozen=True)
class PipelineView:
    """A pipeline running here: the incarnation it was started for, and whether it was
    asked to stop."""

    created: int
    stopping: bool


def decide(task: TaskView | None, pipeline: PipelineView | None, ended: int | None) -> Act:
    """The act for one table (see the module docstring); ``ended``: the task revision at
    which a pipeline of the table ended here for good (``ended_at``), if any."""
    if pipeline is not None:
        if task is None or task.created != pipeline.created:
            return Act.ABORT
        if task.state is TaskState.STOP:
            return Act.NOTHING if pipeline.stopping else Act.STOP
        return Act.FOLLOW
    if task is None:
        return Act.NOTHING
    if task.state is TaskState.RUN:
        return Act.NOTHING if ended == task.revision else Act.START
    return Act.ANSWER_STOP


def ended_at(
    failed_or_finished: bool, guard_revision: int, moved_on_from: int | None
) -> int | None:
    """The task revision a pipeline that ended must not start again at, or None.

    A pipeline that failed or finished ends for the task revision it answered: the
    owner decides what next (a new revision). One that etcd refused a report
    (``moved_on_from``) ends for the revision it was refused at: etcd holds a newer
    task, and until the view shows it, the one in the view would start the table again
    behind the others. One stopped or aborted may start again when the task says run.
    """
    if failed_or_finished:
        return guard_revision
    return moved_on_from
