"""The binlog field readers of cdc.binlog.rowdecode, on bytes built the way
the server writes them (MySQL's my_*_packed_to_binary and decimal2bin)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from cdc.binlog import rowdecode

_FRAC_BYTES = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3}


def time2_bytes(negative: bool, h: int, m: int, s: int, us: int, fsp: int) -> bytes:
    """my_time_packed_to_binary, with C's arithmetic shift and truncating %."""
    nr = ((h << 12 | m << 6 | s) << 24) + us
    nr = -nr if negative else nr
    intpart = nr >> 24
    frac = abs(nr) % (1 << 24) * (-1 if nr < 0 else 1)
    if fsp == 0:
        return (0x800000 + intpart).to_bytes(3, "big")
    if fsp in (1, 2):
        return (0x800000 + intpart).to_bytes(3, "big") + ((frac // 10000) & 0xFF).to_bytes(1, "big")
    if fsp in (3, 4):
        tail = (int(frac / 100) & 0xFFFF).to_bytes(2, "big")
        return (0x800000 + intpart).to_bytes(3, "big") + tail
    return (nr + 0x800000000000).to_bytes(6, "big")


@pytest.mark.parametrize("fsp", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize(
    ("negative", "h", "m", "s", "us"),
    [
        (False, 0, 0, 0, 0),
        (True, 838, 59, 59, 0),
        (False, 838, 59, 59, 0),
        (True, 0, 0, 1, 500000),
        (True, 0, 0, 0, 100000),
        (True, 1, 2, 3, 4000),
        (False, 100, 0, 0, 990000),
    ],
)
def test_time2(negative: bool, h: int, m: int, s: int, us: int, fsp: int) -> None:
    step = 10 ** (6 - fsp) if fsp % 2 == 0 else 10 ** (5 - fsp)
    us = us - us % step if fsp else 0
    data = b"\xee" + time2_bytes(negative, h, m, s, us, fsp) + b"\xee"
    value, pos = rowdecode._time2_reader(fsp)(data, 1)
    expected = ((h * 60 + m) * 60 + s) * 1_000_000 + us
    assert value == (-expected if negative else expected)
    assert pos == len(data) - 1 == 1 + 3 + _FRAC_BYTES[fsp]


def datetime2_bytes(parts: tuple[int, ...], fsp: int) -> bytes:
    y, mo, d, h, mi, s, us = parts
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    head = (((ymd << 17) | hms) + 0x8000000000).to_bytes(5, "big")
    nbytes = _FRAC_BYTES[fsp]
    scale = {0: 1, 1: 10000, 2: 10000, 3: 100, 4: 100, 5: 1, 6: 1}[fsp]
    return head + (us // scale).to_bytes(nbytes, "big") if nbytes else head


@pytest.mark.parametrize(
    ("parts", "fsp"),
    [
        ((0, 0, 0, 0, 0, 0, 0), 0),
        ((2024, 0, 15, 10, 11, 12, 0), 0),
        ((9999, 12, 31, 23, 59, 59, 999999), 6),
        ((1000, 1, 1, 0, 0, 0, 500000), 1),
        ((2024, 2, 31, 23, 59, 59, 999000), 3),
    ],
)
def test_datetime2(parts: tuple[int, ...], fsp: int) -> None:
    data = datetime2_bytes(parts, fsp)
    assert rowdecode._datetime2_reader(fsp)(data, 0) == (parts, len(data))


def test_timestamp2_and_date_and_year() -> None:
    data = (2147483647).to_bytes(4, "big") + (999999).to_bytes(3, "big")
    assert rowdecode._timestamp2_reader(6)(data, 0) == ((2147483647, 999999), 7)
    packed = (2024 << 9 | 5 << 5 | 0).to_bytes(3, "little")
    assert rowdecode._date_reader(packed, 0) == ((2024, 5, 0), 3)
    assert rowdecode._year_reader(b"\x00\xff", 0) == (0, 1)
    assert rowdecode._year_reader(b"\x00\xff", 1) == (2155, 2)


@pytest.mark.parametrize(
    ("hex_bytes", "precision", "scale", "expected"),
    [
        # The examples of MySQL's decimal2bin documentation.
        ("810DFB38D204D2", 14, 4, "1234567890.1234"),
        ("7EF204C72DFB2D", 14, 4, "-1234567890.1234"),
        ("8000", 4, 4, "0.0000"),
        ("8000", 4, 0, "0"),
    ],
)
def test_decimal(hex_bytes: str, precision: int, scale: int, expected: str) -> None:
    data = bytes.fromhex(hex_bytes)
    value, pos = rowdecode._decimal_reader(precision, scale)(data, 0)
    assert pos == len(data)
    assert str(value) == expected
    assert value == Decimal(expected)


def test_bit_and_unsigned_readers() -> None:
    assert rowdecode._bit_reader(12)(b"\x0f\xff", 0) == (4095, 2)
    assert rowdecode._bit_reader(64)(b"\xff" * 8, 0) == (2**64 - 1, 8)
    assert rowdecode._uint_reader(8)((1 << 63 | 1).to_bytes(8, "little"), 0) == (1 << 63 | 1, 8)
    assert rowdecode._int24_reader(signed=True)(b"\x00\x00\x80", 0) == (-8388608, 3)
    assert rowdecode._int24_reader(signed=False)(b"\xff\xff\xff", 0) == (16777215, 3)


def test_length_prefixed_text_and_bytes() -> None:
    short = rowdecode._length_prefixed(1, "utf-8")
    assert short(b"\x04" + "😀".encode(), 0) == ("😀", 5)
    long_ = rowdecode._length_prefixed(2, "cdc_mysql_latin1")
    assert long_(b"\x02\x00\x81\xe9", 0) == ("\x81é", 4)
    raw = rowdecode._length_prefixed(3, None)
    assert raw(b"\x01\x00\x00\x00", 0) == (b"\x00", 4)


def table_map_body(optional: bytes) -> bytes:
    """A table map body after the table id: `db`.`t` with one INT NOT NULL."""
    return (
        b"\x00\x00"
        + b"\x02db\x00"
        + b"\x01t\x00"
        + b"\x01"
        + b"\x03"
        + b"\x00"
        + b"\x00"
        + optional
    )


def test_table_map_without_full_metadata_is_refused() -> None:
    with pytest.raises(rowdecode.BinlogDecodeError, match="binlog_row_metadata=FULL"):
        rowdecode._table_from_body(table_map_body(b""), "mariadb")


def test_table_map_with_names() -> None:
    signedness = b"\x01\x01\x80"  # the only numeric column is unsigned
    names = b"\x04\x03\x02id"
    primary_key = b"\x08\x01\x00"
    table = rowdecode._table_from_body(table_map_body(signedness + names + primary_key), "mariadb")
    assert (table.schema, table.table, table.primary_key) == ("db", "t", ("id",))
    (column,) = table.columns
    assert (column.name, column.column_type, column.nullable) == ("id", "int unsigned", False)
    assert table.read_image(b"\x00" + (4294967295).to_bytes(4, "little"), 0) == ((4294967295,), 5)
    assert table.read_image(b"\x01", 0) == ((None,), 1)


def test_truncated_table_map_is_an_error() -> None:
    with pytest.raises(rowdecode.BinlogDecodeError, match="truncated"):
        rowdecode._table_from_body(table_map_body(b"")[:9], "mariadb")
