"""What a table may resume with after its changefeed followed a failover (source_switch.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from cdc.model.gtid import Flavor, GtidSet
from cdc.model.position import Position
from cdc.source.checks import ChangesUnavailable
from cdc.source.flavor import ServerInfo
from processor.handoff import HandoffGate
from processor.source_switch import check_resumable, check_snapshot_allowed

ON_NEW = ServerInfo(Flavor.MARIADB, "11", 22, domain=0, generation=1)
ON_FIRST = ServerInfo(Flavor.MARIADB, "11", 21, domain=0)
CHECKPOINT = Position("binlog.000003", 900, GtidSet.parse("0-21-100"))


@dataclass
class Gate:
    """What check_resumable reads of a hand-off gate."""

    pending: tuple[str, ...] = ()
    end: Position | None = None


def _gate(**kwargs: Any) -> HandoffGate:
    return cast(HandoffGate, Gate(**kwargs))


def test_snapshot_chunks_are_not_read_after_a_failover() -> None:
    check_snapshot_allowed("db.t", ON_FIRST)
    with pytest.raises(ChangesUnavailable, match="snapshot chunks are not read across a failover"):
        check_snapshot_allowed("db.t", ON_NEW)


def test_a_table_past_its_hand_off_resumes() -> None:
    passed = _gate(end=Position("binlog.000003", 500))
    check_resumable("db.t", CHECKPOINT, ON_NEW, passed, unsettled=False)
    check_resumable("db.t", CHECKPOINT, ON_NEW, None, unsettled=False)
    check_resumable("db.t", None, ON_NEW, None, unsettled=False)


@pytest.mark.parametrize(
    ("gate", "unsettled"),
    [
        (_gate(end=Position("binlog.000003", 1500)), False),
        (_gate(pending=("db.t:3",)), False),
        (None, True),
    ],
)
def test_a_hand_off_open_at_the_switch_fails_closed(
    gate: HandoffGate | None, unsettled: bool
) -> None:
    with pytest.raises(ChangesUnavailable, match="was handing its snapshot over"):
        check_resumable("db.t", CHECKPOINT, ON_NEW, gate, unsettled=unsettled)
    # on the server the checkpoint was read on, the hand-off goes on as usual
    check_resumable("db.t", CHECKPOINT, ON_FIRST, gate, unsettled=unsettled)
