"""Backoff of a changefeed in error, and when it gives up (failed)."""

from __future__ import annotations

from cdc.changefeed import ChangefeedState, ChangefeedStatus, ErrorInfo
from owner.retry import RetryPolicy, record_error

POLICY = RetryPolicy(initial=1.0, factor=2.0, max_delay=5.0, window=100.0, max_errors=4)


def test_delays_double_up_to_the_cap() -> None:
    assert [POLICY.delay(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_errors_back_off_then_fail() -> None:
    status = ChangefeedStatus()
    error = ErrorInfo("sink down", 0.0)
    retries = []
    for now in (10.0, 20.0, 30.0, 40.0):
        status = record_error(status, error, POLICY, now)
        assert status.state is ChangefeedState.ERROR
        retries.append(status.retry_at - now)
    assert retries == [1.0, 2.0, 4.0, 5.0]
    status = record_error(status, error, POLICY, 50.0)
    assert (status.state, status.retry_at) == (ChangefeedState.FAILED, None)
    assert len(status.error_history) == 5


def test_old_errors_are_forgotten() -> None:
    status = ChangefeedStatus(error_history=(1.0, 2.0, 3.0, 4.0))
    status = record_error(status, ErrorInfo("again", 0.0), POLICY, 500.0)
    assert (status.state, status.error_history, status.retry_at) == (
        ChangefeedState.ERROR,
        (500.0,),
        501.0,
    )


def test_a_permanent_error_fails_at_once() -> None:
    status = record_error(
        ChangefeedStatus(), ErrorInfo("bad config", 0.0, permanent=True), POLICY, 1
    )
    assert status.state is ChangefeedState.FAILED
