"""Retrying a changefeed in state error: exponential backoff, then failed.

    error n (within the window) ──► retry after min(initial * factor^(n-1), max_delay)
    more than max_errors within the window, or a permanent error ──► failed

Errors older than ``window`` are forgotten, so a changefeed that recovered
and ran for a while starts again from the short delay.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc.changefeed import ChangefeedState, ChangefeedStatus, ErrorInfo

__all__ = ["RetryPolicy", "record_error"]


@dataclass(frozen=True)
class RetryPolicy:
    initial: float = 2.0
    factor: float = 2.0
    max_delay: float = 60.0
    window: float = 1800.0
    max_errors: int = 10

    def delay(self, errors: int) -> float:
        """Seconds to wait before the retry after the ``errors``-th error (1-based)."""
        return min(self.initial * self.factor ** max(errors - 1, 0), self.max_delay)


def record_error(
    status: ChangefeedStatus, error: ErrorInfo, policy: RetryPolicy, now: float
) -> ChangefeedStatus:
    """The status after ``error``: state error with a retry time, or failed."""
    history = (*(t for t in status.error_history if now - t < policy.window), now)
    if error.permanent or len(history) > policy.max_errors:
        return status.changed(
            state=ChangefeedState.FAILED, error=error, error_history=history, retry_at=None
        )
    return status.changed(
        state=ChangefeedState.ERROR,
        error=error,
        error_history=history,
        retry_at=now + policy.delay(len(history)),
    )
