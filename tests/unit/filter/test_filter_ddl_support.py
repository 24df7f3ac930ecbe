"""Which DDL a database sink applies, and the warning for the rest."""

from __future__ import annotations

from cdc.config.changefeed import DEFAULT_SUPPORTED_DDL as CONFIG_DEFAULT
from cdc.filter import DEFAULT_SUPPORTED_DDL, ddl_skip_reason, is_supported
from cdc.model.events import DdlEvent, DdlKind
from cdc.model.position import Position
from cdc.model.schema import TableName

POS = Position("mysql-bin.000007", 1234)
ORDERS = TableName("shop", "orders")


def event(kind: DdlKind, statement: str, *tables: TableName) -> DdlEvent:
    return DdlEvent(POS, "shop", tables, kind, statement)


def test_default_set_is_the_config_default():
    assert {kind.value for kind in DEFAULT_SUPPORTED_DDL} == set(CONFIG_DEFAULT)


def test_default_set_covers_table_ddl_but_not_unknown_statements():
    for kind in (
        DdlKind.CREATE_SCHEMA,
        DdlKind.DROP_SCHEMA,
        DdlKind.CREATE_TABLE,
        DdlKind.DROP_TABLE,
        DdlKind.TRUNCATE_TABLE,
        DdlKind.RENAME_TABLE,
        DdlKind.ALTER_TABLE,
        DdlKind.ADD_COLUMN,
        DdlKind.DROP_COLUMN,
        DdlKind.MODIFY_COLUMN,
        DdlKind.ADD_INDEX,
        DdlKind.DROP_INDEX,
    ):
        assert is_supported(kind), kind
    assert not is_supported(DdlKind.OTHER)
    assert not is_supported(DdlKind.CREATE_VIEW)


def test_custom_sets_of_kinds_or_names():
    assert is_supported(DdlKind.CREATE_VIEW, {DdlKind.CREATE_VIEW})
    assert not is_supported(DdlKind.CREATE_TABLE, {DdlKind.CREATE_VIEW})
    assert is_supported(DdlKind.ADD_COLUMN, ("create table", "add column"))
    assert not is_supported(DdlKind.DROP_COLUMN, ("create table", "add column"))
    assert not is_supported(DdlKind.CREATE_TABLE, ())


def test_skip_reason_names_statement_kind_position_and_remedy():
    text = ddl_skip_reason(event(DdlKind.CREATE_VIEW, "CREATE VIEW v AS\n  SELECT 1", ORDERS))
    assert "mysql-bin.000007:1234" in text
    assert "shop.orders" in text
    assert "kind 'create view'" in text
    assert "CREATE VIEW v AS SELECT 1" in text
    assert "add 'create view' to the changefeed's supported-ddl" in text


def test_skip_reason_for_unclassified_statements():
    text = ddl_skip_reason(event(DdlKind.OTHER, "CREATE TRIGGER t BEFORE INSERT ON orders"))
    assert "kind 'other'" in text
    assert "could not be classified" in text
    assert "apply it to the downstream by hand" in text
    assert "on shop:" in text


def test_skip_reason_truncates_long_statements():
    statement = "ALTER TABLE orders COMMENT '" + "x" * 1000 + "'"
    text = ddl_skip_reason(event(DdlKind.MODIFY_TABLE_COMMENT, statement, ORDERS))
    assert "x" * 150 in text
    assert "x" * 300 not in text
    assert f"... ({len(statement)} chars)" in text


def test_skip_reason_masks_secrets():
    text = ddl_skip_reason(
        event(
            DdlKind.OTHER,
            "CREATE SERVER s FOREIGN DATA WRAPPER mysql OPTIONS (PASSWORD 'hunter2', "
            "HOST 'mysql://u:s3cret@h/db')",
        )
    )
    assert "hunter2" not in text
    assert "s3cret" not in text
    assert "PASSWORD '******'" in text
    text = ddl_skip_reason(event(DdlKind.OTHER, "CREATE USER u IDENTIFIED BY 'pa''ss'"))
    assert "pa''ss" not in text
    assert "CREATE USER u IDENTIFIED BY '******';" in text


def test_one_verdict_for_ignored_unsupported_and_applied_ddl():
    from cdc.config.changefeed import EventFilterRule
    from cdc.filter import EventFilter
    from cdc.filter.ddl_support import IGNORED_BY_EVENT_FILTER, skip_reason

    events = EventFilter([EventFilterRule(("shop.orders",), ignore_event=("drop table",))])
    drop = event(DdlKind.DROP_TABLE, "DROP TABLE orders", ORDERS)
    view = event(DdlKind.CREATE_VIEW, "CREATE VIEW v AS SELECT 1", TableName("shop", "v"))
    add = event(DdlKind.ADD_COLUMN, "ALTER TABLE orders ADD c INT", ORDERS)
    assert skip_reason(drop, events, DEFAULT_SUPPORTED_DDL) == IGNORED_BY_EVENT_FILTER
    assert skip_reason(view, events, DEFAULT_SUPPORTED_DDL) == ddl_skip_reason(view)
    assert skip_reason(add, events, DEFAULT_SUPPORTED_DDL) is None
    assert skip_reason(drop, None, DEFAULT_SUPPORTED_DDL) is None
