"""What `cdcctl changefeed update` prints of the owner's answer to new table rules."""

from __future__ import annotations

from cdc.changefeed.table_update import BACKFILL, NO_BACKFILL, TablesUpdateResult
from cdc.cli.changefeed_cmd import _tables_rows
from cdc.model.position import Position


def test_one_row_per_table_added_or_removed_with_where_a_streamed_one_starts() -> None:
    result = TablesUpdateResult(
        "u1",
        Position("mysql-bin.000042", 91822),
        {"shop.refunds": BACKFILL, "shop.events": NO_BACKFILL},
        ("shop.audit",),
    )
    assert _tables_rows(result.to_dict()) == [
        {"table": "shop.refunds", "change": "added (backfill)", "from": None},
        {"table": "shop.events", "change": "added (no-backfill)", "from": "mysql-bin.000042:91822"},
        {"table": "shop.audit", "change": "removed", "from": None},
    ]


def test_rules_matching_no_new_table_say_so() -> None:
    result = TablesUpdateResult("u2", Position("mysql-bin.000001", 4))
    assert _tables_rows(result.to_dict()) == [
        {"table": None, "change": "no table added or removed", "from": "mysql-bin.000001:4"}
    ]
