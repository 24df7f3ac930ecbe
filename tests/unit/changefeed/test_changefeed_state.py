"""The changefeed state machine: every arrow of the diagram allowed, every other refused."""

from __future__ import annotations

import itertools

import pytest

from cdc.changefeed import ChangefeedState, InvalidTransition, check_transition

S = ChangefeedState

ALLOWED = {
    (S.NORMAL, S.STOPPED),
    (S.NORMAL, S.ERROR),
    (S.NORMAL, S.FAILED),
    (S.NORMAL, S.FINISHED),
    (S.ERROR, S.NORMAL),
    (S.ERROR, S.STOPPED),
    (S.ERROR, S.FAILED),
    (S.FAILED, S.STOPPED),
    (S.FAILED, S.NORMAL),
    (S.STOPPED, S.NORMAL),
}


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)))
def test_transition_table(old: ChangefeedState, new: ChangefeedState) -> None:
    expected = old is new or (old, new) in ALLOWED
    assert old.can_become(new) is expected
    if expected:
        check_transition("cf", old, new)
    else:
        with pytest.raises(InvalidTransition, match=f"cf is {old.value} and cannot become"):
            check_transition("cf", old, new)


def test_finished_is_final_and_says_so() -> None:
    with pytest.raises(InvalidTransition, match="none \\(remove it\\)"):
        check_transition("cf", S.FINISHED, S.NORMAL)


def test_only_normal_runs() -> None:
    assert [s for s in S if s.runs] == [S.NORMAL]
