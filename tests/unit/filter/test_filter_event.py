"""Event filter: rows by op and by values, DDL by kind and by SQL text."""

from __future__ import annotations

import pytest

from cdc.config.changefeed import EventFilterRule
from cdc.errors import ConfigError
from cdc.filter import ALTER_TABLE_KINDS, EventFilter, ignore_event_names
from cdc.model.events import DdlEvent, DdlKind, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName

POS = Position("mysql-bin.000001", 4)
WORKER = TableName("test", "worker")
OTHER = TableName("test", "other")


def row(op: Op, before=None, after=None, table: TableName = WORKER) -> RowChange:
    image = after if after is not None else before
    return RowChange(table, op, before, after, (image["id"],), POS)


def insert(values: dict, table: TableName = WORKER) -> RowChange:
    return row(Op.CREATE, after=values, table=table)


def read(values: dict, table: TableName = WORKER) -> RowChange:
    return row(Op.READ, after=values, table=table)


def update(before: dict, after: dict, table: TableName = WORKER) -> RowChange:
    return row(Op.UPDATE, before=before, after=after, table=table)


def delete(values: dict, table: TableName = WORKER) -> RowChange:
    return row(Op.DELETE, before=values, table=table)


def ddl(kind: DdlKind, statement: str, *tables: TableName, schema: str = "test") -> DdlEvent:
    return DdlEvent(POS, schema, tables, kind, statement)


def only(**settings) -> EventFilter:
    settings.setdefault("matcher", ("test.worker",))
    return EventFilter([EventFilterRule(**settings)])


ALICE = {"id": 1, "name": "alice", "age": 30}
KID = {"id": 2, "name": "kid", "age": 10}


@pytest.mark.parametrize(
    ("events", "ignored"),
    [
        (("insert",), {"insert", "read"}),
        (("update",), {"update"}),
        (("delete",), {"delete"}),
        (("all dml",), {"insert", "read", "update", "delete"}),
        (("insert", "delete"), {"insert", "read", "delete"}),
        (("all ddl",), set()),
        (("drop table",), set()),
        ((), set()),
    ],
)
def test_ignore_event_per_dml_op(events, ignored):
    f = only(ignore_event=events)
    changes = {
        "insert": insert(ALICE),
        "read": read(ALICE),
        "update": update(ALICE, KID),
        "delete": delete(ALICE),
    }
    assert {name for name, change in changes.items() if f.should_ignore_row(change)} == ignored


def test_rules_apply_only_to_matched_tables():
    f = only(ignore_event=("all dml",))
    assert f.should_ignore_row(insert(ALICE))
    assert not f.should_ignore_row(insert(ALICE, table=OTHER))
    assert not f.should_ignore_row(insert(ALICE, table=TableName("prod", "worker")))


def test_matcher_uses_table_filter_syntax_and_case_sensitivity():
    rule = EventFilterRule(matcher=("Test.*", "!test.other"), ignore_event=("insert",))
    insensitive = EventFilter([rule])
    assert insensitive.should_ignore_row(insert(ALICE))
    assert not insensitive.should_ignore_row(insert(ALICE, table=OTHER))
    assert insensitive.should_ignore_row(insert(ALICE, table=TableName("TEST", "x")))
    sensitive = EventFilter([rule], case_sensitive=True)
    assert not sensitive.should_ignore_row(insert(ALICE))
    assert sensitive.should_ignore_row(insert(ALICE, table=TableName("Test", "x")))


def test_any_rule_can_ignore():
    f = EventFilter(
        [
            EventFilterRule(matcher=("test.*",), ignore_event=("delete",)),
            EventFilterRule(matcher=("test.worker",), ignore_insert_value_expr="age < 18"),
        ]
    )
    assert f.should_ignore_row(delete(ALICE))
    assert f.should_ignore_row(delete(ALICE, table=OTHER))
    assert f.should_ignore_row(insert(KID))
    assert not f.should_ignore_row(insert(KID, table=OTHER))
    assert not f.should_ignore_row(insert(ALICE))


def test_insert_expression_tests_the_new_row_and_snapshot_reads():
    f = only(ignore_insert_value_expr="id >= 2")
    assert f.should_ignore_row(insert(KID))
    assert f.should_ignore_row(read(KID))
    assert not f.should_ignore_row(insert(ALICE))
    assert not f.should_ignore_row(read(ALICE))
    # The insert expression says nothing about updates or deletes.
    assert not f.should_ignore_row(update(KID, KID))
    assert not f.should_ignore_row(delete(KID))


def test_update_expressions_test_old_and_new_images():
    old_only = only(ignore_update_old_value_expr="age < 18")
    assert old_only.should_ignore_row(update(KID, ALICE))
    assert not old_only.should_ignore_row(update(ALICE, KID))
    new_only = only(ignore_update_new_value_expr="age < 18")
    assert new_only.should_ignore_row(update(ALICE, KID))
    assert not new_only.should_ignore_row(update(KID, ALICE))
    both = only(
        ignore_update_old_value_expr="name = 'alice'",
        ignore_update_new_value_expr="name = 'kid'",
    )
    assert both.should_ignore_row(update(ALICE, ALICE))
    assert both.should_ignore_row(update(KID, KID))
    assert not both.should_ignore_row(update(KID, ALICE))
    assert not old_only.should_ignore_row(insert(KID))
    assert not old_only.should_ignore_row(delete(KID))


def test_delete_expression_tests_the_removed_row():
    f = only(ignore_delete_value_expr="name = 'kid'")
    assert f.should_ignore_row(delete(KID))
    assert not f.should_ignore_row(delete(ALICE))
    assert not f.should_ignore_row(insert(KID))
    assert not f.should_ignore_row(update(KID, KID))


def test_null_results_do_not_ignore_rows():
    f = only(ignore_insert_value_expr="age < 18")
    assert not f.should_ignore_row(insert({"id": 3, "name": "x", "age": None}))
    f = only(ignore_insert_value_expr="NOT (age >= 18)")
    assert not f.should_ignore_row(insert({"id": 3, "name": "x", "age": None}))


def test_ticdc_documented_example():
    f = only(
        ignore_event=("insert",),
        ignore_sql=("^drop", "add column"),
        ignore_delete_value_expr="name = 'john'",
        ignore_update_old_value_expr="age < 18 or name = 'lili'",
        ignore_update_new_value_expr="gender = 'male' and age > 18",
    )
    john = {"id": 1, "name": "john", "age": 40, "gender": "male"}
    lili = {"id": 2, "name": "lili", "age": 40, "gender": "female"}
    anna = {"id": 3, "name": "anna", "age": 40, "gender": "female"}
    assert f.should_ignore_row(insert(anna))
    assert f.should_ignore_row(delete(john))
    assert not f.should_ignore_row(delete(anna))
    assert f.should_ignore_row(update(lili, anna))
    assert f.should_ignore_row(update(anna, john))
    assert not f.should_ignore_row(update(anna, anna))
    assert f.should_ignore_ddl(ddl(DdlKind.DROP_TABLE, "DROP TABLE worker", WORKER))
    assert f.should_ignore_ddl(
        ddl(DdlKind.ADD_COLUMN, "ALTER TABLE worker ADD COLUMN x int", WORKER)
    )
    assert not f.should_ignore_ddl(
        ddl(DdlKind.ADD_INDEX, "ALTER TABLE worker ADD INDEX (age)", WORKER)
    )


@pytest.mark.parametrize("kind", [k for k in DdlKind if k is not DdlKind.ALTER_TABLE])
def test_ignore_event_per_ddl_kind(kind):
    f = only(ignore_event=(kind.value,))
    assert f.should_ignore_ddl(ddl(kind, "SOME DDL", WORKER))
    others = [k for k in DdlKind if k is not kind]
    assert not any(f.should_ignore_ddl(ddl(k, "SOME DDL", WORKER)) for k in others)
    assert not f.should_ignore_row(insert(ALICE))


def test_alter_table_covers_every_alter_clause_and_index_ddl():
    f = only(ignore_event=("alter table",))
    ignored = {k for k in DdlKind if f.should_ignore_ddl(ddl(k, "SOME DDL", WORKER))}
    assert ignored == ALTER_TABLE_KINDS
    assert DdlKind.ADD_INDEX in ignored
    assert DdlKind.RENAME_TABLE not in ignored
    assert DdlKind.TRUNCATE_TABLE not in ignored


def test_all_ddl_ignores_every_kind_but_no_row():
    f = only(ignore_event=("all ddl",))
    assert all(f.should_ignore_ddl(ddl(k, "SOME DDL", WORKER)) for k in DdlKind)
    assert not f.should_ignore_row(delete(ALICE))


def test_event_names_accept_aliases_and_any_spelling():
    f = only(ignore_event=("Create  Database", "DROP_SCHEMA", "ADD COLUMN"))
    assert f.should_ignore_ddl(ddl(DdlKind.CREATE_SCHEMA, "CREATE DATABASE test"))
    assert f.should_ignore_ddl(ddl(DdlKind.DROP_SCHEMA, "DROP DATABASE test"))
    assert f.should_ignore_ddl(ddl(DdlKind.ADD_COLUMN, "ALTER TABLE worker ADD c int", WORKER))
    assert "create database" in ignore_event_names()
    assert "all dml" in ignore_event_names()


@pytest.mark.parametrize(
    ("patterns", "statement", "ignored"),
    [
        (("^drop",), "DROP TABLE worker", True),
        (("^drop",), "drop table worker", True),
        (("^drop",), "  DROP TABLE worker", False),
        (("^drop",), "ALTER TABLE worker DROP COLUMN x", False),
        (("drop column",), "ALTER TABLE worker DROP COLUMN x", True),
        (("add\\s+column",), "ALTER TABLE worker ADD   COLUMN x int", True),
        (("^alter table `?worker`? add",), "ALTER TABLE `worker` ADD x int", True),
        (("^create", "^drop"), "DROP TABLE worker", True),
        (("^create", "^rename"), "DROP TABLE worker", False),
        (("x{2,}",), "ALTER TABLE worker COMMENT 'xx'", True),
    ],
)
def test_ignore_sql_regexes(patterns, statement, ignored):
    f = only(ignore_sql=patterns)
    assert f.should_ignore_ddl(ddl(DdlKind.ALTER_TABLE, statement, WORKER)) is ignored


def test_ignore_sql_does_not_apply_to_rows():
    f = only(ignore_sql=(".*",))
    assert not f.should_ignore_row(insert(ALICE))


def test_ddl_rules_apply_by_table():
    f = only(ignore_event=("drop table",))
    assert f.should_ignore_ddl(ddl(DdlKind.DROP_TABLE, "DROP TABLE worker", WORKER))
    assert not f.should_ignore_ddl(ddl(DdlKind.DROP_TABLE, "DROP TABLE other", OTHER))
    # A statement touching a table outside the matcher is one event: it is kept.
    assert not f.should_ignore_ddl(
        ddl(DdlKind.DROP_TABLE, "DROP TABLE worker, other", WORKER, OTHER)
    )


def test_rename_is_matched_by_its_old_name():
    f = only(ignore_event=("rename table",))
    renamed = TableName("test", "worker_v2")
    assert f.should_ignore_ddl(
        ddl(DdlKind.RENAME_TABLE, "RENAME TABLE worker TO worker_v2", WORKER, renamed)
    )
    assert not f.should_ignore_ddl(
        ddl(DdlKind.RENAME_TABLE, "RENAME TABLE worker_v2 TO worker", renamed, WORKER)
    )


def test_schema_ddl_is_matched_by_the_schema_it_acts_on():
    # As TiCDC documents, matcher test.t1 also covers DROP DATABASE test.
    f = only(ignore_event=("drop schema",))
    assert f.should_ignore_ddl(ddl(DdlKind.DROP_SCHEMA, "DROP DATABASE test", schema=""))
    assert f.should_ignore_ddl(
        ddl(DdlKind.DROP_SCHEMA, "DROP DATABASE IF EXISTS `test`", schema="prod")
    )
    assert f.should_ignore_ddl(
        ddl(DdlKind.DROP_SCHEMA, "/* x */ drop schema test /* y */", schema="prod")
    )
    assert not f.should_ignore_ddl(ddl(DdlKind.DROP_SCHEMA, "DROP DATABASE prod", schema="test"))
    sql = only(ignore_sql=("^create database",))
    assert sql.should_ignore_ddl(ddl(DdlKind.CREATE_SCHEMA, "CREATE DATABASE test", schema=""))
    assert not sql.should_ignore_ddl(ddl(DdlKind.CREATE_SCHEMA, "CREATE DATABASE prod"))
    excluded = EventFilter([EventFilterRule(matcher=("*.*", "!test.*"), ignore_event=("all ddl",))])
    assert not excluded.should_ignore_ddl(ddl(DdlKind.DROP_SCHEMA, "DROP DATABASE test"))
    assert excluded.should_ignore_ddl(ddl(DdlKind.DROP_SCHEMA, "DROP DATABASE prod"))


def test_no_rules_ignore_nothing():
    f = EventFilter([])
    assert not f
    assert not f.should_ignore_row(insert(ALICE))
    assert not f.should_ignore_ddl(ddl(DdlKind.DROP_TABLE, "DROP TABLE worker", WORKER))
    assert only(ignore_event=("insert",))


def test_expression_errors_name_the_setting():
    rule = EventFilterRule(matcher=("test.worker",), ignore_delete_value_expr="id = (SELECT 1)")
    with pytest.raises(ConfigError) as caught:
        EventFilter([EventFilterRule(matcher=("a.b",)), rule])
    assert caught.value.field == "filter.event-filters[1].ignore-delete-value-expr"
    assert "unsupported subquery" in caught.value.message

    rule = EventFilterRule(matcher=("test.worker",), ignore_insert_value_expr="age >")
    with pytest.raises(ConfigError, match="cannot parse expression 'age >'") as caught:
        EventFilter([rule])
    assert caught.value.field == "filter.event-filters[0].ignore-insert-value-expr"


def test_unknown_column_fails_at_verification_and_at_evaluation():
    f = only(ignore_update_new_value_expr="agee > 1")
    f.verify_table(OTHER, ["id"])  # the rule does not apply to test.other
    with pytest.raises(ConfigError) as caught:
        f.verify_table(WORKER, ["id", "name", "age"])
    assert caught.value.field == "filter.event-filters[0].ignore-update-new-value-expr"
    assert "table test.worker: unknown column 'agee'" in caught.value.message
    assert "id, name, age" in caught.value.message
    with pytest.raises(ConfigError, match=r"unknown column 'agee'.*row of test\.worker at "):
        f.should_ignore_row(update(ALICE, KID))
    only(ignore_update_new_value_expr="AGE > 1").verify_table(WORKER, ["id", "age"])


def test_rule_structure_errors_name_the_setting():
    with pytest.raises(ConfigError) as caught:
        EventFilter([EventFilterRule(matcher=("test.worker",)), object()])
    assert caught.value.field == "filter.event-filters[1].matcher"
    with pytest.raises(ConfigError, match="must be a list of event filter rules"):
        EventFilter("test.*")  # type: ignore[arg-type]


def test_invalid_names_and_regexes_are_rejected_even_without_config_checks():
    # EventFilter re-checks what it compiles; a duck-typed rule skips the config's checks.
    class Raw:
        matcher = ("test.worker",)
        ignore_event = ("insert", "drop everything")
        ignore_sql = ()
        ignore_insert_value_expr = ""
        ignore_update_old_value_expr = ""
        ignore_update_new_value_expr = ""
        ignore_delete_value_expr = ""

    with pytest.raises(ConfigError) as caught:
        EventFilter([Raw()])
    assert caught.value.field == "filter.event-filters[0].ignore-event[1]"
    assert "unknown event type 'drop everything'" in caught.value.message
    assert "'all dml'" in caught.value.message

    Raw.ignore_event = ()
    Raw.ignore_sql = ("ok", "(unclosed")
    with pytest.raises(ConfigError) as caught:
        EventFilter([Raw()])
    assert caught.value.field == "filter.event-filters[0].ignore-sql[1]"
    assert "invalid regular expression '(unclosed'" in caught.value.message

    Raw.ignore_sql = ()
    Raw.matcher = ("test",)
    with pytest.raises(ConfigError) as caught:
        EventFilter([Raw()])
    assert caught.value.field == "filter.event-filters[0].matcher[0]"
    assert "invalid table filter rule 'test'" in caught.value.message


@pytest.mark.parametrize(
    ("settings", "keeps"),
    [
        ({"ignore_event": ("delete",)}, True),
        ({"ignore_event": ("all dml",)}, True),
        ({"ignore_delete_value_expr": "age > 18"}, True),
        ({"ignore_event": ("insert", "update")}, False),
        ({"ignore_insert_value_expr": "age > 18"}, False),
        ({"ignore_event": ("delete",), "matcher": ("test.other",)}, False),
    ],
)
def test_a_table_whose_deletes_may_be_dropped_keeps_deleted_rows(settings, keeps):
    assert only(**settings).keeps_deleted_rows(WORKER) is keeps
    assert EventFilter([]).keeps_deleted_rows(WORKER) is False
