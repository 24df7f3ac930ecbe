"""Every type family, written on the source, read back through the binlog
(cdc.binlog.rowdecode) and through a snapshot SELECT (cdc.typeconv settings):
both give the same, literally expected Python values, and a sink writing
them with ``to_sql_param`` reproduces the rows byte for byte.

Each case runs under two process time zones and two writer session time
zones, proving TIMESTAMP values do not depend on either.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc import typeconv
from cdc.binlog.rowdecode import RowChange, RowDecoder
from cdc.model.schema import Column
from cdc.typeconv import RawDate, RawDateTime

pytestmark = pytest.mark.integration

NULL_ROW = object()


@dataclass(frozen=True)
class Family:
    """One table: its columns, the SQL mode its rows are written under, and
    rows as (parameters for INSERT, expected canonical values)."""

    name: str
    ddl: str
    rows: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]
    sql_mode: str = "STRICT_ALL_TABLES"
    insert_columns: str | None = None


def us(*, h: int = 0, m: int = 0, s: int = 0, micro: int = 0, negative: bool = False) -> timedelta:
    value = timedelta(hours=h, minutes=m, seconds=s, microseconds=micro)
    return -value if negative else value


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


FAMILIES = (
    Family(
        "ints",
        "ti tinyint, tiu tinyint unsigned, si smallint, siu smallint unsigned, mi mediumint, "
        "miu mediumint unsigned, i int, iu int unsigned, bi bigint, biu bigint unsigned",
        (
            (
                (-128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -(2**63), 0),
                (-128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0),
            ),
            (
                (
                    127,
                    255,
                    32767,
                    65535,
                    8388607,
                    16777215,
                    2147483647,
                    4294967295,
                    2**63 - 1,
                    2**64 - 1,
                ),
                (
                    127,
                    255,
                    32767,
                    65535,
                    8388607,
                    16777215,
                    2147483647,
                    4294967295,
                    9223372036854775807,
                    18446744073709551615,
                ),
            ),
            ((-1, 1, -1, 1, -1, 1, -1, 1, -1, 1), (-1, 1, -1, 1, -1, 1, -1, 1, -1, 1)),
        ),
    ),
    Family(
        "decimals",
        "d1 decimal(10,2), d2 decimal(5,0), d3 decimal(65,30), d4 decimal(4,4), "
        "du decimal(12,3) unsigned",
        (
            (
                ("-12.50", "-99999", "-" + "9" * 35 + "." + "9" * 30, "-0.9999", "123456789.123"),
                (
                    Decimal("-12.50"),
                    Decimal("-99999"),
                    Decimal("-99999999999999999999999999999999999.999999999999999999999999999999"),
                    Decimal("-0.9999"),
                    Decimal("123456789.123"),
                ),
            ),
            (
                ("0", "0", "0.000000000000000000000000000001", "0.0001", "0"),
                (
                    Decimal("0.00"),
                    Decimal("0"),
                    Decimal("0.000000000000000000000000000001"),
                    Decimal("0.0001"),
                    Decimal("0.000"),
                ),
            ),
            (
                ("99999999.99", "12345", "1", "0.5", "999999999.999"),
                (
                    Decimal("99999999.99"),
                    Decimal("12345"),
                    Decimal("1.000000000000000000000000000000"),
                    Decimal("0.5000"),
                    Decimal("999999999.999"),
                ),
            ),
        ),
    ),
    Family(
        "floats",
        "f float, d double, fm float(10,3)",
        (
            ((0.1, 0.1, 1.5), (0.10000000149011612, 0.1, 1.5)),
            (
                (3.40282e38, 1.7976931348623157e308, -1.235),
                (3.402820018375656e38, 1.7976931348623157e308, -1.2350000143051147),
            ),
            ((1.17549435e-38, 5e-324, 0.0), (1.1754943508222875e-38, 5e-324, 0.0)),
            ((123456.789, 123456.789, 1234.5), (123456.7890625, 123456.789, 1234.5)),
            ((16777217, 1 / 3, -0.001), (16777216.0, 0.3333333333333333, -0.0010000000474974513)),
        ),
    ),
    Family(
        "dates",
        "d date, dt datetime, dt1 datetime(1), dt3 datetime(3), dt6 datetime(6)",
        (
            (
                ("0000-00-00", "0000-00-00 00:00:00", "0000-00-00", "0000-00-00", "0000-00-00"),
                (
                    RawDate(0, 0, 0),
                    RawDateTime(0, 0, 0),
                    RawDateTime(0, 0, 0),
                    RawDateTime(0, 0, 0),
                    RawDateTime(0, 0, 0),
                ),
            ),
            (
                (
                    "2024-00-15",
                    "2024-05-00 10:11:12",
                    "0000-01-01 00:00:00.5",
                    "2024-02-31 23:59:59.999",
                    "9999-12-31 23:59:59.999999",
                ),
                (
                    RawDate(2024, 0, 15),
                    RawDateTime(2024, 5, 0, 10, 11, 12),
                    RawDateTime(0, 1, 1, 0, 0, 0, 500000),
                    RawDateTime(2024, 2, 31, 23, 59, 59, 999000),
                    datetime(9999, 12, 31, 23, 59, 59, 999999),
                ),
            ),
            (
                (
                    "1000-01-01",
                    "1000-01-01 00:00:00",
                    "2024-02-29 12:00:00.1",
                    "1970-01-01 00:00:00.001",
                    "2038-01-19 03:14:08.000001",
                ),
                (
                    date(1000, 1, 1),
                    datetime(1000, 1, 1),
                    datetime(2024, 2, 29, 12, 0, 0, 100000),
                    datetime(1970, 1, 1, 0, 0, 0, 1000),
                    datetime(2038, 1, 19, 3, 14, 8, 1),
                ),
            ),
            (
                ("0001-01-01", "0999-12-31 23:59:59", "2024-12-00", "2024-00-00", "0000-00-01"),
                (
                    date(1, 1, 1),
                    datetime(999, 12, 31, 23, 59, 59),
                    RawDateTime(2024, 12, 0),
                    RawDateTime(2024, 0, 0),
                    RawDateTime(0, 0, 1),
                ),
            ),
        ),
        sql_mode="ALLOW_INVALID_DATES",
    ),
    Family(
        "times",
        "t time, t1 time(1), t3 time(3), t6 time(6)",
        (
            (
                ("-838:59:59", "-00:00:01.5", "-01:02:03.004", "-00:00:00.000001"),
                (
                    us(h=838, m=59, s=59, negative=True),
                    us(s=1, micro=500000, negative=True),
                    us(h=1, m=2, s=3, micro=4000, negative=True),
                    us(micro=1, negative=True),
                ),
            ),
            (
                ("838:59:59", "100:00:00.1", "24:00:00.001", "838:59:59.999999"),
                (
                    us(h=838, m=59, s=59),
                    us(h=100, micro=100000),
                    us(h=24, micro=1000),
                    us(h=838, m=59, s=59, micro=999999),
                ),
            ),
            (
                ("00:00:00", "-00:00:00.9", "-838:59:59.999", "00:00:00"),
                (
                    us(),
                    us(micro=900000, negative=True),
                    us(h=838, m=59, s=59, micro=999000, negative=True),
                    us(),
                ),
            ),
        ),
    ),
    Family(
        "timestamps",
        "ts timestamp null, ts3 timestamp(3) null, ts6 timestamp(6) null",
        (
            (
                (RawDateTime(0, 0, 0), RawDateTime(0, 0, 0), RawDateTime(0, 0, 0)),
                (RawDateTime(0, 0, 0), RawDateTime(0, 0, 0), RawDateTime(0, 0, 0)),
            ),
            (
                (
                    utc(1970, 1, 1, 0, 0, 1),
                    utc(2000, 2, 29, 12, 34, 56, 789000),
                    utc(2038, 1, 19, 3, 14, 7, 999999),
                ),
                (
                    utc(1970, 1, 1, 0, 0, 1),
                    utc(2000, 2, 29, 12, 34, 56, 789000),
                    utc(2038, 1, 19, 3, 14, 7, 999999),
                ),
            ),
            (
                (
                    utc(2024, 3, 10, 10, 30),
                    utc(2024, 11, 3, 8, 30, 0, 1000),
                    utc(2024, 3, 31, 1, 30, 0, 1),
                ),
                (
                    utc(2024, 3, 10, 10, 30),
                    utc(2024, 11, 3, 8, 30, 0, 1000),
                    utc(2024, 3, 31, 1, 30, 0, 1),
                ),
            ),
        ),
    ),
    Family(
        "years",
        "y year, y2 year",
        (((0, 1901), (0, 1901)), ((2155, 2000), (2155, 2000))),
    ),
    Family(
        "strings",
        "c char(10), v varchar(300), tt tinytext, tx text, lt longtext, "
        "cl char(10) charset latin1, vl varchar(20) charset latin1, tl text charset latin1",
        (
            (
                ("😀a  ", "😀" * 300, "ü", "a\n\t'\"\\", "é" * 70000, "é€\x81", "ÿ ", "Œœ\x9d"),
                ("😀a", "😀" * 300, "ü", "a\n\t'\"\\", "é" * 70000, "é€\x81", "ÿ ", "Œœ\x9d"),
            ),
            (("",) * 8, ("",) * 8),
            (
                ("x" * 10, "v" * 256, "t" * 255, " ", "\x00", "a" * 10, "\x00z", "\x7f"),
                ("x" * 10, "v" * 256, "t" * 255, " ", "\x00", "a" * 10, "\x00z", "\x7f"),
            ),
        ),
    ),
    Family(
        "binaries",
        "b binary(4), vb varbinary(10), tb tinyblob, bl blob, mb mediumblob",
        (
            (
                (b"ab", b"a\x00", b"\x00", b"\xff" * 300, b"\x00\x01"),
                (b"ab\x00\x00", b"a\x00", b"\x00", b"\xff" * 300, b"\x00\x01"),
            ),
            ((b"\x00" * 4, b"", b"", b"", b""), (b"\x00" * 4, b"", b"", b"", b"")),
            (
                (b"", b"\x00" * 10, b"x" * 255, b"", b"\xc3"),
                (b"\x00" * 4, b"\x00" * 10, b"x" * 255, b"", b"\xc3"),
            ),
            ((b"a b ", b" ", b"\x00 ", b"\n", b"\\"), (b"a b ", b" ", b"\x00 ", b"\n", b"\\")),
        ),
    ),
    Family(
        "enums_sets",
        "e enum('a','b','😀'), el enum('x','é','ÿ') charset latin1, s set('a','b','c','d'), "
        "sl set('é','ü') charset latin1, s64 set(" + ",".join(f"'m{i}'" for i in range(64)) + ")",
        (
            (
                ("😀", "é", "a,c", "é,ü", "m0,m63"),
                ("😀", "é", frozenset({"a", "c"}), frozenset({"é", "ü"}), frozenset({"m0", "m63"})),
            ),
            (("a", "x", "", "", ""), ("a", "x", frozenset(), frozenset(), frozenset())),
            (
                ("", "", "d,a,a", "ü", "m5"),
                ("", "", frozenset({"a", "d"}), frozenset({"ü"}), frozenset({"m5"})),
            ),
        ),
        sql_mode="",
    ),
    Family(
        "bits",
        "b1 bit(1), b8 bit(8), b12 bit(12), b64 bit(64)",
        (
            ((1, 255, 4095, 2**64 - 1), (1, 255, 4095, 18446744073709551615)),
            ((0, 0, 0, 0), (0, 0, 0, 0)),
            ((1, 0x80, 5, 1 << 63), (1, 128, 5, 9223372036854775808)),
        ),
    ),
    Family(
        "json",
        "j json",
        (
            (('{"a":  [1, 2.5], "b": "😀"}',), ('{"a":  [1, 2.5], "b": "😀"}',)),
            (("[]",), ("[]",)),
            (('"x"',), ('"x"',)),
            (("null",), ("null",)),
            (('{"k": "é\\n"}',), ('{"k": "é\\n"}',)),
        ),
    ),
    Family(
        "generated",
        "a int, v int as (a * 2) virtual, st varchar(20) as (concat('x', a)) stored",
        (((5,), (5, 10, "x5")), ((-1,), (-1, -2, "x-1"))),
        insert_columns="a",
    ),
)


@pytest.fixture(
    params=[("Asia/Kolkata", "+05:30"), ("America/Los_Angeles", "-08:00")],
    ids=["ist", "pst"],
)
def zones(request: pytest.FixtureRequest, source_db: Any) -> Iterator[str]:
    """Run under another process TZ and another server time zone (the global
    default every new session starts with, restored afterwards; tests of one
    pytest process run one at a time); yield that zone for the writer."""
    process_zone, server_zone = request.param
    saved_tz = os.environ.get("TZ")
    os.environ["TZ"] = process_zone
    time.tzset()
    conn = source_db.connect()
    with conn.cursor() as cur:
        cur.execute("SELECT @@GLOBAL.time_zone")
        (saved_zone,) = cur.fetchone()
    try:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL time_zone = %s", (server_zone,))
        yield server_zone
    finally:
        with conn.cursor() as cur:
            cur.execute("SET GLOBAL time_zone = %s", (saved_zone,))
        conn.close()
        if saved_tz is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved_tz
        time.tzset()


def _offset(zone: str) -> timedelta:
    sign = -1 if zone.startswith("-") else 1
    hours, minutes = zone.lstrip("+-").split(":")
    return sign * timedelta(hours=int(hours), minutes=int(minutes))


def _writer_param(value: Any, zone: str) -> Any:
    """The literal a writer in session time zone ``zone`` uses for a value."""
    if isinstance(value, datetime) and value.tzinfo is not None:
        return (value + _offset(zone)).replace(tzinfo=None)
    if isinstance(value, RawDateTime | RawDate):
        return str(value)
    return value


def _fingerprint(value: Any) -> Any:
    """Type and exact value: Decimal scale, float bits, tzinfo all count."""
    if isinstance(value, Decimal):
        return ("Decimal", str(value))
    if isinstance(value, float):
        return ("float", value.hex())
    if isinstance(value, frozenset):
        return ("frozenset", tuple(sorted(value)))
    if isinstance(value, datetime):
        return ("datetime", value.isoformat())
    return (type(value).__name__, value)


def _fingerprints(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return [tuple(_fingerprint(v) for v in row) for row in rows]


_ELEMENT = re.compile(r"'((?:[^']|'')*)'")


def _schema_columns(conn: Any, database: str, table: str) -> tuple[Column, ...]:
    """Columns as information_schema describes them (the snapshot's view)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME, "
            "COLLATION_NAME, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, "
            "IS_GENERATED FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (database, table),
        )
        rows = cur.fetchall()
    columns = []
    for name, data_type, column_type, nullable, cs, coll, prec, scale, fsp, generated in rows:
        elements: tuple[str, ...] = ()
        if data_type in ("enum", "set"):
            elements = tuple(e.replace("''", "'") for e in _ELEMENT.findall(column_type))
        numeric = data_type == "decimal"
        columns.append(
            Column(
                name,
                data_type,
                column_type,
                nullable=nullable == "YES",
                unsigned="unsigned" in column_type,
                charset=cs,
                collation=coll,
                precision=int(prec) if numeric else None,
                scale=int(scale) if numeric else None,
                fsp=int(fsp) if fsp is not None else None,
                elements=elements,
                generated=generated == "ALWAYS",
            )
        )
    return tuple(columns)


def _master_position(conn: Any) -> tuple[str, int]:
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, position = cur.fetchone()[:2]
    return file, int(position)


def _read_binlog(
    source_db: Any, start: tuple[str, int], database: str
) -> tuple[dict[str, list[RowChange]], dict[str, tuple[Column, ...]]]:
    """Every row change of ``database`` from ``start`` to the binlog's end."""
    decoder = RowDecoder()
    changes: dict[str, list[RowChange]] = {}
    columns: dict[str, tuple[Column, ...]] = {}
    stream = BinLogStreamReader(
        connection_settings={
            "host": source_db.host,
            "port": source_db.port,
            "user": source_db.user,
            "password": source_db.password,
        },
        server_id=random.randint(1000, 2**31 - 1),
        log_file=start[0],
        log_pos=start[1],
        resume_stream=True,
        blocking=False,
        only_events=[TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[database],
    )
    try:
        for event in stream:
            if isinstance(event, TableMapEvent):
                table = decoder.table_map(event)
                columns[table.table] = table.columns
            else:
                changes.setdefault(event.table, []).extend(decoder.rows(event))
    finally:
        stream.close()
    return changes, columns


def _snapshot(source_db: Any, database: str, table: str, columns: Sequence[Column]) -> list[tuple]:
    conn = source_db.connect(database=database, **typeconv.snapshot_connect_kwargs())
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT {typeconv.select_list(columns)} FROM `{table}` ORDER BY id")
            convert = typeconv.row_converter(columns, "select")
            return [convert(row) for row in cur.fetchall()]
    finally:
        conn.close()


def _create_and_fill(conn: Any, family: Family, zone: str) -> list[tuple[Any, ...]]:
    """Create the family's table, write its rows plus an all-NULL row; return
    the expected canonical rows (id first)."""
    expected = []
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{family.name}` (id int PRIMARY KEY, {family.ddl})")
        cur.execute("SET SESSION time_zone = %s, SESSION sql_mode = %s", (zone, family.sql_mode))
        names = family.insert_columns or ", ".join(
            c.split()[0] for c in re.split(r",\s*(?![^()]*\))", family.ddl)
        )
        for i, (params, values) in enumerate(family.rows, start=1):
            marks = ", ".join(["%s"] * (len(params) + 1))
            cur.execute(
                f"INSERT INTO `{family.name}` (id, {names}) VALUES ({marks})",
                (i, *(_writer_param(p, zone) for p in params)),
            )
            expected.append((i, *values))
        null_id = len(family.rows) + 1
        cur.execute(f"INSERT INTO `{family.name}` (id) VALUES (%s)", (null_id,))
        expected.append((null_id, *([None] * len(family.rows[0][1]))))
    return expected


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_binlog_and_snapshot_agree(
    source_db: Any, source_database: str, zones: str, family: Family
) -> None:
    conn = source_db.connect(database=source_database)
    try:
        start = _master_position(conn)
        expected = _create_and_fill(conn, family, zones)
        schema_columns = _schema_columns(conn, source_database, family.name)
    finally:
        conn.close()

    changes, binlog_columns = _read_binlog(source_db, start, source_database)
    inserted = [after for before, after in changes[family.name]]
    assert all(before is None for before, after in changes[family.name])
    assert _fingerprints(inserted) == _fingerprints(expected)

    snapshot = _snapshot(source_db, source_database, family.name, schema_columns)
    assert _fingerprints(snapshot) == _fingerprints(expected)

    # MariaDB's information_schema (utf8mb3) shows 4-byte characters of ENUM/SET
    # labels as '?'; the binlog's table map carries them intact.
    assert [_semantics(c, astral="?") for c in binlog_columns[family.name]] == [
        _semantics(c) for c in schema_columns
    ]


_ASTRAL = re.compile("[\U00010000-\U0010ffff]")


def _semantics(c: Column, astral: str | None = None) -> tuple[Any, ...]:
    """What the binlog's metadata and information_schema must agree on
    (binlog types carry no display widths, no generated flag, and call the
    charset of binary columns 'binary' where information_schema says NULL)."""
    charset = None if c.charset == "binary" else c.charset
    collation = None if c.collation == "binary" else c.collation
    decimal = c.data_type == "decimal"
    return (
        c.name,
        c.data_type,
        c.unsigned,
        c.nullable,
        charset,
        collation,
        tuple(_ASTRAL.sub(astral, e) for e in c.elements) if astral else c.elements,
        c.fsp or 0,
        (c.precision, c.scale) if decimal else None,
    )


@pytest.mark.parametrize("family", FAMILIES, ids=[f.name for f in FAMILIES])
def test_sink_writes_canonical_values_back_exactly(
    source_db: Any, source_database: str, zones: str, family: Family
) -> None:
    conn = source_db.connect(database=source_database)
    try:
        expected = _create_and_fill(conn, family, zones)
        columns = _schema_columns(conn, source_database, family.name)
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{family.name}_copy` LIKE `{family.name}`")
    finally:
        conn.close()

    writable = [(i, c) for i, c in enumerate(columns) if c in typeconv.writable_columns(columns)]
    params = [typeconv.sql_param_converter(c) for _, c in writable]
    names = ", ".join(f"`{c.name}`" for _, c in writable)
    marks = ", ".join(["%s"] * len(writable))
    sink = source_db.connect(database=source_database, **typeconv.sink_connect_kwargs())
    try:
        with sink.cursor() as cur:
            for row in expected:
                values = [convert(row[i]) for (i, _), convert in zip(writable, params, strict=True)]
                cur.execute(f"INSERT INTO `{family.name}_copy` ({names}) VALUES ({marks})", values)
            same = " AND ".join(
                f"a.`{c.name}` <=> b.`{c.name}` AND "
                f"CAST(a.`{c.name}` AS BINARY) <=> CAST(b.`{c.name}` AS BINARY)"
                for c in columns
            )
            cur.execute(
                f"SELECT COUNT(*) FROM `{family.name}` a JOIN `{family.name}_copy` b "
                f"ON a.id = b.id WHERE {same}"
            )
            (matching,) = cur.fetchone()
    finally:
        sink.close()
    assert matching == len(expected)
    copy = _snapshot(source_db, source_database, f"{family.name}_copy", columns)
    assert _fingerprints(copy) == _fingerprints(expected)


def test_update_and_delete_images(source_db: Any, source_database: str) -> None:
    conn = source_db.connect(database=source_database)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SET SESSION sql_mode = 'ALLOW_INVALID_DATES', SESSION time_zone = '+00:00'"
            )
            cur.execute(
                "CREATE TABLE t (id int PRIMARY KEY, d date, ts timestamp(6) NULL, s set('a','b'))"
            )
            start = _master_position(conn)
            cur.execute("INSERT INTO t VALUES (1, '0000-00-00', '2001-02-03 04:05:06.7', '')")
            cur.execute("UPDATE t SET d = '2024-00-01', s = 'b,a' WHERE id = 1")
            cur.execute("DELETE FROM t WHERE id = 1")
    finally:
        conn.close()
    changes, columns = _read_binlog(source_db, start, source_database)
    first = (1, RawDate(0, 0, 0), utc(2001, 2, 3, 4, 5, 6, 700000), frozenset())
    second = (1, RawDate(2024, 0, 1), utc(2001, 2, 3, 4, 5, 6, 700000), frozenset({"a", "b"}))
    assert changes["t"] == [(None, first), (first, second), (second, None)]
    assert [c.name for c in columns["t"]] == ["id", "d", "ts", "s"]


def test_row_before_its_table_map_is_a_clear_error(source_db: Any, source_database: str) -> None:
    conn = source_db.connect(database=source_database)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id int PRIMARY KEY)")
            start = _master_position(conn)
            cur.execute("INSERT INTO t VALUES (1)")
    finally:
        conn.close()
    stream = BinLogStreamReader(
        connection_settings={
            "host": source_db.host,
            "port": source_db.port,
            "user": source_db.user,
            "password": source_db.password,
        },
        server_id=random.randint(1000, 2**31 - 1),
        log_file=start[0],
        log_pos=start[1],
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent],
        only_schemas=[source_database],
    )
    try:
        events = list(stream)
    finally:
        stream.close()
    assert len(events) == 1
    with pytest.raises(ValueError, match="include TableMapEvent in only_events"):
        RowDecoder().rows(events[0])
