"""When the failover guard refuses to follow the source to another server, and what it says
(``cdc.changefeed.failover.refusal``: a pure function of the changefeed and both servers)."""

from __future__ import annotations

from dataclasses import replace

from cdc.changefeed.barrier import Barrier, BarrierKind
from cdc.changefeed.failover import refusal
from cdc.changefeed.source_record import SourceRecord
from cdc.changefeed.status import ChangefeedStatus
from cdc.config import load_changefeed_config
from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position
from cdc.source.flavor import ServerInfo

OLD = ServerInfo(Flavor.MARIADB, "11.4.2-MariaDB", 1, domain=0)
NEW = ServerInfo(Flavor.MARIADB, "11.4.2-MariaDB", 2, domain=0)
RECORD = SourceRecord.first(OLD, GtidSet.parse("0-1-50"), 0.0)


def _config(**more: object) -> object:
    return load_changefeed_config(
        None,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://u@127.0.0.1:3306/?password-env=CDC_X",
            "sink_uri": "blackhole://",
            "rules": ["shop.*"],
            **more,
        },
    )


def _status(checkpoint: str | None) -> ChangefeedStatus:
    position = None if checkpoint is None else Position.parse(checkpoint)
    return ChangefeedStatus(checkpoint=position, source=RECORD)


def _refusal(
    status: ChangefeedStatus, executed: str | None, limit: str | None = None, **cfg: object
) -> str:
    return refusal(
        _config(**cfg),  # type: ignore[arg-type]
        status,
        RECORD,
        NEW,
        None if executed is None else GtidSet.parse(executed),
        None if limit is None else Position.parse(limit),
    )


def test_a_replica_with_every_transaction_is_followed() -> None:
    status = _status("binlog.000003:900 gtid=0-1-100")
    assert _refusal(status, "0-1-100", "binlog.000003:990 gtid=0-1-100") == ""
    assert _refusal(status, "0-2-130", "binlog.000003:990 gtid=0-1-120") == ""


def test_missing_transactions_of_the_checkpoint_are_named() -> None:
    reason = _refusal(_status("binlog.000003:900 gtid=0-1-100"), "0-1-97")
    assert "server_id 2" in reason and "server_id 1" in reason
    assert "lacks transactions the changefeed's checkpoint covers" in reason
    assert "domain 0: seq 98 .. 0-1-100" in reason


def test_missing_transactions_beyond_the_checkpoint_up_to_the_barrier_are_named() -> None:
    reason = _refusal(
        _status("binlog.000003:900 gtid=0-1-100"), "0-1-100", "binlog.000003:990 gtid=0-1-104"
    )
    assert "may already have delivered downstream" in reason
    assert "domain 0: seq 101 .. 0-1-104" in reason


def test_a_checkpoint_without_gtid_set_fails_closed() -> None:
    reason = _refusal(_status("binlog.000003:900"), "0-1-100")
    assert "carries no GTID set" in reason and "means nothing" in reason


def test_a_server_without_gtids_fails_closed() -> None:
    reason = _refusal(_status("binlog.000003:900 gtid=0-1-100"), None)
    assert "has no GTIDs" in reason


def test_a_target_position_fails_closed() -> None:
    reason = _refusal(
        _status("binlog.000003:900 gtid=0-1-100"),
        "0-1-100",
        snapshot_mode="never",
        target_position="binlog.000009:4",
    )
    assert "target-position" in reason


def test_a_pull_sink_fails_closed() -> None:
    reason = _refusal(
        _status("binlog.000003:900 gtid=0-1-100"),
        "0-1-100",
        sink_uri="pull://",
        snapshot_mode="never",
    )
    assert "pull:// sinks cannot follow a failover" in reason


def test_another_flavour_fails_closed() -> None:
    mysql = replace(NEW, flavor=Flavor.MYSQL, uuid="3e11fa47-71ca-11e1-9e33-c80aa9429562")
    reason = refusal(
        _config(),  # type: ignore[arg-type]
        _status(None),
        RECORD,
        mysql,
        GtidSet.parse("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"),
        None,
    )
    assert "another flavour" in reason


def test_the_record_follows_with_the_next_generation_and_keeps_the_old_one() -> None:
    new = RECORD.followed_by(NEW, GtidSet.parse("0-1-100"), 10.0)
    assert new.generation == 1 and new.names(NEW) and not new.names(OLD)
    assert new.previous[-1]["server_id"] == 1
    assert SourceRecord.from_dict(new.to_dict()) == new
    status = ChangefeedStatus(source=new)
    assert ChangefeedStatus.from_dict(status.to_dict()).source == new


def test_the_barrier_allows_transactions_read_again_that_its_limit_holds() -> None:
    limit = Barrier(BarrierKind.RESOLVED, Position.parse("binlog.000009:500 gtid=0-1-100"))
    again = Position("replica-bin.000001", 77, GtidSet.parse("0-1-99"), 1)
    beyond = Position("replica-bin.000001", 99, GtidSet.parse("0-1-101"), 1)
    assert limit.allows(again) and not limit.allows(beyond)
