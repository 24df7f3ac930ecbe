"""classify_statement: which statement-logged writes a changefeed must refuse, table-driven."""

from __future__ import annotations

import pytest

from cdc.binlog.statements import (
    TemporaryTables,
    classify_statement,
    statement_shape,
)
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName

FILTER = TableFilter.parse(["shop.*", "!shop.heartbeat"])


def captured(table: TableName) -> bool:
    return FILTER.matches(table.schema, table.table)


T = TableName("shop", "t")
REFUSE, ALLOW, NO_ROWS = "refuse", "allow", "no rows"
UNKNOWN = None

# (statement, default schema, verdict, verb, tables it may write or UNKNOWN)
CASES = [
    # Plain and modified INSERT / REPLACE, any default schema.
    ("INSERT INTO shop.t VALUES (1)", "", REFUSE, "INSERT", (T,)),
    ("REPLACE INTO shop.t VALUES (1, 'a')", "", REFUSE, "REPLACE", (T,)),
    ("REPLACE LOW_PRIORITY shop.t SET id = 1", "other", REFUSE, "REPLACE", (T,)),
    ("REPLACE DELAYED INTO `shop`.`t` VALUES (1)", "", REFUSE, "REPLACE", (T,)),
    ("INSERT DELAYED INTO t VALUES (1)", "shop", REFUSE, "INSERT", (T,)),
    ("insert low_priority into shop.t values (1)", "", REFUSE, "INSERT", (T,)),
    ("INSERT HIGH_PRIORITY IGNORE INTO shop.t VALUES (1)", "", REFUSE, "INSERT", (T,)),
    ("INSERT IGNORE shop . t (id) VALUES (1)", "", REFUSE, "INSERT", (T,)),
    ("INSERT INTO t PARTITION (p0) VALUES (1)", "shop", REFUSE, "INSERT", (T,)),
    ("INSERT INTO shop.t VALUES (1) ON DUPLICATE KEY UPDATE v = 2", "", REFUSE, "INSERT", (T,)),
    ("INSERT INTO shop.t VALUES (1) RETURNING id", "", REFUSE, "INSERT", (T,)),
    ('INSERT INTO "shop"."t" VALUES (1)', "", REFUSE, "INSERT", (T,)),
    # INSERT/REPLACE ... SELECT: the target counts, whatever the default schema.
    ("REPLACE INTO shop.t SELECT * FROM src", "other", REFUSE, "REPLACE", (T,)),
    ("REPLACE INTO t SELECT * FROM other.src", "shop", REFUSE, "REPLACE", (T,)),
    (
        "INSERT INTO other.copy SELECT * FROM shop.t",
        "shop",
        ALLOW,
        "INSERT",
        (TableName("other", "copy"),),
    ),
    # UPDATE / DELETE: every table outside subqueries.
    ("UPDATE shop.t SET v = 1", "", REFUSE, "UPDATE", (T,)),
    ("UPDATE IGNORE t SET v = 1", "shop", REFUSE, "UPDATE", (T,)),
    ("UPDATE LOW_PRIORITY IGNORE shop.t SET v = 1 ORDER BY id LIMIT 2", "", REFUSE, "UPDATE", (T,)),
    (
        "UPDATE other.a JOIN shop.t ON a.id = t.id SET t.v = a.v",
        "",
        REFUSE,
        "UPDATE",
        (TableName("other", "a"), T),
    ),
    (
        "UPDATE a, shop.t SET t.v = a.v WHERE a.id = t.id",
        "other",
        REFUSE,
        "UPDATE",
        (TableName("other", "a"), T),
    ),
    ("DELETE FROM shop.t WHERE id = 1", "", REFUSE, "DELETE", (T,)),
    (
        "DELETE QUICK IGNORE FROM t WHERE id IN (SELECT id FROM other.x)",
        "shop",
        REFUSE,
        "DELETE",
        (T,),
    ),
    (
        "DELETE t FROM shop.t JOIN other.x ON t.id = x.id",
        "",
        REFUSE,
        "DELETE",
        (T, TableName("other", "x")),
    ),
    (
        "DELETE a FROM shop.t AS a JOIN x ON a.id = x.id",
        "other",
        REFUSE,
        "DELETE",
        (T, TableName("other", "x")),
    ),
    ("DELETE FROM a USING other.a JOIN shop.t", "", REFUSE, "DELETE", (TableName("other", "a"), T)),
    (
        "UPDATE other.h SET v = (SELECT MAX(id) FROM shop.t)",
        "",
        ALLOW,
        "UPDATE",
        (TableName("other", "h"),),
    ),
    (
        "DELETE FROM other.h WHERE id IN (SELECT id FROM shop.t)",
        "",
        ALLOW,
        "DELETE",
        (TableName("other", "h"),),
    ),
    # LOAD DATA / XML, as in an Execute_load_query event.
    (
        "LOAD DATA LOCAL INFILE '/tmp/SQL_LOAD-1-2-3.data' INTO TABLE `t` FIELDS TERMINATED BY ','",
        "shop",
        REFUSE,
        "LOAD DATA",
        (T,),
    ),
    (
        "LOAD DATA CONCURRENT INFILE 'a INTO TABLE x' REPLACE INTO TABLE shop.t",
        "other",
        REFUSE,
        "LOAD DATA",
        (T,),
    ),
    ("LOAD XML LOCAL INFILE 'x.xml' IGNORE INTO TABLE shop.t", "", REFUSE, "LOAD XML", (T,)),
    (
        "LOAD DATA INFILE 'f' INTO TABLE other.h",
        "shop",
        ALLOW,
        "LOAD DATA",
        (TableName("other", "h"),),
    ),
    # Comments, executable comments, MariaDB's SET STATEMENT ... FOR.
    ("/* app: checkout */ INSERT INTO shop.t VALUES (1)", "", REFUSE, "INSERT", (T,)),
    ("-- note\n# more\n  UPDATE shop.t SET v = 1", "", REFUSE, "UPDATE", (T,)),
    ("/*!40000 DELETE FROM shop.t */", "", REFUSE, "DELETE", (T,)),
    ("/*M!100100 REPLACE INTO shop.t VALUES (1) */", "", REFUSE, "REPLACE", (T,)),
    (
        "SET STATEMENT max_statement_time = 1 FOR INSERT INTO shop.t VALUES (1)",
        "",
        REFUSE,
        "INSERT",
        (T,),
    ),
    (
        "SET STATEMENT sql_mode = 'a,b', foreign_key_checks = 0 FOR INSERT INTO other.h VALUES (1)",
        "",
        ALLOW,
        "INSERT",
        (TableName("other", "h"),),
    ),
    ("(INSERT INTO shop.t VALUES (1))", "", REFUSE, "INSERT", (T,)),
    # Tables the statement cannot show: fail closed.
    ("INSERT INTO t VALUES (1)", "", REFUSE, "INSERT", UNKNOWN),
    ("UPDATE t SET v = 1", "", REFUSE, "UPDATE", UNKNOWN),
    ("UPDATE t FOR PORTION OF app FROM 1 TO 2 SET v = 1", "shop", REFUSE, "UPDATE", UNKNOWN),
    ("DELETE HISTORY FROM shop.t", "", REFUSE, "DELETE", UNKNOWN),
    ("SELECT other.f(1)", "other", REFUSE, "SELECT", UNKNOWN),
    ("DO other.f(1)", "", REFUSE, "DO", UNKNOWN),
    ("CALL p()", "other", REFUSE, "CALL", UNKNOWN),
    ("LOAD DATA", "shop", REFUSE, "LOAD", UNKNOWN),
    ("SET STATEMENT x = 1", "", REFUSE, "SET STATEMENT", UNKNOWN),
    ("FROBNICATE shop.t", "", REFUSE, "FROBNICATE", UNKNOWN),
    ("é", "", REFUSE, "unreadable statement", UNKNOWN),
    # Outside the filter: heartbeat, other schemas, system schemas.
    (
        "INSERT INTO heartbeat VALUES (1, NOW()) ON DUPLICATE KEY UPDATE ts = NOW()",
        "shop",
        ALLOW,
        "INSERT",
        (TableName("shop", "heartbeat"),),
    ),
    (
        "REPLACE INTO ops.heartbeat SET id = 1, ts = NOW()",
        "shop",
        ALLOW,
        "REPLACE",
        (TableName("ops", "heartbeat"),),
    ),
    ("UPDATE heartbeat SET ts = NOW()", "shop", ALLOW, "UPDATE", (TableName("shop", "heartbeat"),)),
    (
        "INSERT INTO mysql.gtid_slave_pos VALUES (0, 1, 1, 1)",
        "",
        ALLOW,
        "INSERT",
        (TableName("mysql", "gtid_slave_pos"),),
    ),
    (
        "DELETE FROM `mysql`.`proc` WHERE db = 'x'",
        "shop",
        ALLOW,
        "DELETE",
        (TableName("mysql", "proc"),),
    ),
    # No row changes: transaction control, DDL, accounts, admin, comments.
    ("BEGIN", "shop", NO_ROWS, "BEGIN", ()),
    ("START TRANSACTION", "shop", NO_ROWS, "START", ()),
    ("COMMIT", "shop", NO_ROWS, "COMMIT", ()),
    ("ROLLBACK", "shop", NO_ROWS, "ROLLBACK", ()),
    ("ROLLBACK TO SAVEPOINT s1", "shop", NO_ROWS, "ROLLBACK", ()),
    ("SAVEPOINT s1", "shop", NO_ROWS, "SAVEPOINT", ()),
    ("RELEASE SAVEPOINT s1", "shop", NO_ROWS, "RELEASE", ()),
    ("XA START X'31',X'',1", "shop", NO_ROWS, "XA", ()),
    ("XA END X'31',X'',1", "shop", NO_ROWS, "XA", ()),
    ("XA PREPARE X'31',X'',1", "shop", NO_ROWS, "XA", ()),
    ("XA COMMIT X'31',X'',1", "shop", NO_ROWS, "XA", ()),
    ("CREATE TABLE shop.t (id INT PRIMARY KEY)", "", NO_ROWS, "CREATE", ()),
    ("ALTER TABLE t ADD COLUMN v INT", "shop", NO_ROWS, "ALTER", ()),
    ("DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `t`", "shop", NO_ROWS, "DROP", ()),
    ("TRUNCATE TABLE shop.t", "", NO_ROWS, "TRUNCATE", ()),
    ("RENAME TABLE shop.t TO shop.u", "", NO_ROWS, "RENAME", ()),
    ("/* ddl */ CREATE INDEX i ON shop.t (v)", "", NO_ROWS, "CREATE", ()),
    ("GRANT SELECT ON shop.* TO 'u'@'%'", "", NO_ROWS, "GRANT", ()),
    ("SET PASSWORD FOR 'u'@'%' = PASSWORD('x')", "", NO_ROWS, "SET", ()),
    ("FLUSH PRIVILEGES", "", NO_ROWS, "FLUSH", ()),
    ("ANALYZE TABLE shop.t", "", NO_ROWS, "ANALYZE", ()),
    ("OPTIMIZE TABLE shop.t", "", NO_ROWS, "OPTIMIZE", ()),
    ("# Dummy event replacing event type 160", "", NO_ROWS, "", ()),
    ("", "", NO_ROWS, "", ()),
]


@pytest.mark.parametrize(("statement", "schema", "verdict", "verb", "tables"), CASES)
def test_classify_statement(
    statement: str,
    schema: str,
    verdict: str,
    verb: str,
    tables: tuple[TableName, ...] | None,
) -> None:
    result = classify_statement(statement, schema, captured)
    assert (result.verb, result.tables) == (verb, tables)
    assert result.rows == (verdict != NO_ROWS)
    assert result.refuse == (verdict == REFUSE)
    if verdict == REFUSE and tables is not None:
        assert result.captured == tuple(t for t in tables if captured(t)) != ()


def test_a_matcher_that_captures_nothing_still_refuses_unknown_tables() -> None:
    assert classify_statement("SELECT f()", "shop", lambda t: False).refuse
    assert not classify_statement("INSERT INTO shop.t VALUES (1)", "", lambda t: False).refuse


@pytest.mark.parametrize(
    ("statement", "shape"),
    [
        (
            "INSERT INTO shop.t VALUES (1, 'secret', \"x\", -2.5e3, X'ff') /* c */",
            "INSERT INTO shop.t VALUES (?, ?, ?, -?, X?) /* c */",
        ),
        (
            "/* app */ UPDATE `it's`.t1 SET v = 'a\\'b' WHERE id=10",
            "UPDATE `it's`.t1 SET v = ? WHERE id=?",
        ),
        (
            "LOAD DATA LOCAL INFILE '/tmp/x.csv' INTO TABLE t",
            "LOAD DATA LOCAL INFILE ? INTO TABLE t",
        ),
        ("INSERT INTO t VALUES ('" + "x" * 300 + "')" + ", (1)" * 100, None),
    ],
)
def test_statement_shape_keeps_the_form_and_drops_the_values(
    statement: str, shape: str | None
) -> None:
    result = statement_shape(statement)
    assert "secret" not in result and "x.csv" not in result
    if shape is None:
        assert len(result) == 200 and result.endswith("...")
    else:
        assert result == shape


def test_temporary_tables_hide_captured_ones_for_their_session_only() -> None:
    temporary = TemporaryTables()
    temporary.observe(7, "CREATE TEMPORARY TABLE t (id INT)", "shop")
    temporary.observe(7, "CREATE OR REPLACE TEMPORARY TABLE IF NOT EXISTS shop.`u` (id INT)", "x")
    insert = "INSERT INTO shop.t VALUES (1)"
    assert not classify_statement(insert, "", temporary.matcher(7, captured)).refuse
    assert classify_statement(insert, "", temporary.matcher(8, captured)).refuse
    both = "UPDATE shop.t JOIN shop.u ON t.id = u.id SET t.v = 1"
    assert not classify_statement(both, "", temporary.matcher(7, captured)).refuse
    # As MariaDB logs it when the session ends (or the table is dropped).
    temporary.observe(7, "DROP /*!40005 TEMPORARY */ TABLE IF EXISTS `shop`.`t`, `u`", "shop")
    assert classify_statement(insert, "", temporary.matcher(7, captured)).refuse
    assert temporary.matcher(7, captured) is captured  # nothing left to hide
    temporary.observe(7, "CREATE TABLE shop.v (id INT)", "shop")  # not temporary
    assert temporary.matcher(7, captured) is captured
