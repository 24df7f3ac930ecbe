"""cdc.metrics without a server: per-table counters, lag gauges and their owners, the endpoint."""

from __future__ import annotations

import time
import urllib.request
import uuid

import pytest
from prometheus_client import REGISTRY

from capture.metrics_endpoint import MetricsEndpoint
from cdc import metrics
from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.playground.ports import free_port

TABLE = TableName("shop", "items")
AT = Position("binlog.000001", 4)


def _change(op: Op, name: str) -> RowChange:
    before = {"id": 1, "name": "old"} if op in (Op.UPDATE, Op.DELETE) else None
    after = {"id": 1, "name": name} if op is not Op.DELETE else None
    return RowChange(TABLE, op, before, after, (1,), AT)


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


@pytest.fixture
def changefeed() -> str:
    return f"cf-{uuid.uuid4().hex[:8]}"


def test_rows_are_counted_by_op_with_their_approximate_bytes(changefeed: str) -> None:
    table = metrics.TableMetrics(changefeed, "shop.items")
    table.rows([_change(Op.CREATE, "abc"), _change(Op.CREATE, "de"), _change(Op.DELETE, "")])
    table.rows([_change(Op.UPDATE, "xyz")])
    labels = {"changefeed": changefeed, "table": "shop.items"}
    counts = {op.value: _value("cdc_rows_total", **labels, op=op.value) for op in Op}
    assert counts == {"c": 2, "u": 1, "d": 1, "r": 0}
    # id (8) + name by length: 8+3, 8+2, the deleted row's before image 8+3, 8+3
    assert _value("cdc_bytes_total", **labels) == 11 + 10 + 11 + 11
    table.close()


def test_lag_series_exist_while_the_pipeline_runs(changefeed: str) -> None:
    labels = {"changefeed": changefeed, "table": "shop.items"}
    table = metrics.TableMetrics(changefeed, "shop.items")
    assert _value("cdc_resolved_lag_seconds", **labels) is None
    table.checkpoint(None)
    assert _value("cdc_checkpoint_lag_seconds", **labels) is None
    table.resolved()
    table.checkpoint(AT)
    time.sleep(0.05)
    resolved = _value("cdc_resolved_lag_seconds", **labels)
    checkpoint = _value("cdc_checkpoint_lag_seconds", **labels)
    assert resolved >= 0.05 and checkpoint >= 0.05
    assert abs(checkpoint - resolved) < 0.5  # the same moment, read a little apart
    with table.flush():
        time.sleep(0.01)
    assert _value("cdc_sink_flush_seconds_count", changefeed=changefeed) == 1
    assert _value("cdc_sink_flush_seconds_sum", changefeed=changefeed) >= 0.01
    table.close()
    assert _value("cdc_resolved_lag_seconds", **labels) is None
    assert _value("cdc_checkpoint_lag_seconds", **labels) is None


def test_lag_is_the_age_of_the_commit_the_position_stands_for(changefeed: str) -> None:
    labels = {"changefeed": changefeed, "table": "shop.backlog"}
    table = metrics.TableMetrics(changefeed, "shop.backlog")
    table.resolved(time.time() - 600)
    table.checkpoint(AT)
    assert 599 < _value("cdc_resolved_lag_seconds", **labels) < 700
    assert 599 < _value("cdc_checkpoint_lag_seconds", **labels) < 700
    table.resolved(None)
    assert _value("cdc_resolved_lag_seconds", **labels) < 5
    assert _value("cdc_checkpoint_lag_seconds", **labels) > 599
    table.checkpoint(AT)
    assert _value("cdc_checkpoint_lag_seconds", **labels) < 5
    table.close()


def test_only_the_newest_pipeline_of_a_table_owns_its_lag(changefeed: str) -> None:
    labels = {"changefeed": changefeed, "table": "shop.items"}
    old = metrics.TableMetrics(changefeed, "shop.items")
    old.resolved()
    new = metrics.TableMetrics(changefeed, "shop.items")
    assert _value("cdc_resolved_lag_seconds", **labels) is None
    old.resolved()
    assert _value("cdc_resolved_lag_seconds", **labels) is None
    new.resolved()
    old.close()
    assert _value("cdc_resolved_lag_seconds", **labels) is not None
    new.close()
    assert _value("cdc_resolved_lag_seconds", **labels) is None


def test_snapshot_chunks_count_as_read_rows(changefeed: str) -> None:
    metrics.snapshot_chunks_done(changefeed, "shop.items", 3, 250)
    metrics.snapshot_chunks_done(changefeed, "shop.items", 1, 50)
    labels = {"changefeed": changefeed, "table": "shop.items"}
    assert _value("cdc_snapshot_chunks_total", **labels) == 4
    assert _value("cdc_snapshot_rows_total", **labels) == 300
    assert _value("cdc_rows_total", **labels, op="r") == 300


def test_owner_gauge_and_changes() -> None:
    before = _value("cdc_owner_changes_total") or 0.0
    metrics.became_owner()
    assert _value("cdc_capture_is_owner") == 1
    metrics.stepped_down()
    assert _value("cdc_capture_is_owner") == 0
    assert _value("cdc_owner_changes_total") == before + 1


def test_endpoint_serves_metrics_and_frees_its_port() -> None:
    port = free_port()
    endpoint = MetricsEndpoint("127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
        assert "# TYPE cdc_rows_total counter" in text
        assert "cdc_capture_is_owner" in text
        with pytest.raises(OSError):
            MetricsEndpoint("127.0.0.1", port)
    finally:
        endpoint.stop()
    MetricsEndpoint("127.0.0.1", port).stop()
