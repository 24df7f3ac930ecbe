"""After new table rules: the DDL puller that follows them from where the stopped one
stood (``DdlTracker.successor``), and the DDL already in a table added without backfill
(``anchored_tables`` with the tasks' starts)."""

from __future__ import annotations

from dataclasses import replace

from cdc.changefeed import Barrier
from cdc.config import load_changefeed_config
from cdc.model.position import Position
from cdc.schema.ddl import parse_ddl
from owner.ddl import anchored_tables
from owner.ddl_tracker import DdlTracker, PendingDdl

OLD = load_changefeed_config(
    None,
    {
        "changefeed_id": "cf",
        "source_uri": "mysql://repl@db1:3306/?password-env=SRC_PW",
        "sink_uri": "blackhole://",
        "rules": ["shop.a", "shop.gone"],
    },
)
NEW = replace(OLD, rules=("shop.a", "shop.b"))


def pending(statement: str, offset: int) -> PendingDdl:
    ddl = parse_ddl(statement, "shop", Position("bin.000001", offset))
    return PendingDdl(Position("bin.000001", offset - 1), ddl, ddl.position)


def test_the_successor_starts_where_the_stopped_one_stood_with_its_pending_ddl() -> None:
    published: list[Barrier] = []
    old = DdlTracker(
        OLD, Position("bin.000001", 4), None, Position("bin.000001", 50), published.append
    )
    kept, dropped = (
        pending("ALTER TABLE a ADD c INT", 100),
        pending("ALTER TABLE gone ADD c INT", 200),
    )
    old._pending.extend([kept, dropped])
    old._resolved = Position("bin.000001", 300)
    successor = old.successor(NEW)
    assert successor is not None and successor.config == NEW
    assert successor.start == Position("bin.000001", 300)
    # the DDL of a table the new rules dropped is no longer waited for
    assert successor.next() is kept
    successor.done(kept)
    assert successor.next() is None
    assert published[-1].limit == Position("bin.000001", 300)


def test_no_successor_with_a_target_position() -> None:
    target = replace(OLD, target_position="bin.000009:4")
    old = DdlTracker(target, Position("bin.000001", 4), None, None, lambda b: None)
    assert old.successor(NEW) is None


def test_a_ddl_at_or_before_the_start_of_a_table_added_without_backfill_is_not_applied() -> None:
    start = Position("bin.000001", 500)
    before = parse_ddl("ALTER TABLE b ADD c INT", "shop", Position("bin.000001", 400))
    after = parse_ddl("ALTER TABLE b ADD d INT", "shop", Position("bin.000001", 600))
    assert anchored_tables(before, {"shop.b": None}, {"shop.b": start}) == ["shop.b"]
    assert anchored_tables(after, {"shop.b": None}, {"shop.b": start}) == []
    assert anchored_tables(before, {"shop.b": None}) == []


def test_the_tables_pending_ddl_create_are_left_to_the_ddl_path() -> None:
    """Found by the fuzz (seed 6101, a table removed and added back): a table renamed
    while the barrier held the RENAME (a snapshot running) was on the source under its
    new name without a task, so the next update added it with a backfill; the RENAME,
    applied later, then found the new name taken and left the old downstream table
    behind. The names the pending DDL create are the DDL path's to add."""
    wide = replace(OLD, rules=("shop.*",))
    old = DdlTracker(wide, Position("bin.000001", 4), None, None, lambda b: None)
    old._pending.extend(
        [
            pending("CREATE TABLE n1 (id INT PRIMARY KEY)", 100),
            pending("RENAME TABLE n1 TO n1_r", 200),
            pending("CREATE TABLE gone_soon (id INT PRIMARY KEY)", 300),
            pending("DROP TABLE gone_soon", 400),
            pending("RENAME TABLE a TO a2", 500),
        ]
    )
    assert old.tables_created(wide, ["shop.a"]) == {"shop.n1_r", "shop.a2"}
    # under rules that no longer match a table, its DDL are not carried over
    narrow = replace(OLD, rules=("shop.*", "!shop.n1", "!shop.n1_r"))
    assert old.tables_created(narrow, ["shop.a"]) == {"shop.a2"}
