"""The pending update of table rules and the owner's answer, as stored in the status."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cdc.changefeed import ChangefeedStatus
from cdc.changefeed.table_update import (
    NO_BACKFILL,
    READD_HOLD_SECONDS,
    TablesUpdate,
    TablesUpdateResult,
    held_back,
    too_soon_to_add,
)
from cdc.config import load_changefeed_config
from cdc.errors import ConfigError
from cdc.model.position import Position
from cdc.sink.mysql.options import MySQLSinkOptions


def test_status_round_trip_keeps_the_pending_update_and_the_answer() -> None:
    pending = TablesUpdate(("shop.a",), no_backfill=True)
    result = TablesUpdateResult(
        "x1", Position("bin.000002", 420), {"shop.b": NO_BACKFILL}, ("shop.c",)
    )
    status = ChangefeedStatus(tables_update=pending, last_tables_update=result)
    again = ChangefeedStatus.from_dict(status.to_dict())
    assert (again.tables_update, again.last_tables_update) == (pending, result)
    assert "tables_update" not in ChangefeedStatus().to_dict()
    assert result.summary() == (
        "tables added: shop.b (no-backfill); removed: shop.c; update position bin.000002:420"
    )
    refused = TablesUpdateResult("x2", None, error="boom")
    assert refused.summary() == "tables update refused: boom"


def test_a_held_back_table_is_not_added_back_before_its_old_writes_are_surely_done() -> None:
    """A table removed while a share of its snapshot was stopped on a live capture (a
    Spark job of it may still run there, owner/removals.py): its rows could land up to
    the sink's retry timeout later, so adding it back is refused until the hold passed."""
    assert MySQLSinkOptions().retry_timeout <= READD_HOLD_SECONDS
    kept = held_back({"shop.old": 1000.0}, ["shop.gone"], 2000.0)
    assert kept == {"shop.gone": 2000.0}  # shop.old's hold is over: forgotten
    assert held_back({"shop.gone": 1990.0}, [], 2000.0) == {"shop.gone": 1990.0}
    status = ChangefeedStatus(removed_at=kept)
    assert ChangefeedStatus.from_dict(status.to_dict()).removed_at == kept
    assert "removed_at" not in ChangefeedStatus().to_dict()
    added = {"shop.gone": "backfill", "shop.new": "backfill"}
    why = too_soon_to_add(added, kept, 2000.0 + 42)
    assert why is not None
    assert why.startswith("shop.gone was removed by an update 42 s ago")
    assert "from 1970-01-01 00:38:20 UTC (300 s after its removal)" in why
    assert too_soon_to_add({"shop.new": "backfill"}, kept, 2042.0) is None
    assert too_soon_to_add(added, kept, 2000.0 + READD_HOLD_SECONDS) is None


def base(**overrides: object):  # type: ignore[no-untyped-def]
    return load_changefeed_config(
        None,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://repl@db1:3306/?password-env=SRC_PW",
            "sink_uri": "blackhole://",
            **overrides,
        },
    )


def test_config_no_backfill_rules_and_what_else_changed() -> None:
    config = replace(base(rules=["shop.*"]), no_backfill=("shop.events_*",))
    assert config.to_dict()["filter"]["no-backfill"] == ["shop.events_*"]
    assert type(config).from_dict(config.to_dict(mask=False)) == config
    assert pending_rules(config) == ("*.*",)
    assert base().other_changes(config) == []
    assert base().table_rules_changed(config)
    assert base().other_changes(base(chunk_size=10, sink_uri="blackhole://")) == ["snapshot"]
    with pytest.raises(ConfigError, match="filter.no-backfill"):
        replace(base(), no_backfill=("shop.",))


def pending_rules(config) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    return TablesUpdate(("*.*",)).tracked(config).rules
