"""Stored values of the cluster round-trip, carry a format version and refuse unknown ones."""

from __future__ import annotations

import pytest

from cdc.changefeed import (
    Barrier,
    BarrierDdl,
    BarrierKind,
    ChangefeedState,
    ChangefeedStatus,
    ErrorInfo,
    SkippedDdl,
    TableRecord,
    TableState,
    TableTask,
    TaskState,
    point_from_dict,
    point_to_dict,
)
from cdc.changefeed.status import SKIPPED_DDL_KEPT
from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema

P1 = Position("mysql-bin.000001", 400)
P2 = Position("mysql-bin.000002", 4, GtidSet.parse("0-1-9"))
SCHEMA = TableSchema(
    TableName("shop", "orders"), (Column("id", "int", "int(11)", nullable=False),), ("id",)
)


@pytest.mark.parametrize("point", [P1, P2, GtidSet.parse("0-1-100", Flavor.MARIADB)])
def test_start_points_round_trip(point: Position | GtidSet) -> None:
    assert point_from_dict(point_to_dict(point)) == point


def test_start_point_refuses_other_shapes() -> None:
    with pytest.raises(ValueError, match="'position' or 'gtid'"):
        point_from_dict({"file": "x"})
    with pytest.raises(TypeError):
        point_to_dict("mysql-bin.000001:4")  # type: ignore[arg-type]


def test_status_round_trip_with_everything() -> None:
    status = ChangefeedStatus(
        state=ChangefeedState.ERROR,
        start=GtidSet.parse("0-1-3"),
        checkpoint=P1,
        resolved=P2,
        ddl_position=P1,
        schema_version=3,
        error=ErrorInfo("sink down", 10.0, "shop.orders", permanent=False),
        error_history=(1.0, 2.0),
        retry_at=12.5,
        skipped_ddl=(SkippedDdl(P2, "create view", "CREATE VIEW v AS SELECT 1", "no", 3.0),),
    )
    data = status.to_dict()
    assert data["v"] == 1
    assert ChangefeedStatus.from_dict(data) == status


def test_status_refuses_unknown_version_and_state() -> None:
    with pytest.raises(ValueError, match="format version 2"):
        ChangefeedStatus.from_dict({"v": 2, "state": "normal"})
    with pytest.raises(ValueError, match="no valid state: 'paused'"):
        ChangefeedStatus.from_dict({"v": 1, "state": "paused"})


def test_status_keeps_only_the_newest_skipped_ddl() -> None:
    status = ChangefeedStatus()
    for n in range(SKIPPED_DDL_KEPT + 5):
        status = status.with_skipped(SkippedDdl(Position("b.000001", n), "other", "X", "r", 0.0))
    assert len(status.skipped_ddl) == SKIPPED_DDL_KEPT
    assert status.skipped_ddl[-1].position.offset == SKIPPED_DDL_KEPT + 4


def test_task_round_trip_and_moves() -> None:
    task = TableTask("capture-1", start=P1, schema=SCHEMA)
    assert TableTask.from_dict(task.to_dict()) == task
    moving = task.stop(move_to="capture-2")
    assert (moving.state, moving.move_to, moving.start, moving.schema) == (
        TaskState.STOP,
        "capture-2",
        P1,
        SCHEMA,
    )
    assert moving.run_on("capture-2") == TableTask("capture-2", start=P1, schema=SCHEMA)
    assert TableTask.from_dict(moving.to_dict()) == moving


def test_record_round_trip_and_answers() -> None:
    record = TableRecord("capture-1", TableState.STOPPED, 42, P2, SCHEMA, None, False, 5.0)
    assert TableRecord.from_dict(record.to_dict()) == record
    snapshot = TableRecord(
        "capture-1", TableState.RUNNING, 42, P2, SCHEMA, None, False, 5.0, P1, P2, P2
    )
    assert TableRecord.from_dict(snapshot.to_dict()) == snapshot
    assert record.answers(42) and not record.answers(43)
    running = TableRecord("capture-1", TableState.RUNNING, 42, P2)
    assert not running.answers(42)


def test_record_reads_a_value_holding_only_a_checkpoint() -> None:
    record = TableRecord.from_dict({"v": 1, "checkpoint": P1.to_dict(), "updated_at": 3.0})
    assert (record.state, record.checkpoint, record.task_revision) == (TableState.RUNNING, P1, 0)


def test_barrier_round_trip_and_allows() -> None:
    ddl = BarrierDdl(P2, "add column", "ALTER TABLE t ADD c INT", ("shop.t",))
    barrier = Barrier(BarrierKind.DDL, P1, ddl)
    assert Barrier.from_dict(barrier.to_dict()) == barrier
    assert barrier.allows(P1)
    assert barrier.allows(Position("mysql-bin.000001", 10))
    assert not barrier.allows(Position("mysql-bin.000001", 401))
    with pytest.raises(ValueError, match="format version None"):
        Barrier.from_dict({"kind": "ddl", "limit": P1.to_dict()})
