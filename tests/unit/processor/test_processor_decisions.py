"""Every transition of the processor's decision table (processor/decisions.py)."""

from __future__ import annotations

import pytest

from cdc.changefeed import TaskState
from processor.decisions import Act, PipelineView, TaskView, decide, ended_at

RUN = TaskView(TaskState.RUN, revision=20, created=10)
STOP = TaskView(TaskState.STOP, revision=21, created=10)
RUNNING = PipelineView(created=10, stopping=False)
STOPPING = PipelineView(created=10, stopping=True)
OLDER = PipelineView(created=5, stopping=False)


@pytest.mark.parametrize(
    ("task", "pipeline", "ended", "act"),
    [
        # a pipeline runs here
        (None, RUNNING, None, Act.ABORT),  # no task names this capture any more
        (RUN, OLDER, None, Act.ABORT),  # the table was dropped and made again
        (STOP, OLDER, None, Act.ABORT),
        (STOP, RUNNING, None, Act.STOP),
        (STOP, STOPPING, None, Act.NOTHING),  # asked once: it is flushing
        (RUN, RUNNING, None, Act.FOLLOW),  # a rewritten task that still names it
        (RUN, STOPPING, None, Act.FOLLOW),
        # no pipeline here
        (RUN, None, None, Act.START),
        (RUN, None, 19, Act.START),  # ended at an older revision: the owner rewrote it
        (RUN, None, 20, Act.NOTHING),  # ended at this revision: the owner decides
        (STOP, None, None, Act.ANSWER_STOP),
        (STOP, None, 21, Act.ANSWER_STOP),
        (None, None, None, Act.NOTHING),
        (None, None, 20, Act.NOTHING),
    ],
)
def test_decide(
    task: TaskView | None, pipeline: PipelineView | None, ended: int | None, act: Act
) -> None:
    assert decide(task, pipeline, ended) is act


@pytest.mark.parametrize(
    ("failed_or_finished", "moved_on_from", "expected"),
    [
        (True, None, 20),  # failed or finished: not again at the revision it answered
        (True, 25, 20),
        (False, 25, 25),  # refused by etcd: not again at the revision it was refused at
        (False, None, None),  # stopped or aborted: may start again when the task says run
    ],
)
def test_ended_at(
    failed_or_finished: bool, moved_on_from: int | None, expected: int | None
) -> None:
    assert ended_at(failed_or_finished, 20, moved_on_from) == expected
