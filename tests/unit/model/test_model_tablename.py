"""The string form of a TableName: unambiguous, round-trips, unchanged for ordinary names.

Etcd keys, chunk ids, task names and barrier records carry ``str(TableName)``
and are read back with ``TableName.parse``, so any name MySQL accepts must
survive the trip, and the names that always worked must keep their spelling.
"""

import json
from pathlib import Path

import pytest

from cdc.config import load_changefeed_config
from cdc.errors import ConfigError
from cdc.model import TableName

# (schema, table, str form)
CASES = [
    # Ordinary names keep the bare form every key, log line and label had.
    ("shop", "orders", "shop.orders"),
    ("shop_eu", "order_items2", "shop_eu.order_items2"),
    ("shop-eu", "it's", "shop-eu.it's"),
    ("my db", "a table", "my db.a table"),
    ("shop", 'say "hi"', 'shop.say "hi"'),
    ("select", "order", "select.order"),
    ("naïve", "Ünïcödé", "naïve.Ünïcödé"),
    ("商店", "订单 表", "商店.订单 表"),
    ("shop", "t:1", "shop.t:1"),
    ("shop", "50%", "shop.50%"),
    # A dot or a backtick in a part quotes that part (backticks doubled), only that part.
    ("shop-eu.v2", "it's", "`shop-eu.v2`.it's"),
    ("shop-eu.v2", "it's a.table", "`shop-eu.v2`.`it's a.table`"),
    ("shop", "a.b", "shop.`a.b`"),
    ("a`b", "t", "`a``b`.t"),
    ("s", "`", "s.````"),
    ("s", "``", "s.``````"),
    ("s", "`x`", "s.```x```"),
    ("s", "a.`b`.c", "s.`a.``b``.c`"),
    (".", ".", "`.`.`.`"),
    ("..", "t.", "`..`.`t.`"),
    ("naïve.col", "列.名", "`naïve.col`.`列.名`"),
    # Blanks at either end would be stripped by parse, so they quote the part too.
    (" lead", "trail ", "` lead`.`trail `"),
    ("\tx", "y", "`\tx`.y"),
]


@pytest.mark.parametrize(("schema", "table", "text"), CASES)
def test_str_form_and_round_trip(schema: str, table: str, text: str) -> None:
    name = TableName(schema, table)
    assert str(name) == text
    assert TableName.parse(text) == name
    assert TableName.parse(str(name)) == name


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (TableName("shop-eu.v2", "it's"), TableName("shop-eu", "v2.it's")),
        (TableName("a.b", "c.d"), TableName("a", "b.c.d")),
        (TableName("a", "`b`"), TableName("a", "b")),
        (TableName("a`", "b"), TableName("a", "`b")),
    ],
)
def test_names_that_joined_alike_now_differ(first: TableName, second: TableName) -> None:
    # The old form wrote both as one string, and a split at the first dot picked one.
    assert str(first) != str(second)
    assert TableName.parse(str(first)) == first
    assert TableName.parse(str(second)) == second


def test_every_str_form_in_the_table_is_distinct() -> None:
    texts = [text for _, _, text in CASES]
    assert len(set(texts)) == len(texts)


def test_quoted_is_still_sql_quoting() -> None:
    assert TableName("shop-eu.v2", "a`b").quoted() == "`shop-eu.v2`.`a``b`"
    assert TableName("shop", "orders").quoted() == "`shop`.`orders`"


@pytest.mark.parametrize(
    ("schema", "table"),
    [("", "t"), ("s", ""), ("", ""), (None, "t"), ("s", 3)],
)
def test_empty_or_non_string_parts_are_rejected(schema: object, table: object) -> None:
    with pytest.raises(ValueError, match="must be a non-empty string"):
        TableName(schema, table)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "1 dot-separated part"),
        ("orders", "1 dot-separated part"),
        (".orders", "empty schema or table"),
        ("shop.", "empty schema or table"),
        ("``.t", "empty schema or table"),
        ("s.``", "empty schema or table"),
        ("shop-eu.v2.it's", "3 dot-separated part"),
        ("a.b.c", "3 dot-separated part"),
        ("`a.b", "unclosed backtick"),
        ("s.`t``", "unclosed backtick"),
        ("s.a`b", "stray backtick"),
        ("`a`b.t", "text after a quoted name"),
        ("`a` .t", "text after a quoted name"),
    ],
)
def test_bad_strings_are_rejected_clearly(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        TableName.parse(text)
    assert "`my.db`" in str(info.value), "the error shows how to quote a dotted name"


def test_parse_accepts_quoting_str_would_not_write() -> None:
    # Users may quote any part in filter rules and config; it names the same table.
    assert TableName.parse("`shop`.`orders`") == TableName("shop", "orders")
    assert str(TableName.parse("`shop`.`orders`")) == "shop.orders"


def test_parse_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        TableName.parse(("shop", "orders"))  # type: ignore[arg-type]


# --- consumers of the string form --------------------------------------------------------------


def _chunk_key_columns(tmp_path: Path, columns: dict[str, str]) -> dict[str, str]:
    entries = ", ".join(f"{json.dumps(table)} = {json.dumps(c)}" for table, c in columns.items())
    path = tmp_path / "changefeed.toml"
    path.write_text(
        'changefeed-id = "cf"\nsource-uri = "mysql://repl:pw@127.0.0.1:3306/"\n'
        f'sink-uri = "blackhole://"\n[snapshot]\nchunk-key-columns = {{ {entries} }}\n'
    )
    return dict(load_changefeed_config(path).chunk_key_columns)


def test_chunk_key_columns_are_keyed_by_the_str_form(tmp_path: Path) -> None:
    # Lookups use str(TableName); however the user quoted a name, it is found.
    columns = {"`shop-eu.v2`.`it's a.table`": "ts", "`shop`.`orders`": "id", "a.`b``c`": "x"}
    assert _chunk_key_columns(tmp_path, columns) == {
        str(TableName("shop-eu.v2", "it's a.table")): "ts",
        str(TableName("shop", "orders")): "id",
        str(TableName("a", "b`c")): "x",
    }


@pytest.mark.parametrize("table", ["shop-eu.v2.t", "orders", "shop.", "`a.b"])
def test_chunk_key_columns_refuse_a_name_that_is_not_schema_table(
    tmp_path: Path, table: str
) -> None:
    with pytest.raises(ConfigError, match="is not a schema.table name.*`my.db`"):
        _chunk_key_columns(tmp_path, {table: "id"})
