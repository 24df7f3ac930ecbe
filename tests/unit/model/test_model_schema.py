import json
import pickle
import subprocess
import sys

import pytest

from cdc.model import Column, TableName, TableSchema

# --- TableName -------------------------------------------------------------------------------


def test_table_name_str_and_quoted():
    name = TableName("shop", "orders")
    assert str(name) == "shop.orders"
    assert name.quoted() == "`shop`.`orders`"
    assert TableName("we`ird", "t`").quoted() == "`we``ird`.`t```"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("shop.orders", TableName("shop", "orders")),
        ("  shop.orders ", TableName("shop", "orders")),
        ("`my.db`.`t.1`", TableName("my.db", "t.1")),
        ("`we``ird`.t", TableName("we`ird", "t")),
        ("shop.`orders`", TableName("shop", "orders")),
    ],
)
def test_table_name_parse(text, expected):
    assert TableName.parse(text) == expected


def test_quoted_names_parse_back():
    name = TableName("a.b`c", "d``e")
    assert TableName.parse(name.quoted()) == name


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", "'orders' has 1 dot-separated part(s), not 2"),
        ("a.b.c", "'a.b.c' has 3 dot-separated part(s), not 2"),
        (".orders", "'.orders' has an empty schema or table"),
        ("shop.", "'shop.' has an empty schema or table"),
        ("`shop.orders", "has an unclosed backtick"),
        ("sh`op.orders", "has a stray backtick"),
        ("`shop`x.orders", "has text after a quoted name at 'x.orders'"),
    ],
)
def test_table_name_parse_errors(text, expected):
    with pytest.raises(ValueError) as err:
        TableName.parse(text)
    message = str(err.value)
    assert expected in message
    assert "expected 'schema.table', e.g. 'shop.orders'" in message


def test_table_name_validates_parts():
    with pytest.raises(ValueError, match="table name must be a non-empty string, not ''"):
        TableName("shop", "")
    with pytest.raises(ValueError, match="schema name must be a non-empty string, not None"):
        TableName(None, "t")
    with pytest.raises(TypeError, match="must be a str, not int"):
        TableName.parse(3)


# --- Column ----------------------------------------------------------------------------------


def test_column_normalises_type_and_elements():
    column = Column("status", " ENUM ", "enum('a','b')", elements=["a", "b"])
    assert column.data_type == "enum"
    assert column.elements == ("a", "b")
    hash(column)  # frozen and hashable even when given a list


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"name": ""}, "column name must be a non-empty string, not ''"),
        ({"data_type": ""}, "column 'c': data_type must be a non-empty string"),
        ({"column_type": None}, "column 'c': column_type must be a non-empty string"),
        ({"precision": -1}, "column 'c': precision must be a non-negative int or None, not -1"),
        ({"scale": "2"}, "column 'c': scale must be a non-negative int or None, not '2'"),
        ({"fsp": 7}, "column 'c': fsp (fractional seconds precision) must be 0..6, not 7"),
        ({"elements": "ab"}, "column 'c': elements must be a sequence of strings, not 'ab'"),
        ({"elements": ("a", 1)}, "elements must be a sequence of strings"),
    ],
)
def test_column_validation(kwargs, expected):
    args = {"name": "c", "data_type": "int", "column_type": "int(11)"} | kwargs
    with pytest.raises(ValueError) as err:
        Column(**args)
    assert expected in str(err.value)


# --- TableSchema -----------------------------------------------------------------------------


def orders(**overrides) -> TableSchema:
    args = {
        "name": TableName("shop", "orders"),
        "columns": (
            Column("Id", "bigint", "bigint(20) unsigned", nullable=False, unsigned=True),
            Column("code", "varchar", "varchar(32)", nullable=False, charset="utf8mb4",
                   collation="utf8mb4_general_ci"),
            Column("email", "varchar", "varchar(255)"),
            Column("amount", "decimal", "decimal(10,2)", precision=10, scale=2, default="0.00"),
            Column("created", "datetime", "datetime(3)", fsp=3),
            Column("state", "enum", "enum('new','paid')", elements=("new", "paid")),
            Column("total", "decimal", "decimal(12,2)", precision=12, scale=2, generated=True),
        ),
        "primary_key": ("id",),
        "unique_keys": (("email",), ("CODE",)),
        "version": 3,
    }  # fmt: skip
    return TableSchema(**(args | overrides))


def test_column_lookup_is_case_insensitive():
    schema = orders()
    assert schema.column("ID").name == "Id"
    assert schema.column("Amount").scale == 2
    assert schema.column_names == ("Id", "code", "email", "amount", "created", "state", "total")


def test_key_names_are_stored_as_the_columns_spell_them():
    schema = orders()
    assert schema.primary_key == ("Id",)
    assert schema.unique_keys == (("email",), ("code",))


def test_unknown_column_names_the_table_and_existing_columns():
    with pytest.raises(KeyError) as err:
        orders().column("nope")
    message = err.value.args[0]
    assert "table shop.orders has no column 'nope'" in message
    assert "its columns are Id, code, email, amount, created, state, total" in message


def test_key_columns_prefers_primary_key():
    assert orders().key_columns == ("Id",)


def test_key_columns_falls_back_to_first_not_null_unique_key():
    # email is nullable (many NULL rows may share it), so code is the key.
    assert orders(primary_key=()).key_columns == ("code",)


def test_key_columns_empty_without_a_usable_key():
    assert orders(primary_key=(), unique_keys=(("email",),)).key_columns == ()
    assert orders(primary_key=(), unique_keys=()).key_columns == ()


def test_table_schema_dict_round_trip_through_json():
    schema = orders()
    data = json.loads(json.dumps(schema.to_dict()))
    assert data["v"] == 1
    assert data["name"] == {"schema": "shop", "table": "orders"}
    back = TableSchema.from_dict(data)
    assert back == schema
    assert back.column("created").fsp == 3
    assert back.column("state").elements == ("new", "paid")
    assert back.column("total").generated is True
    assert back.column("code").collation == "utf8mb4_general_ci"
    assert hash(back) == hash(schema)


def test_from_dict_accepts_omitted_optional_fields():
    schema = TableSchema.from_dict(
        {
            "v": 1,
            "name": {"schema": "s", "table": "t"},
            "columns": [{"name": "id", "data_type": "int", "column_type": "int(11)"}],
            "primary_key": ["id"],
        }
    )
    assert schema.version == 0
    assert schema.unique_keys == ()
    assert schema.column("id").nullable is True


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"columns": ()}, "table shop.orders must have at least one column"),
        (
            {"columns": (Column("a", "int", "int"), Column("A", "int", "int"))},
            "table shop.orders has column 'A' twice",
        ),
        ({"columns": ("a",)}, "columns must be Column objects"),
        ({"name": "shop.orders"}, "table schema name must be a TableName, not 'shop.orders'"),
        ({"primary_key": "id"}, "primary key must be a sequence of column names, not 'id'"),
        ({"primary_key": ("id", "ID")}, "primary key ('id', 'ID') repeats a column"),
        ({"unique_keys": (("email", "nope"),)}, "no column 'nope' (named in unique key"),
        ({"unique_keys": ((),)}, "a unique key needs at least one column"),
        ({"unique_keys": ("email",)}, "unique key must be a sequence of column names"),
        ({"unique_keys": "email"}, "unique_keys must be a sequence of key tuples"),
        ({"version": -1}, "version must be a non-negative int, not -1"),
        ({"version": "1"}, "version must be a non-negative int, not '1'"),
    ],
)
def test_table_schema_validation(overrides, expected):
    with pytest.raises((ValueError, KeyError)) as err:
        orders(**overrides)
    assert expected in str(err.value)


def test_primary_key_on_a_missing_column_is_a_key_error_naming_the_key():
    with pytest.raises(KeyError) as err:
        orders(primary_key=("uid",))
    assert "no column 'uid' (named in primary key ('uid',))" in err.value.args[0]


def base_dict() -> dict:
    return {
        "v": 1,
        "name": {"schema": "s", "table": "t"},
        "columns": [{"name": "id", "data_type": "int", "column_type": "int(11)"}],
        "primary_key": ["id"],
    }


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"v": 2}, "unsupported table schema format version 2 (this build reads version 1)"),
        ({"v": None}, "unsupported table schema format version None"),
        ({"columns": None}, "columns must be a list, not None"),
        ({"name": "s.t"}, "name must be {'schema': ..., 'table': ...}, not 's.t'"),
        ({"name": {"schema": "s"}}, "name must be {'schema': ..., 'table': ...}"),
        ({"primary_key": "id"}, "primary key must be a sequence of column names, not 'id'"),
        ({"unique_keys": ["id"]}, "unique key must be a sequence of column names, not 'id'"),
        (
            {"columns": [{"name": "id", "data_type": "int", "column_type": "int", "x": 1}]},
            "stored column 'id' has unknown field(s) ['x']",
        ),
        ({"columns": [{"name": "id", "data_type": "int"}]}, "stored column lacks column_type"),
        ({"columns": ["id"]}, "a stored column must be a JSON object, not 'id'"),
        (
            {"columns": [{"name": "e", "data_type": "enum", "column_type": "x", "elements": "a"}]},
            "stored column 'e': elements must be a list, not 'a'",
        ),
    ],
)
def test_table_schema_from_dict_errors(change, expected):
    with pytest.raises(ValueError) as err:
        TableSchema.from_dict(base_dict() | change)
    assert expected in str(err.value)


def test_table_schema_from_dict_missing_fields():
    data = base_dict()
    del data["columns"], data["primary_key"]
    with pytest.raises(ValueError, match="stored table schema lacks columns, primary_key"):
        TableSchema.from_dict(data)
    with pytest.raises(ValueError, match="must be a JSON object"):
        TableSchema.from_dict("{}")


def test_a_table_name_sent_to_another_process_hashes_as_that_process_does() -> None:
    # The hash is kept per name (rows look their table up several times); a pickled
    # name must not carry it to a process whose string hashes differ (Spark workers,
    # decode workers), or it would never be found among that process's own names.
    sent = pickle.dumps(TableName("shop", "orders"))
    check = (
        "import pickle, sys; from cdc.model import TableName; "
        "name = pickle.loads(sys.stdin.buffer.read()); "
        "assert {TableName('shop', 'orders'): 1}.get(name) == 1, 'not found'"
    )
    for seed in ("1", "2"):
        subprocess.run(
            [sys.executable, "-c", check],
            input=sent,
            check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""},
        )
