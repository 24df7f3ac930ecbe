"""apply_ddl: each DDL form applied to table schemas (server check: tests/integration/schema)."""

from __future__ import annotations

import logging

import pytest

from cdc.model import Column, Flavor, Position, TableName, TableSchema
from cdc.schema.changes import DdlApplyError
from cdc.schema.ddl import apply_ddl, parse_ddl

POS = Position("binlog.000001", 100)
T = TableName("db", "t")


def run(
    schemas: dict[TableName, TableSchema], statement: str, flavor: Flavor = Flavor.MARIADB
) -> dict[TableName, TableSchema]:
    return apply_ddl(schemas, parse_ddl(statement, "db", POS), flavor=flavor)


def create(statement: str, flavor: Flavor = Flavor.MARIADB) -> TableSchema:
    result = run({}, statement, flavor)
    (schema,) = result.values()
    return schema


def cols(schema: TableSchema) -> list[str]:
    return list(schema.column_names)


@pytest.fixture
def base() -> dict[TableName, TableSchema]:
    return run(
        {},
        "CREATE TABLE t (id INT NOT NULL, a VARCHAR(10), b INT, c INT NOT NULL, "
        "PRIMARY KEY (id), UNIQUE KEY (a, b), UNIQUE (c)) DEFAULT CHARSET=utf8mb4",
    )


# CREATE TABLE


def test_create_table_columns_keys_and_defaults() -> None:
    schema = create(
        "CREATE TABLE `db`.`t` (id INT(10) UNSIGNED NOT NULL AUTO_INCREMENT, "
        "name VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin DEFAULT 'x', "
        "e ENUM('a','b''c','d\\\\e') NOT NULL DEFAULT 'a', d DECIMAL(10,2), "
        "ts DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3), g INT AS (id + 1) VIRTUAL, "
        "s SET('x','y'), n INT NULL, PRIMARY KEY (id), UNIQUE KEY uk (name, d)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
    )
    assert schema.name == T
    assert schema.version == 0
    assert schema.primary_key == ("id",)
    assert schema.unique_keys == (("name", "d"),)
    by = {c.name: c for c in schema.columns}
    assert by["id"] == Column(
        "id", "int", "int(10) unsigned", nullable=False, unsigned=True, precision=10, scale=0
    )
    assert by["name"] == Column(
        "name",
        "varchar",
        "varchar(20)",
        charset="latin1",
        collation="latin1_bin",
        default="'x'",
    )
    assert by["e"] == Column(
        "e",
        "enum",
        "enum('a','b''c','d\\\\e')",
        nullable=False,
        charset="utf8mb4",
        collation="utf8mb4_general_ci",
        elements=("a", "b'c", "d\\e"),
        default="'a'",
    )
    assert (by["d"].precision, by["d"].scale, by["d"].column_type) == (10, 2, "decimal(10,2)")
    assert (by["ts"].fsp, by["ts"].column_type, by["ts"].default) == (
        3,
        "datetime(3)",
        "current_timestamp(3)",
    )
    assert by["g"].generated and by["g"].default == "NULL"
    assert by["s"].elements == ("x", "y")
    assert by["n"].nullable and by["n"].default == "NULL"


def test_create_table_inline_keys_and_key_order() -> None:
    schema = create(
        "CREATE TABLE t (a INT KEY, b INT UNIQUE, c INT NOT NULL UNIQUE KEY, "
        "d INT, CONSTRAINT u_d UNIQUE (d), KEY (b), INDEX ix (c), FULLTEXT (b), "
        "CONSTRAINT fk FOREIGN KEY (d) REFERENCES u (x), CHECK (a > 0))"
    )
    assert schema.primary_key == ("a",)
    assert not schema.column("a").nullable
    # NOT NULL keys come first, as the server orders them; definition order otherwise
    assert schema.unique_keys == (("c",), ("b",), ("d",))


def test_create_table_functional_unique_key_is_ignored() -> None:
    schema = create("CREATE TABLE t (a INT, UNIQUE KEY ((a + 1)), UNIQUE (a))")
    assert schema.unique_keys == (("a",),)


def test_create_table_prefix_and_descending_key_parts() -> None:
    schema = create("CREATE TABLE t (a TEXT NOT NULL, b INT, PRIMARY KEY (a(10) DESC, b ASC))")
    assert schema.primary_key == ("a", "b")
    assert not schema.column("b").nullable


def test_create_table_without_primary_key() -> None:
    schema = create("CREATE TABLE t (a INT, b INT)")
    assert schema.primary_key == ()
    assert schema.key_columns == ()


def test_create_table_partitions_and_options_do_not_matter() -> None:
    schema = create(
        "CREATE TABLE t (a INT NOT NULL, b VARCHAR(5), PRIMARY KEY (a)) ENGINE=InnoDB "
        "ROW_FORMAT=DYNAMIC COMMENT='x' CHARSET latin1 "
        "PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10))"
    )
    assert cols(schema) == ["a", "b"]
    assert schema.column("b").charset == "latin1"
    assert schema.column("b").collation == "latin1_swedish_ci"


def test_create_table_charset_unknown_without_table_default() -> None:
    schema = create("CREATE TABLE t (a VARCHAR(5), b VARCHAR(5) COLLATE utf8mb4_bin)")
    assert (schema.column("a").charset, schema.column("a").collation) == (None, None)
    assert (schema.column("b").charset, schema.column("b").collation) == (
        "utf8mb4",
        "utf8mb4_bin",
    )


def test_create_table_type_aliases_and_mariadb_types() -> None:
    schema = create(
        "CREATE TABLE t (a INT8, b REAL, c BOOL, d SERIAL, e NUMERIC(7), f FLOAT(30), "
        "g FLOAT(7,3) UNSIGNED, h LONG VARCHAR, i NATIONAL VARCHAR(5), j MIDDLEINT, "
        "k INET6, l POINT, m DOUBLE PRECISION, n INT ZEROFILL, o CHAR(2) BINARY) CHARSET latin1"
    )
    types = {c.name: (c.data_type, c.column_type) for c in schema.columns}
    assert types == {
        "a": ("bigint", "bigint(20)"),
        "b": ("double", "double"),
        "c": ("tinyint", "tinyint(1)"),
        "d": ("bigint", "bigint(20) unsigned"),
        "e": ("decimal", "decimal(7,0)"),
        "f": ("double", "double"),
        "g": ("float", "float(7,3) unsigned"),
        "h": ("mediumtext", "mediumtext"),
        "i": ("varchar", "varchar(5)"),
        "j": ("mediumint", "mediumint(9)"),
        "k": ("inet6", "inet6"),
        "l": ("point", "point"),
        "m": ("double", "double"),
        "n": ("int", "int(10) unsigned zerofill"),
        "o": ("char", "char(2)"),
    }
    assert schema.column("g").unsigned and schema.column("n").unsigned
    assert not schema.column("d").nullable and schema.unique_keys == (("d",),)
    assert schema.column("i").charset == "utf8mb3"
    assert schema.column("o").collation == "latin1_bin"


def test_create_table_mysql_flavor_spelling() -> None:
    schema = create(
        "CREATE TABLE t (a INT, b TINYINT(1), c INT ZEROFILL, d YEAR, e JSON, f VARCHAR(3) "
        "DEFAULT 'x', g INT) CHARSET utf8mb4",
        Flavor.MYSQL,
    )
    types = {c.name: c.column_type for c in schema.columns}
    assert types == {
        "a": "int",
        "b": "tinyint(1)",
        "c": "int(10) unsigned zerofill",
        "d": "year",
        "e": "json",
        "f": "varchar(3)",
        "g": "int",
    }
    assert schema.column("f").default == "x"
    assert schema.column("f").collation == "utf8mb4_0900_ai_ci"
    assert schema.column("g").default is None
    mariadb = create("CREATE TABLE t (e JSON)")
    assert (mariadb.column("e").data_type, mariadb.column("e").collation) == (
        "longtext",
        "utf8mb4_bin",
    )


def test_create_table_if_not_exists_keeps_existing(base) -> None:
    assert run(base, "CREATE TABLE IF NOT EXISTS t (x INT)") == base


def test_create_or_replace_table_replaces_with_next_version(base) -> None:
    result = run(base, "CREATE OR REPLACE TABLE t (x INT)")
    assert cols(result[T]) == ["x"]
    assert result[T].version == base[T].version + 1


def test_create_table_over_a_stale_entry_replaces_it(base, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        result = run(base, "CREATE TABLE t (x INT)")
    assert cols(result[T]) == ["x"]
    assert "replaces" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run(base, "CREATE OR REPLACE TABLE t (x INT)")
    assert "replaces" not in caplog.text


def test_create_table_like(base) -> None:
    result = run(base, "CREATE TABLE u LIKE t")
    copy = result[TableName("db", "u")]
    assert copy.columns == base[T].columns
    assert copy.primary_key == base[T].primary_key
    assert copy.unique_keys == base[T].unique_keys
    assert copy.version == 0


def test_create_table_like_unknown_source_leaves_it_unknown(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        assert run({}, "CREATE TABLE u LIKE nowhere") == {}
    assert "not in the schema history" in caplog.text


# DROP / RENAME / TRUNCATE / databases


def test_drop_tables(base) -> None:
    both = run(base, "CREATE TABLE u (x INT)")
    assert run(both, "DROP TABLE IF EXISTS t, u, missing /* generated by server */") == {}


def test_drop_temporary_table_keeps_the_real_one(base) -> None:
    assert run(base, "DROP TEMPORARY TABLE IF EXISTS t") == base


def test_rename_tables_in_order_with_a_swap(base) -> None:
    both = run(base, "CREATE TABLE u (x INT)")
    result = run(both, "RENAME TABLE t TO tmp, u TO t, tmp TO other.u")
    assert set(result) == {T, TableName("other", "u")}
    assert cols(result[T]) == ["x"]
    assert cols(result[TableName("other", "u")]) == ["id", "a", "b", "c"]
    assert result[TableName("other", "u")].name == TableName("other", "u")


def test_rename_onto_an_existing_table_is_an_error(base) -> None:
    both = run(base, "CREATE TABLE u (x INT)")
    with pytest.raises(DdlApplyError, match="exists already"):
        run(both, "RENAME TABLE t TO u")


def test_alter_table_rename(base) -> None:
    result = run(base, "ALTER TABLE t RENAME TO x.u, ADD COLUMN z INT")
    (schema,) = result.values()
    assert schema.name == TableName("x", "u")
    assert cols(schema)[-1] == "z"
    assert schema.version == base[T].version + 1


def test_truncate_changes_nothing(base) -> None:
    result = run(base, "TRUNCATE TABLE t")
    assert result == base
    assert result is not base


def test_drop_and_replace_database() -> None:
    schemas = run({}, "CREATE TABLE t (a INT)")
    schemas = run(schemas, "CREATE TABLE other.t (a INT)")
    assert set(run(schemas, "DROP DATABASE db")) == {TableName("other", "t")}
    assert set(run(schemas, "CREATE OR REPLACE DATABASE other")) == {T}
    assert run(schemas, "CREATE DATABASE IF NOT EXISTS db") == schemas


# ALTER TABLE columns


def test_add_column_positions(base) -> None:
    result = run(base, "ALTER TABLE t ADD COLUMN x INT FIRST, ADD y INT AFTER a, ADD z INT")
    assert cols(result[T]) == ["x", "id", "a", "y", "b", "c", "z"]
    assert result[T].version == base[T].version + 1


def test_add_column_list(base) -> None:
    result = run(base, "ALTER TABLE t ADD COLUMN (x INT NOT NULL, y VARCHAR(3), UNIQUE (x))")
    assert cols(result[T])[-2:] == ["x", "y"]
    assert ("x",) in result[T].unique_keys


def test_add_column_with_inline_keys(base) -> None:
    result = run(base, "ALTER TABLE t DROP PRIMARY KEY, ADD COLUMN k INT PRIMARY KEY FIRST")
    assert result[T].primary_key == ("k",)
    assert not result[T].column("k").nullable


def test_add_existing_column(base) -> None:
    assert run(base, "ALTER TABLE t ADD COLUMN IF NOT EXISTS A INT") == base
    with pytest.raises(DdlApplyError, match="exists already"):
        run(base, "ALTER TABLE t ADD COLUMN a INT")


def test_add_column_after_a_missing_column(base) -> None:
    with pytest.raises(DdlApplyError, match="no column 'nope'"):
        run(base, "ALTER TABLE t ADD COLUMN x INT AFTER nope")


def test_drop_column_leaves_keys_without_it(base) -> None:
    result = run(base, "ALTER TABLE t DROP COLUMN b, DROP COLUMN c")
    assert cols(result[T]) == ["id", "a"]
    assert result[T].unique_keys == (("a",),)


def test_drop_column_if_exists_and_errors(base) -> None:
    assert run(base, "ALTER TABLE t DROP COLUMN IF EXISTS nope") == base
    with pytest.raises(DdlApplyError, match="no column 'nope'"):
        run(base, "ALTER TABLE t DROP COLUMN nope")
    single = run({}, "CREATE TABLE s (a INT)")
    with pytest.raises(DdlApplyError, match="only column"):
        run(single, "ALTER TABLE s DROP COLUMN a")


def test_modify_column_type_and_position(base) -> None:
    result = run(base, "ALTER TABLE t MODIFY COLUMN b BIGINT UNSIGNED NOT NULL FIRST")
    assert cols(result[T]) == ["b", "id", "a", "c"]
    column = result[T].column("b")
    assert (column.column_type, column.nullable, column.unsigned) == (
        "bigint(20) unsigned",
        False,
        True,
    )


def test_modify_primary_key_column_stays_not_null(base) -> None:
    result = run(base, "ALTER TABLE t MODIFY id BIGINT")
    assert not result[T].column("id").nullable
    assert result[T].column("id").default is None


def test_change_column_renames_in_keys(base) -> None:
    result = run(base, "ALTER TABLE t CHANGE COLUMN a alpha VARCHAR(20) AFTER c")
    assert cols(result[T]) == ["id", "b", "c", "alpha"]
    assert ("alpha", "b") in result[T].unique_keys
    with pytest.raises(DdlApplyError, match="exists already"):
        run(base, "ALTER TABLE t CHANGE a b INT")


def test_change_column_keeps_position_without_placement(base) -> None:
    result = run(base, "ALTER TABLE t CHANGE b beta INT")
    assert cols(result[T]) == ["id", "a", "beta", "c"]


def test_rename_column_renames_in_keys(base) -> None:
    result = run(base, "ALTER TABLE t RENAME COLUMN id TO ident")
    assert result[T].primary_key == ("ident",)
    assert result[T].column("ident").column_type == base[T].column("id").column_type


def test_set_and_drop_default(base) -> None:
    result = run(base, "ALTER TABLE t ALTER COLUMN a SET DEFAULT 'zz', ALTER b SET DEFAULT 5")
    assert result[T].column("a").default == "'zz'"
    assert result[T].column("b").default == "5"
    dropped = run(result, "ALTER TABLE t ALTER COLUMN a DROP DEFAULT")
    assert dropped[T].column("a").default == "NULL"


# keys


def test_add_and_drop_primary_key(base) -> None:
    no_pk = run(base, "ALTER TABLE t DROP PRIMARY KEY")
    assert no_pk[T].primary_key == ()
    assert not no_pk[T].column("id").nullable
    assert no_pk[T].key_columns == ("c",)
    pk = run(no_pk, "ALTER TABLE t ADD PRIMARY KEY (a, b)")
    assert pk[T].primary_key == ("a", "b")
    assert not pk[T].column("a").nullable and pk[T].column("a").default is None
    with pytest.raises(DdlApplyError, match="primary key already"):
        run(pk, "ALTER TABLE t ADD PRIMARY KEY (c)")
    assert run(pk, "DROP INDEX `PRIMARY` ON t")[T].primary_key == ()


def test_add_unique_key_and_drop_by_generated_name(base) -> None:
    result = run(base, "ALTER TABLE t ADD UNIQUE (c)")
    assert result[T].unique_keys == (("c",), ("c",), ("a", "b"))
    # MySQL names unnamed keys after their first column: c, then c_2
    second = run(result, "ALTER TABLE t DROP INDEX c_2")
    assert second[T].unique_keys == (("c",), ("a", "b"))
    assert run(second, "DROP INDEX a ON t")[T].unique_keys == (("c",),)


def test_drop_index_unknown_name_keeps_unique_keys(base, caplog) -> None:
    with caplog.at_level(logging.INFO):
        result = run(base, "ALTER TABLE t DROP INDEX some_plain_index")
    assert result == base
    assert "some_plain_index" in caplog.text


def test_add_unique_if_not_exists_and_functional(base) -> None:
    assert run(base, "ALTER TABLE t ADD UNIQUE KEY IF NOT EXISTS uk (c)") == base
    assert run(base, "ALTER TABLE t ADD UNIQUE KEY ((c + 1))") == base
    result = run(base, "CREATE UNIQUE INDEX ix ON t (b)")
    assert ("b",) in result[T].unique_keys


def test_unique_key_order_follows_nullability(base) -> None:
    # the server re-sorts keys on ALTER: NOT NULL first, otherwise the current order
    assert base[T].unique_keys == (("c",), ("a", "b"))
    same = run(base, "ALTER TABLE t MODIFY a VARCHAR(10) NOT NULL, MODIFY b INT NOT NULL")
    assert same[T].unique_keys == (("c",), ("a", "b"))
    swapped = run(same, "ALTER TABLE t MODIFY c INT NULL")
    assert swapped[T].unique_keys == (("a", "b"), ("c",))


def test_convert_to_charset_grows_text(base) -> None:
    schemas = run(
        {},
        "CREATE TABLE l (a TEXT, b TINYTEXT, c VARCHAR(5), d INT, e ENUM('x')) CHARSET latin1",
    )
    result = run(schemas, "ALTER TABLE l CONVERT TO CHARACTER SET utf8mb4")
    table = result[TableName("db", "l")]
    types = {c.name: (c.column_type, c.charset, c.collation) for c in table.columns}
    assert types == {
        "a": ("mediumtext", "utf8mb4", "utf8mb4_general_ci"),
        "b": ("text", "utf8mb4", "utf8mb4_general_ci"),
        "c": ("varchar(5)", "utf8mb4", "utf8mb4_general_ci"),
        "d": ("int(11)", None, None),
        "e": ("enum('x')", "utf8mb4", "utf8mb4_general_ci"),
    }


# purity, unknown tables, statements without schema effect


def test_apply_is_pure(base) -> None:
    snapshot = dict(base)
    result = run(base, "ALTER TABLE t ADD COLUMN z INT")
    assert base == snapshot
    assert result is not base


def test_alter_of_an_unknown_table_changes_nothing(base) -> None:
    assert run(base, "ALTER TABLE nowhere ADD COLUMN z INT") == base


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t ADD INDEX ix (a)",
        "ALTER TABLE t COMMENT 'x'",
        "ALTER TABLE t ENGINE=InnoDB",
        "ALTER TABLE t DEFAULT CHARSET latin1",
        "ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (5))",
        "CREATE VIEW v AS SELECT 1",
        "GRANT ALL ON *.* TO u",
        "ALTER TABLE t MODIFY COLUMN",
    ],
)
def test_statements_without_schema_effect(base, statement: str) -> None:
    assert run(base, statement) == base


def test_one_version_bump_per_statement(base) -> None:
    result = run(base, "ALTER TABLE t ADD x INT, ADD y INT, DROP COLUMN b, MODIFY a TEXT")
    assert result[T].version == base[T].version + 1
