"""Both file protocols give every canonical value back exactly (type, scale, bits,
time zone), and refuse what they could not give back, naming the column or the line."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from cdc.model import Column, GtidSet, Op, Position, RowChange, TableName, TableSchema
from cdc.sink.file.canal_json import CanalJsonCodec, decode_ddl, encode_ddl
from cdc.sink.file.codec import FileFormatError, RowCodec
from cdc.sink.file.csv_format import CsvCodec, split_record
from cdc.sink.file.values import BytesForm, decoder_for, encoder_for
from cdc.typeconv import RawDate, RawDateTime

CODECS = [CanalJsonCodec(), CsvCodec()]
IDS = ["canal-json", "csv"]


def col(name: str, data_type: str, column_type: str | None = None, **kw: Any) -> Column:
    return Column(name, data_type, column_type or data_type, **kw)


SET_MEMBERS = ("a", "b", "é", "😀")
# (column, values): every value must come back identical, NULL included.
CASES: list[tuple[Column, list[Any]]] = [
    (col("ti", "tinyint", "tinyint(4)"), [-128, 0, 127]),
    (col("bi", "bigint", "bigint(20)"), [-(2**63), 2**63 - 1]),
    (col("biu", "bigint", "bigint(20) unsigned", unsigned=True), [0, 2**64 - 1]),
    (col("y", "year", "year(4)"), [0, 1901, 2155]),
    (col("bt", "bit", "bit(64)"), [0, 1, 2**64 - 1]),
    (
        col("d", "decimal", "decimal(65,30)", precision=65, scale=30),
        [
            Decimal("-12.50"),
            Decimal("0.000000000000000000000000000001"),
            Decimal("1.000000000000000000000000000000"),
            Decimal("-" + "9" * 35 + "." + "9" * 30),
            Decimal("0.00"),
            Decimal("-0"),
        ],
    ),
    (
        col("f", "float"),
        [0.10000000149011612, 3.402820018375656e38, 1.1754943508222875e-38, -0.0, 16777216.0],
    ),
    (col("db", "double"), [0.1, 1.7976931348623157e308, 5e-324, -1e-5, 1 / 3]),
    (
        col("dt", "date"),
        [date(1, 1, 1), date(999, 12, 31), date(2024, 2, 29), RawDate(0, 0, 0)]
        + [RawDate(2024, 0, 15), RawDate(2024, 2, 31), RawDate(0, 1, 1)],
    ),
    (
        col("dtm", "datetime", "datetime(6)", fsp=6),
        [
            datetime(9999, 12, 31, 23, 59, 59, 999999),
            datetime(999, 1, 1),
            datetime(2024, 5, 31, 1, 2, 3, 500000),
            RawDateTime(0, 0, 0),
            RawDateTime(2024, 2, 31, 23, 59, 59, 999000),
            RawDateTime(0, 1, 1, 0, 0, 0, 500000),
        ],
    ),
    (
        col("ts", "timestamp", "timestamp(6)", fsp=6),
        [
            datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC),
            RawDateTime(0, 0, 0),
        ],
    ),
    (
        col("tm", "time", "time(6)", fsp=6),
        [
            -timedelta(hours=838, minutes=59, seconds=59),
            timedelta(hours=838, minutes=59, seconds=59, microseconds=999999),
            -timedelta(microseconds=1),
            timedelta(0),
            timedelta(hours=24, microseconds=1000),
        ],
    ),
    (
        col("v", "varchar", "varchar(300)", charset="utf8mb4"),
        ["", "😀é€", 'a,"b"\n\r\t', "\\N", "\x00", "line\u2028sep", " ", "NULL"],
    ),
    (col("lt", "longtext", charset="latin1"), ["é€\x81", "Œœ\x9d"]),
    (col("e", "enum", "enum('a','😀')", elements=("a", "😀")), ["", "a", "😀"]),
    (col("j", "json"), ['{"a":  [1, 2.5], "b": "😀"}', "null", '"x"']),
    (col("bn", "binary", "binary(4)", charset="binary"), [b"ab\x00\x00", b"\x00" * 4]),
    (
        col("bl", "blob", charset="binary"),
        [bytes(range(256)), b"", b'"', b",", b"\\N", b"\n\r", b"\xc3"],
    ),
    (col("g", "geometry"), [b"\x00\x00\x00\x00\x01\x01\x00\x00\x00" + b"\x00" * 16]),
    (
        col("s", "set", "set('a','b','é','😀')", elements=SET_MEMBERS),
        [frozenset(), frozenset({"a"}), frozenset(SET_MEMBERS), frozenset({"😀", "b"})],
    ),
    (
        col("s64", "set", elements=tuple(f"m{i}" for i in range(64))),
        [frozenset({"m0", "m63"})],
    ),
]


def fingerprint(value: Any) -> Any:
    """Type and exact value: Decimal scale, float bits, time zone all count."""
    if isinstance(value, Decimal):
        return ("Decimal", str(value))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted(value)))
    if isinstance(value, datetime):
        return ("datetime", value.isoformat(), str(value.tzinfo))
    return (type(value).__name__, value)


def image_prints(image: Any) -> dict[str, Any]:
    return {name: fingerprint(value) for name, value in image.items()}


ID = Column("id", "int", "int(11)", nullable=False)
TABLE = TableName("shop", "all_types")
SCHEMA = TableSchema(TABLE, (ID, *(c for c, _ in CASES)), ("id",), version=3)
GTID = GtidSet.parse("0-1-42,1-2-7")
POSITION = Position("binlog.000012", 4567, GTID)


def rows() -> list[dict[str, Any]]:
    """One row per value index, plus an all-NULL row; columns short of values get NULL."""
    width = max(len(values) for _, values in CASES)
    result = []
    for i in range(width):
        row = {"id": i + 1}
        for column, values in CASES:
            row[column.name] = values[i] if i < len(values) else None
        result.append(row)
    result.append({"id": width + 1, **{c.name: None for c, _ in CASES}})
    return result


def round_trip(codec: RowCodec, changes: list[RowChange], schema: TableSchema = SCHEMA):
    encode = codec.encoder(schema)
    data = b"".join(encode(change, 1_700_000_000_000) for change in changes)
    records = list(codec.records(data.splitlines(keepends=True), "f"))
    decode = codec.decoder(schema)
    return data, records, [decode(r) for r in records]


def assert_same(got: RowChange, want: RowChange) -> None:
    assert (got.table, got.op, got.key, got.position, got.txn_id) == (
        want.table,
        want.op,
        want.key,
        want.position,
        want.txn_id,
    )
    assert got.position.gtid == want.position.gtid
    assert got.schema_version == SCHEMA.version
    for label in ("before", "after"):
        mine, theirs = getattr(got, label), getattr(want, label)
        assert (mine is None) == (theirs is None), label
        if mine is not None:
            assert image_prints(mine) == image_prints(theirs), label


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_every_canonical_value_round_trips_in_every_op(codec: RowCodec) -> None:
    all_rows = rows()
    changes = []
    for n, row in enumerate(all_rows):
        changes.append(RowChange(TABLE, Op.CREATE, None, row, (row["id"],), POSITION, "0-1-42"))
        changes.append(RowChange(TABLE, Op.READ, None, row, (row["id"],), POSITION))
        other = all_rows[(n + 1) % len(all_rows)]
        moved = {**other, "id": row["id"] + 100}
        changes.append(RowChange(TABLE, Op.UPDATE, row, moved, (moved["id"],), POSITION))
        changes.append(RowChange(TABLE, Op.DELETE, row, None, (row["id"],), POSITION, "x"))
    _, records, decoded = round_trip(codec, changes)
    assert len(records) == len(changes)
    for got, want in zip(decoded, changes, strict=True):
        assert_same(got, want)


@pytest.mark.parametrize("form", list(BytesForm))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c, _ in CASES])
def test_value_text_round_trip(case: tuple[Column, list[Any]], form: BytesForm) -> None:
    column, values = case
    encode, decode = encoder_for(column, form), decoder_for(column, form)
    for value in [*values, None]:
        text = encode(value)
        assert text is None or isinstance(text, str)
        assert fingerprint(decode(text)) == fingerprint(value)


def test_documented_text_forms() -> None:
    def text(column: Column, value: Any, form: BytesForm = BytesForm.LATIN1) -> str | None:
        return encoder_for(column, form)(value)

    assert text(col("d", "decimal"), Decimal("1E-6")) == "0.000001"
    assert text(col("f", "double"), 0.1) == "0.1"
    assert text(col("t", "timestamp"), datetime(2024, 1, 1, 8, tzinfo=timezone(timedelta(hours=8))))
    assert (
        text(col("t", "timestamp"), datetime(2024, 1, 1, 8, tzinfo=timezone(timedelta(hours=8))))
        == "2024-01-01 00:00:00"
    )
    assert text(col("d", "datetime"), datetime(2024, 1, 1, 1, 2, 3, 500000)) == (
        "2024-01-01 01:02:03.500000"
    )
    assert text(col("d", "date"), RawDate(0, 0, 0)) == "0000-00-00"
    assert text(col("t", "time"), -timedelta(hours=838, minutes=59, seconds=59)) == "-838:59:59"
    assert text(col("s", "set", elements=("x", "y", "z")), frozenset({"z", "x"})) == "x,z"
    assert text(col("b", "blob"), b"\x00\xff") == "\x00\xff"
    assert text(col("b", "blob"), b"\x00\xff", BytesForm.BASE64) == "AP8="


@pytest.mark.parametrize(
    ("column", "value", "words"),
    [
        (col("i", "int"), "12", "holds str"),
        (col("i", "int"), True, "holds bool"),
        (col("d", "decimal"), 1.5, "a Decimal"),
        (col("f", "double"), 1, "a float"),
        (col("t", "timestamp"), datetime(2024, 1, 1), "aware"),
        (col("t", "datetime"), datetime(2024, 1, 1, tzinfo=UTC), "naive"),
        (col("d", "date"), datetime(2024, 1, 1), "a date"),
        (col("b", "blob"), "text", "bytes"),
        (col("s", "set", elements=("a",)), frozenset({"b"}), "not members"),
        (col("s", "set", elements=("a",)), "a", "frozenset"),
        (col("t", "time"), timedelta(hours=839), "outside"),
    ],
)
def test_values_that_cannot_round_trip_are_refused(column: Column, value: Any, words: str) -> None:
    with pytest.raises(ValueError, match=words) as caught:
        encoder_for(column, BytesForm.BASE64)(value)
    assert "'" + column.name + "'" in str(caught.value) or words == "outside"


def test_unsupported_type_is_named() -> None:
    with pytest.raises(ValueError, match="'v'.*vector.*not supported"):
        encoder_for(col("v", "vector", "vector(3)"), BytesForm.LATIN1)


@pytest.mark.parametrize(
    ("column", "text"),
    [
        (col("i", "int"), "1.5"),
        (col("d", "decimal"), "NaN"),
        (col("d", "date"), "2024-1-1"),
        (col("d", "datetime"), "2024-01-01T00:00:00"),
        (col("b", "blob"), "not base64!"),
    ],
)
def test_bad_text_is_a_clear_error(column: Column, text: str) -> None:
    with pytest.raises(ValueError, match=f"'{column.name}'.*cannot read"):
        decoder_for(column, BytesForm.BASE64)(text)


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_row_not_fitting_the_schema_is_refused(codec: RowCodec) -> None:
    schema = TableSchema(TABLE, (ID, col("a", "int")), ("id",))
    encode = codec.encoder(schema)
    missing = RowChange(TABLE, Op.CREATE, None, {"id": 1}, (1,), POSITION)
    extra = RowChange(TABLE, Op.CREATE, None, {"id": 1, "a": 2, "b": 3}, (1,), POSITION)
    with pytest.raises(ValueError, match=r"missing columns \['a'\]"):
        encode(missing, 0)
    with pytest.raises(ValueError, match=r"unknown columns \['b'\]"):
        encode(extra, 0)


def test_canal_json_message_has_canals_fields() -> None:
    schema = TableSchema(TABLE, (ID, col("note", "varchar", "varchar(20)")), ("id",))
    before = {"id": 7, "note": "old"}
    after = {"id": 7, "note": "new"}
    change = RowChange(TABLE, Op.UPDATE, before, after, (7,), POSITION, "0-1-42")
    data, _, _ = round_trip(CanalJsonCodec(), [change], schema)
    message = json.loads(data)
    assert list(message)[:14] == [
        "id",
        "database",
        "table",
        "pkNames",
        "isDdl",
        "type",
        "es",
        "ts",
        "sql",
        "sqlType",
        "mysqlType",
        "data",
        "old",
        "_position",
    ]
    assert message["database"] == "shop" and message["table"] == "all_types"
    assert message["pkNames"] == ["id"] and message["isDdl"] is False
    assert message["type"] == "UPDATE" and message["es"] == 1_700_000_000_000
    assert message["sqlType"] == {"id": 4, "note": 12}
    assert message["mysqlType"] == {"id": "int(11)", "note": "varchar(20)"}
    assert message["data"] == [{"id": "7", "note": "new"}]
    assert message["old"] == [{"id": "7", "note": "old"}]
    assert Position.from_dict(message["_position"]) == POSITION
    assert message["_txn"] == "0-1-42" and message["_snapshot"] is False


def test_csv_record_layout() -> None:
    schema = TableSchema(
        TABLE, (ID, col("note", "varchar"), col("price", "decimal")), ("id",), version=3
    )
    before = {"id": 7, "note": 'say "hi",\nok', "price": Decimal("1.50")}
    after = {"id": 7, "note": "\\N", "price": None}
    changes = [
        RowChange(TABLE, Op.UPDATE, before, after, (7,), POSITION, "0-1-42"),
        RowChange(TABLE, Op.READ, None, after, (7,), POSITION),
    ]
    data, records, decoded = round_trip(CsvCodec(), changes, schema)
    position = str(POSITION)
    assert data.decode() == (
        f'"U","all_types","shop","{position}","0-1-42","before",7,"say ""hi"",\nok",1.50\n'
        f'"U","all_types","shop","{position}","0-1-42","after",7,"\\N",\\N\n'
        f'"I","all_types","shop","{position}",\\N,"snapshot",7,"\\N",\\N\n'
    )
    assert len(records) == 2
    assert decoded[0].after == after and decoded[0].before == before
    assert decoded[1].op is Op.READ


def test_csv_field_splitting() -> None:
    assert split_record('"a","",\\N,"\\N",12,"x""y"', "f") == ["a", "", None, "\\N", "12", 'x"y']
    assert split_record("1", "f") == ["1"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('"U","t","shop","binlog.000001:4",\\N,"before",1\n', "ends the file"),
        ('"U","t","shop","binlog.000001:4",\\N,"after",1\n', "without its before image"),
        ('"I","t","shop","binlog.000001:4",\\N,"after","1\n', "cut short"),
        ('"I","t","shop","binlog.000001:4",\\N,"after",1"x"\n', "quote inside"),
        ('"I","t","shop","nowhere",\\N,"after",1\n', "bad position"),
        ('"I","t"\n', "at least 7"),
    ],
)
def test_broken_csv_names_file_and_line(text: str, words: str) -> None:
    lines = ('"I","t","shop","binlog.000001:4",\\N,"after",1\n' + text).encode()
    with pytest.raises(FileFormatError, match=f"^f:2: .*{words}"):
        list(CsvCodec().records(lines.splitlines(keepends=True), "f"))


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (b"{not json\n", "not a JSON object"),
        (b'{"a":1}\n', "no '_position' field"),
        (b'{"_position":{"v":9}}\n', "bad _position"),
        (b'{"_position":{"v":1,"file":"binlog.000001","offset":4}}', "cut short"),
    ],
)
def test_broken_canal_json_names_file_and_line(line: bytes, words: str) -> None:
    with pytest.raises(FileFormatError, match=f"^f:1: .*{words}"):
        list(CanalJsonCodec().records([line], "f"))


@pytest.mark.parametrize("codec", CODECS, ids=IDS)
def test_row_of_another_table_in_a_folder_is_refused(codec: RowCodec) -> None:
    schema = TableSchema(TABLE, (ID,), ("id",))
    other = TableSchema(TableName("shop", "other"), (ID,), ("id",))
    change = RowChange(other.name, Op.CREATE, None, {"id": 1}, (1,), POSITION)
    data = codec.encoder(other)(change, 0)
    record = next(codec.records(data.splitlines(keepends=True), "f"))
    with pytest.raises(FileFormatError, match="in the folder of shop.all_types"):
        codec.decoder(schema)(record)


def test_ddl_message_round_trip() -> None:
    from cdc.model import DdlEvent, DdlKind

    ddl = DdlEvent(
        POSITION,
        "shop",
        (TableName("shop", "a"), TableName("shop", "b")),
        DdlKind.RENAME_TABLE,
        "RENAME TABLE a TO b",
    )
    data = encode_ddl(ddl, 5)
    message = json.loads(data)
    assert message["isDdl"] is True and message["type"] == "RENAME"
    assert message["sql"] == "RENAME TABLE a TO b" and message["data"] is None
    assert decode_ddl(data, "f") == ddl
    with pytest.raises(FileFormatError, match="not a canal-json DDL message"):
        decode_ddl(b'{"isDdl": false}', "f")
