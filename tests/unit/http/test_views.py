"""What the JSON API shows: lag, snapshot ETA, masking (capture.http.views), the lag history."""

from __future__ import annotations

from capture.http.lag_history import LagHistory
from capture.http.views import changefeed_lag, eta_seconds, masked, table_lag
from cdc.changefeed import TableEntry, TableRecord, TableState, TableTask
from cdc.changefeed.snapshot_progress import TableProgress
from cdc.model.schema import TableName

NOW = 1_000_000.0


def _entry(state: TableState, updated_at: float) -> TableEntry:
    record = TableRecord("c1", state, 1, updated_at=updated_at)
    return TableEntry("s.t", TableTask("c1"), 1, record)


def _progress(done: int, total: int, rows: int, rate: float | None) -> TableProgress:
    return TableProgress(TableName("s", "t"), total, done, rows, rate, None, None)


def test_lag_is_the_age_of_the_last_report_of_a_running_table() -> None:
    assert table_lag(_entry(TableState.RUNNING, NOW - 3), NOW) == 3
    assert table_lag(_entry(TableState.STOPPED, NOW - 3), NOW) is None
    assert table_lag(TableEntry("s.t", TableTask("c1"), 1, None), NOW) is None
    assert table_lag(_entry(TableState.RUNNING, NOW + 5), NOW) == 0  # clocks apart
    entries = [_entry(TableState.RUNNING, NOW - 2), _entry(TableState.RUNNING, NOW - 9)]
    assert changefeed_lag(entries, NOW) == 9
    assert changefeed_lag([_entry(TableState.ERROR, NOW - 2)], NOW) is None


def test_eta_is_the_chunks_left_at_the_pace_so_far() -> None:
    # 4 of 10 chunks, 4000 rows at 400 rows/s: 10 s so far, 2.5 s a chunk, 6 left
    assert eta_seconds(_progress(4, 10, 4000, 400.0)) == 15.0
    assert eta_seconds(_progress(0, 10, 0, None)) is None
    assert eta_seconds(_progress(10, 10, 9000, 300.0)) == 0.0


def test_every_string_is_masked_keys_included() -> None:
    secret = "S3cret-value"
    data = {
        "uri": f"mysql://u:{secret}@h:3306/",
        f"mysql://k:{secret}@h/": [f"error at mysql://u:{secret}@h/ now", 3, None],
    }
    assert secret not in repr(masked(data))
    assert masked({"n": 1.5, "b": True}) == {"n": 1.5, "b": True}


def test_the_history_keeps_the_window_and_forgets_removed_changefeeds() -> None:
    history = LagHistory(window=60, interval=5)
    history.add(NOW, {"a": 1.0, "b": None})
    history.add(NOW + 30, {"a": 2.0})
    assert history.series("a", NOW + 30) == [(NOW, 1.0), (NOW + 30, 2.0)]
    assert history.series("b", NOW + 30) == [(NOW, None)]
    history.add(NOW + 70, {"a": 3.0})
    assert history.series("a", NOW + 70) == [(NOW + 30, 2.0), (NOW + 70, 3.0)]
    assert history.series("b", NOW + 70) == []
    assert history.series("nothing", NOW) == []
