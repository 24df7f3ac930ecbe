"""apply_ddl against the real thing: after each DDL, the server must agree with the history.

Each statement is parsed, applied to the schemas the history holds, run on a
real MariaDB, and the result compared with what ``information_schema`` says
afterwards: column names, order, types (base and full), nullability,
unsigned, precision/scale, fsp, ENUM/SET members, generated flag, defaults,
charsets where the statement makes them known, primary and unique keys.
"""

from __future__ import annotations

import pytest

from cdc.model import Column, DdlKind, Position, TableName, TableSchema
from cdc.schema.ddl import apply_ddl, parse_ddl
from cdc.schema.loader import list_tables, load_schemas
from cdc.source.flavor import detect

pytestmark = pytest.mark.integration

# (statement, expected kind). Unqualified names resolve to the test's database.
STEPS: list[tuple[str, DdlKind]] = [
    (
        "CREATE TABLE orders (id INT UNSIGNED NOT NULL AUTO_INCREMENT, customer VARCHAR(40) "
        "NOT NULL DEFAULT '', amount DECIMAL(12,2), status ENUM('new','paid','it''s') NOT NULL "
        "DEFAULT 'new', created DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), "
        "note TEXT, PRIMARY KEY (id)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4",
        DdlKind.CREATE_TABLE,
    ),
    ("ALTER TABLE orders ADD COLUMN flags SET('a','b','c') AFTER status", DdlKind.ADD_COLUMN),
    ("ALTER TABLE orders ADD COLUMN rank_no TINYINT FIRST", DdlKind.ADD_COLUMN),
    ("ALTER TABLE `orders` ADD `weight` FLOAT(7,3) UNSIGNED, ADD qty SMALLINT", DdlKind.ADD_COLUMN),
    ("ALTER TABLE orders ADD COLUMN (ratio DOUBLE, code CHAR(3) NOT NULL)", DdlKind.ADD_COLUMN),
    ("ALTER TABLE orders DROP COLUMN rank_no", DdlKind.DROP_COLUMN),
    ("ALTER TABLE orders MODIFY amount DECIMAL(14,4) NOT NULL", DdlKind.MODIFY_COLUMN),
    ("ALTER TABLE orders MODIFY COLUMN qty INT(5) ZEROFILL AFTER id", DdlKind.MODIFY_COLUMN),
    (
        "ALTER TABLE orders CHANGE COLUMN customer customer_name VARCHAR(80) "
        "CHARACTER SET latin1 COLLATE latin1_bin NULL",
        DdlKind.MODIFY_COLUMN,
    ),
    ("ALTER TABLE orders CHANGE note memo MEDIUMTEXT FIRST", DdlKind.MODIFY_COLUMN),
    ("ALTER TABLE orders RENAME COLUMN memo TO remark", DdlKind.RENAME_COLUMN),
    ("ALTER TABLE orders ALTER COLUMN code SET DEFAULT 'abc'", DdlKind.MODIFY_COLUMN),
    ("ALTER TABLE orders ALTER COLUMN code DROP DEFAULT", DdlKind.MODIFY_COLUMN),
    ("ALTER TABLE orders ADD UNIQUE KEY (code)", DdlKind.ADD_INDEX),
    ("ALTER TABLE orders ADD INDEX ix_created (created)", DdlKind.ADD_INDEX),
    ("CREATE UNIQUE INDEX flags ON orders (flags, ratio)", DdlKind.ADD_INDEX),
    ("ALTER TABLE orders DROP INDEX code", DdlKind.DROP_INDEX),
    ("DROP INDEX ix_created ON orders", DdlKind.DROP_INDEX),
    ("ALTER TABLE orders MODIFY id INT UNSIGNED NOT NULL", DdlKind.MODIFY_COLUMN),
    ("ALTER TABLE orders DROP PRIMARY KEY", DdlKind.DROP_PRIMARY_KEY),
    ("ALTER TABLE orders ADD PRIMARY KEY (id, code)", DdlKind.ADD_PRIMARY_KEY),
    ("RENAME TABLE orders TO orders_v2", DdlKind.RENAME_TABLE),
    ("ALTER TABLE orders_v2 RENAME TO orders", DdlKind.RENAME_TABLE),
    ("TRUNCATE TABLE orders", DdlKind.TRUNCATE_TABLE),
    ("CREATE TABLE orders_copy LIKE orders", DdlKind.CREATE_TABLE),
    (
        "CREATE TABLE /* no key */ `log` (`seq` BIGINT UNSIGNED ZEROFILL, "
        "msg VARCHAR(255) CHARACTER SET ascii, at TIMESTAMP(6) NULL, ok BOOL NOT NULL, "
        "bits BIT(5), yr YEAR, t TIME(2), d DATE, blobby BLOB(300), tiny TINYTEXT, "
        "fixed_bin BINARY(4), vb VARBINARY(12), f FLOAT(30), r REAL, i8 INT8, n NUMERIC(7), "
        "total DECIMAL(9,3) AS (seq * 2) PERSISTENT, "
        "virt INT GENERATED ALWAYS AS (ok + 1) VIRTUAL) DEFAULT CHARSET latin1",
        DdlKind.CREATE_TABLE,
    ),
    ("ALTER TABLE log ADD CONSTRAINT u_seq UNIQUE (seq), ADD UNIQUE (ok)", DdlKind.ADD_INDEX),
    ("ALTER TABLE log MODIFY seq BIGINT UNSIGNED NOT NULL", DdlKind.MODIFY_COLUMN),
    (
        "ALTER TABLE log CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci",
        DdlKind.MODIFY_TABLE_CHARSET_AND_COLLATE,
    ),
    ("ALTER TABLE log COMMENT 'audit log'", DdlKind.MODIFY_TABLE_COMMENT),
    ("ALTER TABLE log ENGINE=InnoDB, ALGORITHM=COPY", DdlKind.ALTER_TABLE),
    (
        "CREATE TABLE parts (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT, "
        "PRIMARY KEY (a, b), KEY (c)) DEFAULT CHARSET=utf8mb4 "
        "PARTITION BY KEY (a) PARTITIONS 2",
        DdlKind.CREATE_TABLE,
    ),
    ("ALTER TABLE parts ADD COLUMN d INT NOT NULL DEFAULT 7, DROP COLUMN c", DdlKind.ALTER_TABLE),
    (
        "ALTER TABLE parts DROP PRIMARY KEY, ADD PRIMARY KEY (a), DROP COLUMN b",
        DdlKind.ALTER_TABLE,
    ),
    ("RENAME TABLE parts TO p1, log TO parts, p1 TO log", DdlKind.RENAME_TABLE),
    ("DROP TABLE IF EXISTS orders_copy, no_such_table", DdlKind.DROP_TABLE),
    (
        "CREATE TABLE IF NOT EXISTS orders (x INT)",
        DdlKind.CREATE_TABLE,
    ),
    ("DROP TABLE log", DdlKind.DROP_TABLE),
    ("CREATE TABLE log (k INT PRIMARY KEY, v JSON)", DdlKind.CREATE_TABLE),
    (
        "CREATE OR REPLACE TABLE log (k INT KEY, v JSON, ip INET6, u UUID, pt POINT NOT NULL, "
        "nat NATIONAL VARCHAR(5), lv LONG VARCHAR, m MIDDLEINT UNSIGNED)",
        DdlKind.CREATE_TABLE,
    ),
    ("/*!40101 ALTER TABLE log ADD COLUMN w INT NOT NULL */", DdlKind.ADD_COLUMN),
    ("ALTER TABLE log ADD COLUMN IF NOT EXISTS k INT, ADD COLUMN s SERIAL", DdlKind.ADD_COLUMN),
    ("ALTER TABLE log ADD UNIQUE KEY (w DESC), DROP COLUMN IF EXISTS nope", DdlKind.ALTER_TABLE),
    (
        "ALTER TABLE log MODIFY v LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin "
        "NOT NULL DEFAULT '{}', ALGORITHM=COPY",
        DdlKind.MODIFY_COLUMN,
    ),
    ("ALTER TABLE log DROP PRIMARY KEY", DdlKind.DROP_PRIMARY_KEY),
    ("ALTER TABLE log DROP INDEX w", DdlKind.DROP_INDEX),
]

# Compared exactly; charset and collation only where the history knows them.
_FIELDS = (
    "name",
    "data_type",
    "column_type",
    "nullable",
    "unsigned",
    "precision",
    "scale",
    "fsp",
    "elements",
    "generated",
    "default",
)


def _differences(expected: TableSchema, actual: TableSchema) -> list[str]:
    problems: list[str] = []
    if expected.column_names != actual.column_names:
        problems.append(f"columns {expected.column_names} != server {actual.column_names}")
        return problems
    for mine, theirs in zip(expected.columns, actual.columns, strict=True):
        problems.extend(_column_differences(mine, theirs))
    if expected.primary_key != actual.primary_key:
        problems.append(f"primary key {expected.primary_key} != server {actual.primary_key}")
    if expected.unique_keys != actual.unique_keys:
        problems.append(f"unique keys {expected.unique_keys} != server {actual.unique_keys}")
    return problems


def _column_differences(mine: Column, theirs: Column) -> list[str]:
    fields = list(_FIELDS)
    if mine.charset is not None or mine.collation is not None:
        fields += ["charset", "collation"]
    return [
        f"column {mine.name}: {field} {getattr(mine, field)!r} != server {getattr(theirs, field)!r}"
        for field in fields
        if getattr(mine, field) != getattr(theirs, field)
    ]


def test_history_matches_server_after_every_ddl(source_db, source_database: str) -> None:
    conn = source_db.connect(database=source_database)
    try:
        flavor = detect(conn).flavor
        schemas: dict[TableName, TableSchema] = {}
        for n, (statement, kind) in enumerate(STEPS, start=1):
            event = parse_ddl(statement, source_database, Position("binlog.000001", n * 100))
            assert event.kind is kind, f"step {n} {statement!r}: kind {event.kind}"
            expected = apply_ddl(schemas, event, flavor=flavor)
            with conn.cursor() as cur:
                cur.execute(statement)
            tables = list_tables(conn, lambda schema, _table: schema == source_database)
            actual = load_schemas(conn, tables)
            assert sorted(expected, key=str) == sorted(actual, key=str), f"step {n} {statement!r}"
            problems = [
                f"{table}: {problem}"
                for table in expected
                for problem in _differences(expected[table], actual[table])
            ]
            assert not problems, f"step {n} {statement!r}:\n" + "\n".join(problems)
            for table, schema in expected.items():
                before = schemas.get(table)
                if before is not None and before != schema and kind is not DdlKind.RENAME_TABLE:
                    assert schema.version == before.version + 1, f"step {n}: {table} version"
            schemas = expected
    finally:
        conn.close()


def test_truncate_and_plain_index_leave_the_version_alone(source_db, source_database) -> None:
    conn = source_db.connect(database=source_database)
    try:
        flavor = detect(conn).flavor
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t (a INT PRIMARY KEY, b INT)")
        table = TableName(source_database, "t")
        schemas = load_schemas(conn, [table])
        for n, statement in enumerate(["TRUNCATE t", "ALTER TABLE t ADD INDEX (b)"], start=1):
            event = parse_ddl(statement, source_database, Position("binlog.000001", n))
            assert apply_ddl(schemas, event, flavor=flavor) == schemas
    finally:
        conn.close()
