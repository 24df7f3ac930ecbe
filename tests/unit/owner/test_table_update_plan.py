"""Which tables new rules add (and how) and remove: ``owner.table_update.plan_tables``."""

from __future__ import annotations

from dataclasses import replace

from cdc.changefeed.table_update import BACKFILL, NO_BACKFILL, TablesUpdate
from cdc.config import load_changefeed_config
from cdc.config.changefeed import ChangefeedConfig
from owner.table_update import plan_tables


def config(**overrides: object) -> ChangefeedConfig:
    return load_changefeed_config(
        None,
        {
            "changefeed_id": "cf",
            "source_uri": "mysql://repl@db1:3306/?password-env=SRC_PW",
            "sink_uri": "blackhole://",
            **overrides,
        },
    )


SOURCE = ["shop.a", "shop.b", "shop.events_1", "shop.old", "other.x"]


def test_new_tables_are_backfilled_and_unmatched_ones_removed() -> None:
    new = config(rules=["shop.*", "!shop.old"])
    changes = plan_tables(
        TablesUpdate(("shop.a", "shop.old")), new, SOURCE[:4], ["shop.a", "shop.old"]
    )
    assert changes.added == {"shop.b": BACKFILL, "shop.events_1": BACKFILL}
    assert changes.removed == ("shop.old",)


def test_no_backfill_flag_rules_and_mode_never() -> None:
    flagged = plan_tables(
        TablesUpdate(("shop.a",), no_backfill=True),
        config(rules=["shop.*"]),
        ["shop.a", "shop.b"],
        ["shop.a"],
    )
    assert flagged.added == {"shop.b": NO_BACKFILL}
    by_rule = replace(config(rules=["shop.*"]), no_backfill=("shop.events_*",))
    ruled = plan_tables(TablesUpdate(("shop.a",)), by_rule, SOURCE[:3], ["shop.a"])
    assert ruled.added == {"shop.b": BACKFILL, "shop.events_1": NO_BACKFILL}
    never = config(rules=["shop.*"], snapshot_mode="never")
    assert plan_tables(
        TablesUpdate(("shop.a",)), never, ["shop.a", "shop.b"], ["shop.a"]
    ).added == {"shop.b": NO_BACKFILL}


def test_rules_matching_no_new_table_change_nothing() -> None:
    changes = plan_tables(
        TablesUpdate(("shop.a",)), config(rules=["shop.a", "shop.nope_*"]), ["shop.a"], ["shop.a"]
    )
    assert (dict(changes.added), changes.removed) == ({}, ())
