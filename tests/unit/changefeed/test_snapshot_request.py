"""Re-snapshot requests: their value, when a table may be re-snapshotted, which
configurations are refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc.changefeed import TableEntry, TableRecord, TableState, TableTask
from cdc.changefeed.snapshot_request import (
    RequestState,
    SnapshotRequest,
    not_ready,
    refusal,
)
from cdc.changefeed.tables import TaskState
from cdc.config import load_changefeed_config
from cdc.config.changefeed import ChangefeedConfig
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.records import ChunkRecord, ChunkState

T = TableName("shop", "orders")


def _config(sink: str = "mysql://u@127.0.0.1:3306/?password-env=CDC_X", **more: Any) -> Any:
    config: ChangefeedConfig = load_changefeed_config(
        None,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://u@127.0.0.1:3306/?password-env=CDC_X",
            "sink_uri": sink,
            "rules": ["shop.*"],
            **more,
        },
    )
    return config


def _entry(
    state: TableState = TableState.RUNNING,
    checkpoint: str | None = "binlog.000001:900",
    task: TaskState = TaskState.RUN,
    **record: Any,
) -> TableEntry:
    position = None if checkpoint is None else Position.parse(checkpoint)
    return TableEntry(
        str(T),
        TableTask("c1", task),
        7,
        TableRecord("c1", state, 7, position, **record),
    )


def _chunk(n: int, done: bool, hw: str | None = None, request: str | None = None) -> ChunkRecord:
    lower, upper = (None if n == 0 else n * 10), (None if n == 1 else (n + 1) * 10)
    chunk = SnapshotChunk(T, n, "id", lower, upper)
    state = ChunkState.DONE if done else ChunkState.PENDING
    mark = Position.parse(hw) if hw else None
    return ChunkRecord(chunk, state, mark, 10, 1.0, 2.0 if done else None, request)


def test_a_request_round_trips_through_its_value() -> None:
    request = SnapshotRequest(
        "abc", T, "id < 5", RequestState.RUNNING, "alice (admin)", 1.0, 2.0, None, 3, 40
    )
    assert SnapshotRequest.from_dict(request.to_dict()) == request
    assert request.active
    assert not SnapshotRequest("a", T, None, RequestState.FAILED, "", 1.0).active


def test_a_chunk_record_keeps_its_request() -> None:
    record = _chunk(0, True, "binlog.000001:10", request="abc")
    assert ChunkRecord.from_dict(record.to_dict()).request == "abc"
    assert "request" not in _chunk(0, True, "binlog.000001:10").to_dict()


def test_a_streaming_table_whose_snapshot_is_over_may_be_re_snapshotted() -> None:
    settled = [_chunk(0, True, "binlog.000001:100"), _chunk(1, True, "binlog.000001:200")]
    assert not_ready(T, _entry(), settled) is None
    assert not_ready(T, _entry(), []) is None  # snapshot mode never: no chunk records
    idle = [_chunk(0, True, "binlog.000001:900"), _chunk(1, True, "binlog.000001:900")]
    assert not_ready(T, _entry(), idle) is None  # an idle source: checkpoint at the marks
    earlier = [_chunk(0, True, "binlog.000001:100", "old"), _chunk(1, False, None, "old")]
    assert not_ready(T, _entry(), earlier) is None  # an earlier request's records


@pytest.mark.parametrize(
    ("entry", "records", "says"),
    [
        (None, [], "does not replicate"),
        (_entry(task=TaskState.STOP), [], "is not running"),
        (_entry(state=TableState.ERROR, error="boom"), [], "is not streaming (state error: boom)"),
        (_entry(checkpoint=None), [], "is not streaming"),
        (
            _entry(reread_from=Position.parse("binlog.000001:50")),
            [],
            "reading snapshot chunks again",
        ),
        (
            _entry(),
            [_chunk(0, True, "binlog.000001:100"), _chunk(1, False)],
            "still snapshotting (1 of 2 chunks done)",
        ),
        (
            _entry(checkpoint="binlog.000001:150"),
            [_chunk(0, True, "binlog.000001:100"), _chunk(1, True, "binlog.000001:200")],
            "still handing its snapshot over",
        ),
    ],
)
def test_a_table_not_streaming_yet_is_refused(
    entry: TableEntry | None, records: list[ChunkRecord], says: str
) -> None:
    reason = not_ready(T, entry, records)
    assert reason is not None and says in reason, reason


def test_a_mysql_sink_takes_it() -> None:
    assert refusal(_config(), T) is None


@pytest.mark.parametrize(
    "sink", ["file:///tmp/cdc-out", "kafka://127.0.0.1:9092/topic?protocol=canal-json", "pull://"]
)
def test_sinks_that_cannot_remove_rows_by_range_are_refused(sink: str) -> None:
    reason = refusal(_config(sink, snapshot_mode="never"), T)
    assert reason is not None and "only a MySQL/MariaDB sink" in reason, reason


def test_tables_under_event_filters_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "cf.toml"
    path.write_text(
        '[[filter.event-filters]]\nmatcher = ["shop.orders"]\nignore-event = ["delete"]\n'
    )
    config = load_changefeed_config(
        path,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://u@127.0.0.1:3306/?password-env=CDC_X",
            "sink_uri": "mysql://u@127.0.0.1:3306/?password-env=CDC_X",
            "rules": ["shop.*"],
        },
    )
    reason = refusal(config, T)
    assert reason is not None and "event filter" in reason
    assert refusal(config, TableName("shop", "other")) is None


def test_tables_under_column_rules_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "cf.toml"
    path.write_text('[[sink.column-selectors]]\nmatcher = ["shop.orders"]\ncolumns = ["*"]\n')
    config = load_changefeed_config(
        path,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://u@127.0.0.1:3306/?password-env=CDC_X",
            "sink_uri": "mysql://u@127.0.0.1:3306/?password-env=CDC_X",
            "rules": ["shop.*"],
        },
    )
    reason = refusal(config, T)
    assert reason is not None and "column rules" in reason
