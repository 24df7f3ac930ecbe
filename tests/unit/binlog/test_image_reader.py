"""The compiled row-image reader (cdc/binlog/imagereader.py) reads what the column-by-column
reader reads, on images built the way the server writes them: every layout, runs of
fixed-width columns, columns it calls out to, NULL bitmaps of one and of two bytes."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from cdc.binlog import rowdecode
from cdc.binlog.imagereader import Layout, compile_image_reader

#: (layout, the column's reader, a value's bytes in an image, the value)
Kind = tuple[Layout | None, Any, Any]

FORMATS = "bBhHiIqQfd"


def prefixed(prefix: int, raw: bytes) -> bytes:
    return len(raw).to_bytes(prefix, "little") + raw


def kinds(rng: random.Random) -> list[tuple[Layout | None, Any, bytes, Any]]:
    """Every kind of column, each with a value drawn from ``rng``."""
    out: list[tuple[Layout | None, Any, bytes, Any]] = []
    for fmt in FORMATS:
        value: Any = rng.choice([0, 1, 7, 100]) if fmt in "fd" else rng.randrange(0, 100)
        raw = struct.pack("<" + fmt, value)
        out.append((Layout(fmt=fmt), rowdecode._struct_reader("<" + fmt), raw, value))
    for prefix in (1, 2, 3, 4):
        text = "é" * rng.randrange(0, 90)
        out.append(
            (
                Layout(prefix=prefix, codec="utf-8"),
                rowdecode._length_prefixed(prefix, "utf-8"),
                prefixed(prefix, text.encode()),
                text,
            )
        )
        blob = bytes(
            rng.randrange(256) for _ in range(rng.randrange(0, 250 if prefix == 1 else 300))
        )
        out.append(
            (
                Layout(prefix=prefix),
                rowdecode._length_prefixed(prefix, None),
                prefixed(prefix, blob),
                blob,
            )
        )
    out.append(
        (None, rowdecode._int24_reader(signed=True), (-5).to_bytes(3, "little", signed=True), -5)
    )
    return out


def image(columns: list[tuple[Layout | None, Any, bytes, Any]], nulls: set[int]) -> bytes:
    """A row image; the bitmap's bits past the last column set, as the server sets them."""
    width = (len(columns) + 7) >> 3
    unused = sum(1 << i for i in range(len(columns), width * 8))
    bitmap = (sum(1 << i for i in nulls) | unused).to_bytes(width, "little")
    return bitmap + b"".join(raw for i, (_, _, raw, _) in enumerate(columns) if i not in nulls)


@pytest.mark.parametrize("seed", range(40))
def test_the_compiled_reader_reads_what_the_column_reader_reads(seed: int) -> None:
    rng = random.Random(seed)
    every = kinds(rng)
    columns = [rng.choice(every) for _ in range(rng.randrange(1, 20))]
    readers = tuple(reader for _, reader, _, _ in columns)
    table = rowdecode.BinlogTable("db", "t", (), (), readers)
    slow_calls = []

    def slow(data: bytes, pos: int) -> tuple[tuple[Any, ...], int]:
        slow_calls.append(pos)
        return table.read_image(data, pos)

    compiled = compile_image_reader([layout for layout, _, _, _ in columns], readers, slow)
    nulls = {i for i in range(len(columns)) if rng.random() < 0.15} if seed % 2 else set()
    rows = [image(columns, nulls) for _ in range(3)]
    data = b"\xee" + b"".join(rows) + b"\xee"
    pos, read = 1, []
    while pos < len(data) - 1:
        values, pos = compiled(data, pos)
        read.append(values)
    assert pos == len(data) - 1
    expected = tuple(None if i in nulls else value for i, (_, _, _, value) in enumerate(columns))
    assert read == [expected] * 3
    assert len(slow_calls) == (3 if nulls else 0)  # only a row with a NULL goes the slow way
    assert table.read_image(data, 1) == compiled(data, 1)


def test_a_truncated_image_is_an_error_or_overruns() -> None:
    """decode_rows turns these errors into a BinlogDecodeError, and a short slice into its
    overrun check, as with the column reader."""
    readers = (rowdecode._struct_reader("<i"), rowdecode._length_prefixed(2, "utf-8"))
    table = rowdecode.BinlogTable("db", "t", (), (), readers)
    compiled = compile_image_reader(
        [Layout(fmt="i"), Layout(prefix=2, codec="utf-8")], readers, table.read_image
    )
    whole = b"\x00" + struct.pack("<i", 3) + prefixed(2, b"abc")
    assert compiled(whole, 0) == ((3, "abc"), len(whole))
    with pytest.raises(struct.error):
        compiled(whole[:3], 0)
    with pytest.raises(IndexError):
        compiled(whole[:6], 0)
    values, end = compiled(whole[:-1], 0)
    assert end > len(whole) - 1  # past the data: the caller's overrun check refuses it


def test_layouts_must_match_the_columns() -> None:
    with pytest.raises(ValueError, match="2 layouts for 1 columns"):
        compile_image_reader([None, None], [rowdecode._year_reader], lambda d, p: ((), p))
