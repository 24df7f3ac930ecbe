"""The owner carries out an operator's decision only for the DDL it was made for."""

from __future__ import annotations

from cdc.changefeed.ddl_decision import DdlAction, DdlDecision
from cdc.config import load_changefeed_config
from cdc.logs import get_logger
from cdc.model.events import DdlEvent, DdlKind
from cdc.model.position import Position
from cdc.model.schema import TableName
from owner.ddl import DdlRefused, carry_out, decision_for


def ddl(text: str) -> DdlEvent:
    return DdlEvent(
        Position.parse(text), "", (TableName("db", "t"),), DdlKind.ADD_INDEX, "ALTER TABLE ..."
    )


def test_a_decision_applies_to_its_own_ddl_only() -> None:
    decision = DdlDecision(Position.parse("b.000001:500 gtid=0-1-9"), DdlAction.SKIP, None, 1.0)
    assert decision_for(decision, ddl("b.000001:500 gtid=0-1-9")) is decision
    assert decision_for(decision, ddl("b.000001:501 gtid=0-1-10")) is None
    assert decision_for(decision, ddl("b.000002:500 gtid=0-1-9")) is None
    assert decision_for(None, ddl("b.000001:500")) is None


def test_a_skip_is_recorded_as_the_operator_s() -> None:
    config = load_changefeed_config(
        None, {"changefeed_id": "cf", "source_uri": "mysql://u@h:3306/", "sink_uri": "blackhole://"}
    )
    event = ddl("b.000001:500")
    decision = DdlDecision(event.position, DdlAction.SKIP, None, 0.0)
    skipped = carry_out(config, event, decision, get_logger(__name__))
    assert skipped is not None and skipped.position == event.position
    assert "skipped by an operator" in skipped.reason and "1970-01-01" in skipped.reason


def test_a_refusal_names_the_position_and_the_way_on() -> None:
    error = DdlRefused("cf", ddl("b.000001:500"), RuntimeError("boom"))
    text = str(error)
    assert "DDL at b.000001:500" in text and "boom" in text
    assert "cdcctl changefeed ddl skip|replace -c cf --position 'b.000001:500'" in text
