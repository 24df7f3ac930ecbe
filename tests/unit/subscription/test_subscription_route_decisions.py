"""Where a pull changefeed is served: ``locate`` decides on views built here."""

from __future__ import annotations

import pytest

from cdc.changefeed import ChangefeedState, TableTask, TaskState
from cdc.subscription.routing import Elsewhere, Refused, View, Wait, locate, serving_capture

LIVE = {"a": "10.0.0.1:8300", "b": "10.0.0.2:8300", "c": "10.0.0.3:8300"}


def view(
    tasks: dict[str, TableTask],
    *,
    me: str = "a",
    state: ChangefeedState | None = ChangefeedState.NORMAL,
    pull: bool = True,
) -> View:
    return View("cf", "pull://" if pull else "blackhole://", pull, state, tasks, LIVE, me)


def run(capture: str) -> TableTask:
    return TableTask(capture, TaskState.RUN)


def test_the_capture_running_the_tables_serves_them() -> None:
    assert locate(view({"s.t": run("b"), "s.u": run("b")})) == Elsewhere("b", LIVE["b"])


def test_while_tables_move_the_capture_holding_most_of_them_serves() -> None:
    tasks = {"s.t": run("b"), "s.u": run("c"), "s.v": run("c"), "s.w": run("gone")}
    assert serving_capture(tasks, LIVE) == "c"
    assert serving_capture({"s.t": run("b"), "s.u": run("c")}, LIVE) == "b", "ties by name"


@pytest.mark.parametrize(
    ("tasks", "words"),
    [
        ({}, "no capture runs changefeed 'cf' right now"),
        ({"s.t": run("gone")}, "no capture runs changefeed 'cf' right now"),
        ({"s.t": TableTask("b", TaskState.STOP)}, "no capture runs changefeed 'cf' right now"),
        ({"s.t": run("a")}, "is starting on this capture"),
    ],
)
def test_no_capture_that_can_answer_now_means_wait(tasks: dict[str, TableTask], words: str) -> None:
    route = locate(view(tasks))
    assert isinstance(route, Wait) and words in route.reason


@pytest.mark.parametrize(
    ("state", "route", "words"),
    [
        (None, Refused, "no changefeed 'cf' in this cluster"),
        (ChangefeedState.FAILED, Refused, "is failed: nothing more will be served"),
        (ChangefeedState.FINISHED, Refused, "is finished"),
        (ChangefeedState.STOPPED, Wait, "is stopped, so no capture serves it now"),
        (ChangefeedState.ERROR, Wait, "is in state error, so no capture serves it now"),
    ],
)
def test_a_changefeed_that_does_not_run_says_so(
    state: ChangefeedState | None, route: type, words: str
) -> None:
    found = locate(view({"s.t": run("b")}, state=state))
    assert isinstance(found, route)
    assert words in (found.reason if isinstance(found, Refused | Wait) else "")
    if isinstance(found, Refused):
        assert found.not_found is (state is None)


def test_a_changefeed_with_another_sink_has_nothing_to_pull() -> None:
    route = locate(view({"s.t": run("b")}, pull=False))
    assert isinstance(route, Refused) and not route.not_found
    assert "writes to blackhole://, not to pull://" in route.reason
