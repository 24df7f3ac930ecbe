"""Column building and the sqlglot workarounds of the schema package."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from cdc.model import Flavor
from cdc.schema.columns import (
    build_column,
    charset_of_collation,
    column_spec,
    default_collation,
    format_elements,
    parse_elements,
)
from cdc.schema.dialect import (
    BinlogMySQL,
    DdlSyntaxError,
    normalize_table_ddl,
    tokenize,
    unwrap_executable_comments,
)


def column(definition: str, flavor: Flavor = Flavor.MARIADB, charset: str | None = None):
    sql = normalize_table_ddl(f"CREATE TABLE t ({definition})")
    tree = sqlglot.parse_one(sql, dialect=BinlogMySQL)
    return build_column(column_spec(next(tree.find_all(exp.ColumnDef))), flavor, charset)


@pytest.mark.parametrize(
    ("definition", "mariadb", "mysql", "precision", "scale", "fsp"),
    [
        ("c TINYINT", "tinyint(4)", "tinyint", 3, 0, None),
        ("c TINYINT UNSIGNED", "tinyint(3) unsigned", "tinyint unsigned", 3, 0, None),
        ("c SMALLINT", "smallint(6)", "smallint", 5, 0, None),
        ("c MEDIUMINT UNSIGNED", "mediumint(8) unsigned", "mediumint unsigned", 8, 0, None),
        ("c INT(4)", "int(4)", "int", 10, 0, None),
        ("c BIGINT UNSIGNED", "bigint(20) unsigned", "bigint unsigned", 20, 0, None),
        ("c BIGINT", "bigint(20)", "bigint", 19, 0, None),
        ("c DECIMAL", "decimal(10,0)", "decimal(10,0)", 10, 0, None),
        ("c DEC(5,2) UNSIGNED", "decimal(5,2) unsigned", "decimal(5,2) unsigned", 5, 2, None),
        ("c FLOAT", "float", "float", 12, None, None),
        ("c FLOAT(10)", "float", "float", 12, None, None),
        ("c FLOAT(25)", "double", "double", 22, None, None),
        ("c DOUBLE(8,3)", "double(8,3)", "double(8,3)", 8, 3, None),
        ("c BIT", "bit(1)", "bit(1)", 1, None, None),
        ("c TIME", "time", "time", None, None, 0),
        ("c TIMESTAMP(6)", "timestamp(6)", "timestamp(6)", None, None, 6),
        ("c DATE", "date", "date", None, None, None),
        ("c YEAR", "year(4)", "year", None, None, None),
        ("c CHAR", "char(1)", "char(1)", None, None, None),
        ("c BINARY", "binary(1)", "binary(1)", None, None, None),
        ("c BLOB(70000)", "mediumblob", "mediumblob", None, None, None),
        ("c GEOMETRY", "geometry", "geometry", None, None, None),
    ],
)
def test_column_types_per_flavor(definition, mariadb, mysql, precision, scale, fsp) -> None:
    for flavor, text in ((Flavor.MARIADB, mariadb), (Flavor.MYSQL, mysql)):
        built = column(definition, flavor)
        assert built.column_type == text
        assert (built.precision, built.scale, built.fsp) == (precision, scale, fsp)
        assert built.data_type == text.split("(")[0].split(" ")[0]


def test_text_length_picks_the_text_type_by_charset() -> None:
    assert column("c TEXT(100)", charset="latin1").data_type == "tinytext"
    assert column("c TEXT(100)", charset="utf8mb4").data_type == "text"
    assert column("c TEXT(20000)", charset="utf8mb4").data_type == "mediumtext"


def test_character_set_binary_turns_text_types_binary() -> None:
    built = column("c VARCHAR(5) CHARACTER SET binary")
    assert (built.data_type, built.column_type, built.charset) == (
        "varbinary",
        "varbinary(5)",
        None,
    )
    assert column("c TEXT CHARSET binary").data_type == "blob"


def test_charset_and_collation_resolution() -> None:
    assert (column("c CHAR(2)", charset="utf8").charset) == "utf8mb3"
    assert column("c CHAR(2) COLLATE utf8_bin").collation == "utf8mb3_bin"
    assert column("c CHAR(2) CHARACTER SET latin1 BINARY").collation == "latin1_bin"
    assert column("c CHAR(2) ASCII").charset == "latin1"
    assert column("c INT", charset="latin1").charset is None
    assert charset_of_collation("latin1_german2_ci") == "latin1"
    assert charset_of_collation("binary") == "binary"
    assert default_collation("utf8mb4", Flavor.MARIADB) == "utf8mb4_general_ci"
    assert default_collation("utf8mb4", Flavor.MYSQL) == "utf8mb4_0900_ai_ci"
    assert default_collation("nosuch", Flavor.MYSQL) is None


@pytest.mark.parametrize(
    ("definition", "mariadb", "mysql"),
    [
        ("c INT", "NULL", None),
        ("c INT NOT NULL", None, None),
        ("c INT DEFAULT NULL", "NULL", None),
        ("c INT DEFAULT '5'", "5", "5"),
        ("c INT DEFAULT -3", "-3", "-3"),
        ("c VARCHAR(5) DEFAULT 'it''s'", "'it''s'", "it's"),
        ("c VARCHAR(5) DEFAULT '5'", "'5'", "5"),
        ("c TINYINT(1) DEFAULT TRUE", "1", "1"),
        ("c DATETIME DEFAULT CURRENT_TIMESTAMP", "current_timestamp()", "CURRENT_TIMESTAMP()"),
        ("c INT AS (1) VIRTUAL", "NULL", None),
    ],
)
def test_defaults_per_flavor(definition: str, mariadb: str | None, mysql: str | None) -> None:
    assert column(definition, Flavor.MARIADB).default == mariadb
    assert column(definition, Flavor.MYSQL).default == mysql


def test_generated_columns() -> None:
    assert column("c INT GENERATED ALWAYS AS (1) STORED").generated
    assert column("c INT AS (1)").generated
    assert column("c INT AS (1) PERSISTENT").generated
    assert not column("c INT DEFAULT 1").generated


def test_varchar_without_length_is_an_error() -> None:
    with pytest.raises(ValueError, match="needs a length"):
        column("c VARCHAR")


@pytest.mark.parametrize(
    ("column_type", "members"),
    [
        ("enum('a','b')", ("a", "b")),
        ("enum('it''s','x,y')", ("it's", "x,y")),
        ("set('a\\\\b','(c)')", ("a\\b", "(c)")),
        ("enum('')", ("",)),
        ("enum('line\\nbreak')", ("line\nbreak",)),
        ("int(11)", ()),
    ],
)
def test_enum_members_round_trip(column_type: str, members: tuple[str, ...]) -> None:
    assert parse_elements(column_type) == members
    if members:
        assert f"{column_type.split('(')[0]}({format_elements(members)})" == column_type


def test_unterminated_enum_member() -> None:
    with pytest.raises(ValueError, match="unterminated"):
        parse_elements("enum('a")


def test_executable_comments_are_unwrapped_outside_strings() -> None:
    assert unwrap_executable_comments("/*!40101 SET x=1 */").strip() == "SET x=1"
    assert unwrap_executable_comments("/*M!100100 DROP TABLE t */").strip() == "DROP TABLE t"
    text = "CREATE TABLE t (a VARCHAR(9) DEFAULT '/*!50100 no */') /* plain */"
    assert unwrap_executable_comments(text) == text
    assert "`/*!x*/`" in unwrap_executable_comments("DROP TABLE `/*!x*/`")


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("a INT AS (b) PERSISTENT", "STORED"),
        ("PRIMARY KEY USING BTREE (a)", "PRIMARY KEY (a)"),
        ("KEY (a DESC, b ASC)", "KEY (a , b )"),
        ("a FLOAT(7,3) UNSIGNED", "float_unsigned(7,3)"),
        ("a BLOB COMPRESSED=zlib", "a BLOB"),
        ("a POINT SRID 4326 NOT NULL", "a POINT NOT NULL"),
        ("a INT SERIAL DEFAULT VALUE", "NOT NULL AUTO_INCREMENT UNIQUE"),
        ("a INT) WITH SYSTEM VERSIONING", "a INT)"),
    ],
)
def test_normalize_rewrites(source: str, expected: str) -> None:
    assert expected in " ".join(normalize_table_ddl(source).split())


def test_normalize_leaves_names_and_strings_alone() -> None:
    text = "a INT COMMENT 'PERSISTENT USING BTREE', `desc` INT, compressed INT, storage INT"
    assert normalize_table_ddl(text) == text


def test_tokenize_errors_are_ddl_syntax_errors() -> None:
    with pytest.raises(DdlSyntaxError, match="tokenize"):
        tokenize("SELECT 'unterminated")
