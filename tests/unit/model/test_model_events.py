import pytest

from cdc.model import DdlEvent, DdlKind, Op, Position, RowChange, TableName

T = TableName("shop", "orders")
P = Position("mysql-bin.000003", 1234)


def change(op: Op, before=None, after=None, **kwargs) -> RowChange:
    return RowChange(T, op, before, after, (1,), P, **kwargs)


def test_op_values_are_debezium_letters():
    assert [op.value for op in Op] == ["c", "u", "d", "r"]
    assert Op("r") is Op.READ


@pytest.mark.parametrize(
    ("op", "before", "after", "row"),
    [
        (Op.CREATE, None, {"id": 1, "v": "new"}, {"id": 1, "v": "new"}),
        (Op.READ, None, {"id": 1, "v": "snap"}, {"id": 1, "v": "snap"}),
        (Op.UPDATE, {"id": 1, "v": "old"}, {"id": 1, "v": "new"}, {"id": 1, "v": "new"}),
        (Op.DELETE, {"id": 1, "v": "gone"}, None, {"id": 1, "v": "gone"}),
    ],
)
def test_valid_row_changes_and_row(op, before, after, row):
    rc = change(op, before, after, txn_id="0-1-100", schema_version=2)
    assert rc.row == row
    assert rc.key == (1,)
    assert rc.txn_id == "0-1-100"
    assert rc.schema_version == 2


AFTER_ONLY = "an after image and no before image"
BEFORE_ONLY = "a before image and no after image"
BOTH = "both a before and an after image"
ROW = {"id": 1}


@pytest.mark.parametrize(
    ("op", "before", "after", "needs", "got"),
    [
        (Op.CREATE, ROW, ROW, AFTER_ONLY, "before=present, after=present"),
        (Op.CREATE, None, None, AFTER_ONLY, "before=missing, after=missing"),
        (Op.READ, ROW, None, AFTER_ONLY, "before=present, after=missing"),
        (Op.DELETE, None, ROW, BEFORE_ONLY, "before=missing, after=present"),
        (Op.DELETE, ROW, ROW, BEFORE_ONLY, "before=present, after=present"),
        (Op.UPDATE, None, ROW, BOTH, "before=missing, after=present"),
        (Op.UPDATE, ROW, None, BOTH, "before=present, after=missing"),
    ],
)
def test_images_must_match_the_op(op, before, after, needs, got):
    with pytest.raises(ValueError) as err:
        change(op, before, after)
    assert str(err.value) == (
        f"{op.name} row change for shop.orders at mysql-bin.000003:1234 needs {needs}, got {got}"
    )


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"table": "shop.orders"}, "RowChange table must be a TableName, not 'shop.orders'"),
        ({"op": "c"}, "RowChange op for shop.orders must be an Op, not 'c'; one of CREATE, UPDATE"),
        ({"after": [1, 2]}, "after image must be a mapping of column name to value, not list"),
        ({"key": [1]}, "key must be a tuple of key values, not list"),
        ({"position": "mysql-bin.000003:4"}, "position must be a Position, not 'mysql-bin"),
        ({"schema_version": -1}, "schema_version must be a non-negative int, not -1"),
        ({"schema_version": None}, "schema_version must be a non-negative int, not None"),
    ],
)
def test_row_change_field_validation(kwargs, expected):
    args = {
        "table": T,
        "op": Op.CREATE,
        "before": None,
        "after": {"id": 1},
        "key": (1,),
        "position": P,
    } | kwargs
    with pytest.raises(ValueError) as err:
        RowChange(**args)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    ("op", "before", "after"),
    [
        (Op.CREATE, None, {"id": 1}),
        (Op.READ, None, {"id": 1}),
        (Op.UPDATE, {"id": 0}, {"id": 1}),
        (Op.DELETE, {"id": 0}, None),
    ],
)
def test_row_before_and_after_are_the_images_the_op_carries(op, before, after):
    rc = change(op, before, after)
    for name, image in (("row_before", before), ("row_after", after)):
        if image is not None:
            assert getattr(rc, name) == image
        else:
            which = name.removeprefix("row_")
            with pytest.raises(
                ValueError, match=f"{op.name} row change for shop.orders has no {which} image"
            ):
                getattr(rc, name)


def test_row_change_is_frozen():
    rc = change(Op.CREATE, after={"id": 1})
    with pytest.raises(AttributeError):
        rc.op = Op.DELETE


# --- DDL -------------------------------------------------------------------------------------


def test_ddl_kinds_are_ticdc_filter_names():
    assert len(DdlKind) == 24
    assert DdlKind.MODIFY_TABLE_CHARSET_AND_COLLATE.value == "modify table charset and collate"
    assert DdlKind("add table partition") is DdlKind.ADD_TABLE_PARTITION


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("create table", DdlKind.CREATE_TABLE),
        ("  Add   Column ", DdlKind.ADD_COLUMN),
        ("DROP PRIMARY KEY", DdlKind.DROP_PRIMARY_KEY),
        ("truncate_table_partition", DdlKind.TRUNCATE_TABLE_PARTITION),
        ("Other", DdlKind.OTHER),
    ],
)
def test_ddl_kind_parse(name, kind):
    assert DdlKind.parse(name) is kind


def test_ddl_kind_parse_error_lists_valid_names():
    with pytest.raises(ValueError) as err:
        DdlKind.parse("create tabel")
    message = str(err.value)
    assert message.startswith("unknown DDL kind 'create tabel'; valid kinds: 'create schema', ")
    for kind in DdlKind:
        assert repr(kind.value) in message
    with pytest.raises(TypeError, match="must be a str, not NoneType"):
        DdlKind.parse(None)


def test_ddl_event():
    event = DdlEvent(
        position=P,
        schema="shop",
        tables=[TableName("shop", "a"), TableName("shop", "b")],
        kind=DdlKind.RENAME_TABLE,
        statement="RENAME TABLE a TO b",
    )
    assert event.tables == (TableName("shop", "a"), TableName("shop", "b"))
    hash(event)
    schema_level = DdlEvent(P, "", (), DdlKind.CREATE_SCHEMA, "CREATE DATABASE x")
    assert schema_level.tables == ()


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"position": "x"}, "DDL event position must be a Position, not 'x'"),
        ({"schema": None}, "DDL event schema must be a string ('' for none), not None"),
        ({"tables": ("shop.a",)}, "tables must be a tuple of TableName, not ('shop.a',)"),
        ({"tables": TableName("s", "t")}, "tables must be a tuple of TableName"),
        ({"kind": "create table"}, "kind must be a DdlKind, not 'create table'; use DdlKind.parse"),
        ({"statement": "  "}, "DDL event at mysql-bin.000003:1234 has an empty statement"),
    ],
)
def test_ddl_event_validation(kwargs, expected):
    args = {
        "position": P,
        "schema": "shop",
        "tables": (T,),
        "kind": DdlKind.CREATE_TABLE,
        "statement": "CREATE TABLE orders (id int primary key)",
    } | kwargs
    with pytest.raises(ValueError) as err:
        DdlEvent(**args)
    assert expected in str(err.value)
