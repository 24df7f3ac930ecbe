"""Column selectors and masks (``cdc.filter.columns``, ``column_plan``, ``column_masks``):
what is sent, how values are masked, and what is refused, with the reason."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cdc.config import load_changefeed_config
from cdc.errors import ConfigError
from cdc.filter.column_masks import mask_sql, mask_value
from cdc.filter.column_plan import ColumnRuleError, plan_columns
from cdc.filter.columns import ColumnMask, ColumnRules, ColumnSelector, MaskMethod
from cdc.model.events import Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import Column, TableName, TableSchema

USERS = TableName("shop", "users")


def _schema(*extra: Column, unique: tuple[tuple[str, ...], ...] = ()) -> TableSchema:
    return TableSchema(
        USERS,
        (
            Column("id", "int", "int(11)", nullable=False),
            Column("email", "varchar", "varchar(40)"),
            Column("name", "varchar", "varchar(80)"),
            Column("photo", "blob", "blob"),
            Column("note_a", "text", "text"),
            Column("note_b", "text", "text"),
            Column("age", "int", "int(11)"),
            *extra,
        ),
        ("id",),
        unique,
    )


def _rules(
    columns: tuple[str, ...] | None = None, *masks: ColumnMask, matcher: str = "shop.users"
) -> ColumnRules:
    selectors = () if columns is None else (ColumnSelector((matcher,), columns),)
    return ColumnRules(selectors, masks)


def _plan(rules: ColumnRules, schema: TableSchema | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
    table_rules = rules.for_table(USERS)
    assert table_rules is not None
    return plan_columns(table_rules, schema or _schema(), **kwargs)  # type: ignore[arg-type]


HASH = ColumnMask(("shop.*",), ("email",), MaskMethod.HASH, salt="pepper")


def test_the_last_matching_pattern_decides_and_exclusions_alone_start_from_all() -> None:
    plan = _plan(_rules(("*", "!photo", "!note_*", "note_b")))
    assert plan.dropped == {"photo", "note_a"}
    assert _plan(_rules(("!photo",))).dropped == {"photo"}
    assert _plan(_rules(("ID", "Email"))).out.column_names == ("id", "email")


def test_a_table_no_rule_names_is_sent_whole() -> None:
    rules = _rules(("id",), matcher="shop.orders")
    assert rules.for_table(USERS) is None
    assert not ColumnRules()


def test_rows_are_projected_and_masked_keys_untouched() -> None:
    trunc = ColumnMask(("shop.users",), ("name",), MaskMethod.TRUNCATE, length=2)
    plan = _plan(_rules(("*", "!photo"), HASH, trunc))
    change = RowChange(
        USERS,
        Op.UPDATE,
        {"id": 1, "email": "a@x", "name": "Alice", "photo": b"..", "age": 3},
        {"id": 1, "email": None, "name": "Al", "photo": b"..", "age": 4},
        (1,),
        Position("binlog.000001", 4),
    )
    out = plan.change(change)
    digest = hashlib.sha256(b"peppera@x").hexdigest()
    assert out.before == {"id": 1, "email": digest, "name": "Al", "age": 3}
    assert out.after == {"id": 1, "email": None, "name": "Al", "age": 4}
    assert out.key == (1,)


def test_a_hashed_column_narrower_than_the_hash_is_sent_as_char_64() -> None:
    plan = _plan(_rules(None, HASH))
    email = plan.out.column("email")
    assert (email.data_type, email.column_type) == ("char", "char(64)")
    wide = _schema(Column("mail2", "varchar", "varchar(200)"))
    hashed = ColumnMask(("shop.users",), ("mail2",), MaskMethod.HASH)
    assert _plan(_rules(None, hashed), wide).out.column("mail2").column_type == "varchar(200)"


@pytest.mark.parametrize(
    ("rules", "schema", "message"),
    [
        (_rules(("*", "!id")), None, "key column 'id' cannot be excluded"),
        (
            _rules(None, ColumnMask(("shop.users",), ("id",), MaskMethod.HASH)),
            None,
            "key column 'id' cannot be masked",
        ),
        (
            _rules(None, ColumnMask(("shop.users",), ("name",), MaskMethod.REDACT)),
            _schema(unique=(("name",),)),
            "key column 'name' cannot be masked",
        ),
        (
            _rules(None, ColumnMask(("shop.users",), ("age",), MaskMethod.REDACT)),
            None,
            "is not text",
        ),
        (
            _rules(None, ColumnMask(("shop.users",), ("photo",), MaskMethod.HASH)),
            None,
            "is not text",
        ),
        (
            _rules(None, HASH, ColumnMask(("shop.users",), ("e*",), MaskMethod.REDACT)),
            None,
            "masked by 2 masks",
        ),
        (
            _rules(None, ColumnMask(("shop.users",), ("v",), MaskMethod.REDACT)),
            _schema(Column("v", "varchar", "varchar(2)")),
            "fewer than the replacement",
        ),
        (
            _rules(None, ColumnMask(("shop.users",), ("g",), MaskMethod.HASH)),
            _schema(Column("g", "varchar", "varchar(80)", generated=True)),
            "is generated",
        ),
    ],
)
def test_refused_plans_say_why(
    rules: ColumnRules, schema: TableSchema | None, message: str
) -> None:
    with pytest.raises(ColumnRuleError, match=message) as caught:
        _plan(rules, schema)
    assert "shop.users" in str(caught.value)


def test_at_create_a_column_named_without_wildcard_must_exist() -> None:
    with pytest.raises(ColumnRuleError, match="has no column 'emial'"):
        _plan(_rules(("id", "emial")), strict=True)
    _plan(_rules(("id", "emial*")), strict=True)  # a wildcard may match nothing


def test_a_ddl_renaming_a_hidden_column_fails_closed() -> None:
    rules = _rules(("*", "!photo"), HASH)
    before = _plan(rules)
    renamed = _schema()
    renamed = TableSchema(
        USERS,
        tuple(
            Column("mail", c.data_type, c.column_type) if c.name == "email" else c
            for c in renamed.columns
        ),
        ("id",),
    )
    with pytest.raises(ColumnRuleError, match="removed masked or excluded column"):
        _plan(rules, renamed, before=before)


def test_a_ddl_dropping_a_hidden_column_is_fine() -> None:
    rules = _rules(("*", "!photo"), HASH)
    before = _plan(rules)
    dropped = TableSchema(USERS, tuple(c for c in _schema().columns if c.name != "email"), ("id",))
    assert "email" not in _plan(rules, dropped, before=before).out.column_names


def test_a_ddl_narrowing_a_hashed_column_or_hardening_an_excluded_one_fails_closed() -> None:
    rules = _rules(("*", "!photo"), HASH)
    before = _plan(rules)
    narrowed = TableSchema(
        USERS,
        tuple(
            Column("email", "varchar", "varchar(30)") if c.name == "email" else c
            for c in _schema().columns
        ),
        ("id",),
    )
    with pytest.raises(ColumnRuleError, match="cannot hold a 64-character hash"):
        _plan(rules, narrowed, before=before)
    hardened = TableSchema(
        USERS,
        tuple(
            Column("photo", "blob", "blob", nullable=False) if c.name == "photo" else c
            for c in _schema().columns
        ),
        ("id",),
    )
    with pytest.raises(ColumnRuleError, match="NOT NULL without a default"):
        _plan(rules, hardened, before=before)


@pytest.mark.parametrize(
    ("mask", "value", "masked", "sql"),
    [
        (
            ColumnMask(("a.b",), ("c",), MaskMethod.HASH),
            "héllo",
            hashlib.sha256("héllo".encode()).hexdigest(),
            "SHA2(CONVERT(`c` USING utf8mb4), 256)",
        ),
        (
            ColumnMask(("a.b",), ("c",), MaskMethod.TRUNCATE, length=2),
            "héllo",
            "hé",
            "LEFT(`c`, 2)",
        ),
        (
            ColumnMask(("a.b",), ("c",), MaskMethod.REDACT, replacement="x"),
            "héllo",
            "x",
            "IF(`c` IS NULL, NULL, CONVERT(X'78' USING utf8mb4))",
        ),
    ],
)
def test_each_method_in_python_and_sql(mask: ColumnMask, value: str, masked: str, sql: str) -> None:
    assert mask_value(mask, value) == masked
    assert mask_value(mask, None) is None
    assert mask_sql(mask, "`c`") == sql


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[[sink.column-selectors]]\nmatcher = ["a.b"]\n', "sink.column-selectors[0].columns"),
        (
            '[[sink.column-masks]]\nmatcher = ["a.b"]\ncolumns = ["c"]\nmethod = "blur"\n',
            "sink.column-masks[0].method",
        ),
        (
            '[[sink.column-masks]]\nmatcher = ["a.b"]\ncolumns = ["c"]\nmethod = "truncate"\n',
            "sink.column-masks[0].length",
        ),
        (
            '[[sink.column-masks]]\nmatcher = ["a.b"]\ncolumns = ["!c"]\nmethod = "hash"\n',
            "sink.column-masks[0].columns[0]",
        ),
        (
            '[[sink.column-masks]]\nmatcher = ["a.b"]\ncolumns = ["c"]\nmethod = "redact"\n'
            'salt = "s"\n',
            "sink.column-masks[0].salt",
        ),
        (
            '[[sink.column-selectors]]\nmatcher = ["a.b"]\ncolumns = ["c"]\nmask = "x"\n',
            "sink.column-selectors[0].mask",
        ),
    ],
)
def test_bad_rules_in_the_toml_name_their_key(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "cf.toml"
    path.write_text(
        'changefeed-id = "c"\nsource-uri = "mysql://u@h:3306/?password-env=CDC_X"\n'
        'sink-uri = "blackhole://"\n' + text
    )
    with pytest.raises(ConfigError) as caught:
        load_changefeed_config(path)
    assert caught.value.field == field, caught.value


def test_the_rules_round_trip_through_etcd_and_hide_the_salt_in_display(tmp_path: Path) -> None:
    path = tmp_path / "cf.toml"
    path.write_text(
        'changefeed-id = "c"\nsource-uri = "mysql://u@h:3306/?password-env=CDC_X"\n'
        'sink-uri = "blackhole://"\n'
        '[[sink.column-selectors]]\nmatcher = ["shop.users"]\ncolumns = ["*", "!photo"]\n'
        '[[sink.column-masks]]\nmatcher = ["shop.users"]\ncolumns = ["email"]\n'
        'method = "hash"\nsalt = "pepper"\n'
    )
    config = load_changefeed_config(path)
    stored = config.to_dict(mask=False)
    assert stored["sink"]["column-masks"][0]["salt"] == "pepper"
    assert type(config).from_dict(stored) == config
    shown = config.describe()["sink"]
    assert shown["column-masks"][0]["salt"] == "******" and shown["kind"] == "blackhole"
    rules = config.columns.for_table(USERS)
    assert rules is not None and not rules.selects("photo") and rules.selects("email")
