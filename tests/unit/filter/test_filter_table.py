"""Table filter: TiDB's rule syntax and last-match-wins semantics."""

from __future__ import annotations

import pytest

from cdc.errors import ConfigError
from cdc.filter import RULE_SYNTAX, SYSTEM_SCHEMAS, TableFilter, is_system_schema


def accepts(rules: list[str], schema: str, table: str, case_sensitive: bool = False) -> bool:
    return TableFilter.parse(rules, case_sensitive=case_sensitive).matches(schema, table)


@pytest.mark.parametrize(
    ("rules", "schema", "table", "expected"),
    [
        (["db.t1"], "db", "t1", True),
        (["db.t1"], "db", "t2", False),
        (["db.t1"], "db2", "t1", False),
        (["db.*"], "db", "anything", True),
        (["db.*"], "dbx", "t", False),
        (["*.*"], "any", "thing", True),
        (["*.orders"], "shop", "orders", True),
        (["*.orders"], "shop", "orders2", False),
        (["db.t*"], "db", "t", True),
        (["db.t*"], "db", "tab", True),
        (["db.t*"], "db", "xt", False),
        (["db?.t"], "db1", "t", True),
        (["db?.t"], "db", "t", False),
        (["db?.t"], "db12", "t", False),
        (["db.t[0-9]"], "db", "t7", True),
        (["db.t[0-9]"], "db", "tx", False),
        (["db.t[0-9]"], "db", "t10", False),
        (["db.t[!0-9]"], "db", "tx", True),
        (["db.t[!0-9]"], "db", "t7", False),
        (["db.t[^x]"], "db", "t^", True),
        (["db.t[^x]"], "db", "tx", True),
        (["db.t[^x]"], "db", "ty", False),
        (["db.t[abc]"], "db", "tb", True),
        (["db.t[abc]"], "db", "td", False),
        (["db?.t[a-z]*"], "db1", "tx_log", True),
        (["db?.t[a-z]*"], "db1", "t1", False),
        (["$db_1.t$"], "$db_1", "t$", True),
        (["dé.tå"], "dé", "tå", True),
        (["db.?"], "db", "é", True),
    ],
)
def test_wildcards_and_plain_names(rules, schema, table, expected):
    assert accepts(rules, schema, table) is expected


def test_star_matches_empty_and_dots_and_newlines():
    f = TableFilter.parse(["a*.*"])
    assert f.matches("a", "x.y")
    assert f.matches("a\nb", "t\n")
    assert not TableFilter.parse(["db.t"]).matches("db", "t\n")
    assert not TableFilter.parse(["db.t?"]).matches("db", "t1\n")


def test_wildcards_do_not_leak_regex_meaning():
    # '$' and '_' are identifier characters, '(' needs escaping: none is a regex operator.
    assert accepts(["db.a$"], "db", "a$")
    assert not accepts(["db.a$"], "db", "a")
    assert accepts(["db.a_*"], "db", "a_1")
    assert not accepts(["db.a_*"], "db", "ab1")
    assert accepts(["db.\\(x\\)*"], "db", "(x)1")


def test_negation_excludes_and_an_unmatched_table_is_rejected():
    rules = ["*.*", "!db.tmp_*"]
    assert accepts(rules, "db", "orders")
    assert not accepts(rules, "db", "tmp_1")
    assert accepts(rules, "other", "tmp_1")
    assert not accepts(["!db.tmp_*"], "db", "orders")
    assert not accepts([], "db", "orders")


def test_last_matching_rule_wins():
    # The example table of the TiDB documentation.
    rules = ["employees.*", "!*.dep*", "*.departments"]
    assert not accepts(rules, "irrelevant", "table")
    assert accepts(rules, "employees", "employees")
    assert not accepts(rules, "employees", "dept_emp")
    assert accepts(rules, "employees", "departments")
    assert accepts(rules, "else", "departments")
    # Reversing the order flips the outcome.
    assert not accepts(["db.t", "!db.*"], "db", "t")
    assert accepts(["!db.*", "db.t"], "db", "t")


def test_case_insensitive_by_default():
    f = TableFilter.parse(["Shop.Order*", "!shop.ORDERS_tmp"])
    assert f.matches("shop", "orders")
    assert f.matches("SHOP", "ORDERS_2024")
    assert not f.matches("Shop", "orders_TMP")
    assert TableFilter.parse(["db.t[A-C]"]).matches("DB", "tb")
    assert TableFilter.parse(["/^Sales$/.*"]).matches("sales", "x")
    assert TableFilter.parse(["`My.Db`.T"]).matches("my.db", "t")


def test_case_sensitive_when_asked():
    f = TableFilter.parse(["Shop.Order*", "!Shop.Orders_tmp"], case_sensitive=True)
    assert f.matches("Shop", "Orders")
    assert not f.matches("shop", "orders")
    assert not f.matches("Shop", "Orders_tmp")
    assert f.matches("Shop", "Orders_TMP")
    assert not TableFilter.parse(["db.t[A-C]"], case_sensitive=True).matches("db", "tb")
    assert not TableFilter.parse(["`My.Db`.T"], case_sensitive=True).matches("my.db", "t")
    assert not TableFilter.parse(["/^Sales$/.*"], case_sensitive=True).matches("sales", "x")


@pytest.mark.parametrize("schema", sorted(SYSTEM_SCHEMAS) + ["MySQL", "INFORMATION_SCHEMA"])
def test_system_schemas_are_never_captured(schema):
    f = TableFilter.parse(["*.*", f"{schema}.*", f"`{schema}`.user"])
    assert not f.matches(schema, "user")
    assert not f.matches_schema(schema)
    assert is_system_schema(schema)
    assert f.matches("mysqlx", "user")
    assert not is_system_schema("mysqlx")


def test_backquoted_and_double_quoted_names_are_literal():
    f = TableFilter.parse(["`my.db`.`t*`", '"we""ird".`back``tick`'])
    assert f.matches("my.db", "t*")
    assert not f.matches("my.db", "tx")
    assert not f.matches("myxdb", "t*")
    assert f.matches('we"ird', "back`tick")


def test_escapes_make_punctuation_literal():
    f = TableFilter.parse(["AdventureWorks\\.*.*"])
    assert f.matches("AdventureWorks.Person", "Password")
    assert not f.matches("AdventureWorks", "Password")
    assert TableFilter.parse(["db.a\\*"]).matches("db", "a*")
    assert not TableFilter.parse(["db.a\\*"]).matches("db", "ab")
    assert TableFilter.parse(["db.a\\-b"]).matches("db", "a-b")
    assert TableFilter.parse(["db.a[\\]x]"]).matches("db", "a]")
    assert TableFilter.parse(["db.t[ ]"]).matches("db", "t ")


def test_regex_patterns_search_anywhere_in_the_name():
    f = TableFilter.parse(["/^db\\d{2,}$/./^tbl\\d{2,}$/"])
    assert f.matches("db01", "tbl99")
    assert not f.matches("db1", "tbl99")
    assert TableFilter.parse(["/b/.*"]).matches("db01", "x")
    assert TableFilter.parse(["/a\\/b/.*"]).matches("a/b", "x")


def test_blank_rules_and_comments_are_skipped():
    f = TableFilter.parse(["", "  ", "# a comment", "  db.t  ", "\t!db.u"])
    assert f.matches("db", "t")
    assert not f.matches("db", "u")


def test_matches_schema():
    # A positive rule naming the schema makes it worth reading.
    assert TableFilter.parse(["db.t1"]).matches_schema("db")
    assert TableFilter.parse(["db*.t1"]).matches_schema("db_x")
    assert not TableFilter.parse(["db.t1"]).matches_schema("other")
    # Excluding some tables leaves the schema in; excluding all of them takes it out.
    assert TableFilter.parse(["*.*", "!db.tmp_*"]).matches_schema("db")
    assert not TableFilter.parse(["*.*", "!db.*"]).matches_schema("db")
    assert TableFilter.parse(["*.*", "!db.*"]).matches_schema("other")
    assert TableFilter.parse(["!db.*", "db.t"]).matches_schema("db")
    assert not TableFilter.parse(["db.t", "!db.*"]).matches_schema("db")
    assert not TableFilter.parse([]).matches_schema("db")


def test_results_are_stable_across_the_cache():
    f = TableFilter.parse(["*.*", "!db.x"])
    for _ in range(3):
        assert f.matches("db", "y")
        assert not f.matches("db", "x")
        assert f.matches_schema("db")


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("db", "missing '.' and table pattern"),
        ("db.", "empty table pattern"),
        (".t", "empty schema pattern"),
        ("!", "empty schema pattern"),
        ("db.t.x", "stray text '.x'"),
        ("db.t[a-z", "unclosed or empty character class"),
        ("db.t[]", "unclosed or empty character class"),
        ("db.t[!]", "unclosed or empty character class"),
        ("db.t[z-a]", "invalid wildcard pattern"),
        ("db.t\\", "'\\' at the end of the rule"),
        ("db.\\n", "cannot escape a letter or digit"),
        ("db.t-x", "unexpected special character '-'"),
        ("db name.t", "unexpected special character ' '"),
        ("`db.t", "unclosed or empty `quoted` schema name"),
        ("``.t", "unclosed or empty `quoted` schema name"),
        ('db."t', 'unclosed or empty "quoted" table name'),
        ('"this is "invalid*.*', "expected '.' between schema and table patterns, found 'i'"),
        ("/db.t", "unterminated /regex/"),
        ("/(/.t", "invalid regular expression /(/"),
        ("@filter.txt", "importing rules from a file (@file) is not supported"),
    ],
)
def test_invalid_rules_name_the_rule_and_the_problem(rule, problem):
    with pytest.raises(ConfigError) as caught:
        TableFilter.parse(["*.*", rule], field="filter.rules")
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.field == "filter.rules[1]"
    assert repr(rule) in error.message
    assert problem in error.message
    if not rule.startswith("@"):
        assert RULE_SYNTAX in error.message


def test_rules_must_be_a_list_of_strings():
    with pytest.raises(ConfigError, match=r"must be a list of strings.*\['shop\.\*'\]"):
        TableFilter.parse("db.*")  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        TableFilter.parse(["db.*", 3], field="x.matcher")  # type: ignore[list-item]
    assert caught.value.field == "x.matcher[1]"


def test_repr_shows_rules():
    assert repr(TableFilter.parse(["db.*"])) == "TableFilter(['db.*'], case_sensitive=False)"
