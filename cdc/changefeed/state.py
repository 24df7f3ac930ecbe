"""The states of a changefeed and the moves allowed between them.

::

                 create
                   │
                   ▼        pause                       resume
    ┌──────────► normal ───────────────► stopped ◄───────────────┐
    │  retry       │ │ │                  ▲  │ resume             │
    │ (backoff)    │ │ └── target reached │  └──────► normal      │
    │              │ │     / snapshot-    │                       │
    │              │ │     only done      │ pause                 │
    │              │ ▼                    │                       │
    │              │ finished             │                       │
    │              ▼                      │                       │
    └───────── error ─────────────────────┘                       │
                   │ permanent error, or too many in a row         │
                   ▼                                               │
                 failed ──── pause ──► stopped ────────────────────┘
                   └──────── resume ──► normal

    remove: from any state (the keys go; there is no "removed" state)

``normal`` runs; ``stopped`` is paused by the user; ``error`` waits for the
owner's retry (with backoff) after a failure it may recover from; ``failed``
needs the user (a permanent error or the retries ran out); ``finished`` is
done for good (the target position was reached, or a snapshot-only
changefeed finished its snapshot). Who moves a changefeed: the user pauses
and resumes (``ChangefeedStore``), the owner does everything else.
"""

from __future__ import annotations

import enum

from cdc.changefeed.errors import InvalidTransition

__all__ = ["ChangefeedState", "check_transition"]


class ChangefeedState(enum.Enum):
    """A changefeed's state; the values are what etcd stores (see the module diagram)."""

    NORMAL = "normal"
    STOPPED = "stopped"
    ERROR = "error"
    FAILED = "failed"
    FINISHED = "finished"

    @property
    def runs(self) -> bool:
        """Whether table pipelines should run in this state."""
        return self is ChangefeedState.NORMAL

    def can_become(self, other: ChangefeedState) -> bool:
        """Whether the diagram has an arrow from this state to ``other`` (or they are equal)."""
        return other is self or other in _ALLOWED[self]


_S = ChangefeedState
_ALLOWED: dict[ChangefeedState, frozenset[ChangefeedState]] = {
    _S.NORMAL: frozenset({_S.STOPPED, _S.ERROR, _S.FAILED, _S.FINISHED}),
    _S.ERROR: frozenset({_S.NORMAL, _S.STOPPED, _S.FAILED}),
    _S.FAILED: frozenset({_S.STOPPED, _S.NORMAL}),
    _S.STOPPED: frozenset({_S.NORMAL}),
    _S.FINISHED: frozenset(),
}


def check_transition(changefeed_id: str, old: ChangefeedState, new: ChangefeedState) -> None:
    """Raises ``InvalidTransition`` unless ``old -> new`` is an arrow of the diagram."""
    if not old.can_become(new):
        allowed = ", ".join(sorted(s.value for s in _ALLOWED[old])) or "none (remove it)"
        raise InvalidTransition(
            f"changefeed {changefeed_id} is {old.value} and cannot become {new.value}; "
            f"from {old.value} it can become: {allowed}"
        )
