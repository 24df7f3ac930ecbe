"""A table's row-image reader, compiled once per table map.

Every row of the binlog goes through a table's image reader, in the reader's one
thread. Read column by column, each value cost a call to its reader and a
``(value, position)`` tuple; in a 1M-row catch-up that was about a sixth of the
capture's interpreter time (py-spy, docs/data-path.md). The compiled reader reads
a row without NULLs in one function: consecutive fixed-width columns (integers,
FLOAT, DOUBLE) with one ``struct`` unpack, length-prefixed strings by slicing in
place, and any other column through its own reader. A row with a NULL goes to
the column-by-column reader (``slow``), which knows the NULL bitmap.

The source text holds only numbers and fixed names: formats, codecs and readers
reach it through the namespace it runs in, never as text.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ImageReader", "Layout", "compile_image_reader"]

ImageReader = Callable[[bytes, int], tuple[tuple[Any, ...], int]]


@dataclass(frozen=True)
class Layout:
    """How a column's value lies in a row image when it needs no conversion: a
    ``struct`` format character (``fmt``), or a little-endian length of ``prefix``
    bytes before the bytes themselves, text in ``codec`` unless it is None."""

    fmt: str = ""
    prefix: int = 0
    codec: str | None = None


def compile_image_reader(
    layouts: Sequence[Layout | None],
    readers: Sequence[Callable[[bytes, int], tuple[Any, int]]],
    slow: ImageReader,
) -> ImageReader:
    """The reader of a row image of ``len(readers)`` columns: ``layouts[i]`` for column
    i where it is plain (None: call ``readers[i]``), ``slow`` for a row with a NULL.
    Returns ``(values, position after the image)``, as ``slow`` does."""
    count = len(readers)
    if len(layouts) != count or count == 0:
        raise ValueError(f"{len(layouts)} layouts for {count} columns")
    width = (count + 7) >> 3
    # the server sets the bitmap's bits past the last column: only the columns' count
    used = (1 << count) - 1
    space: dict[str, Any] = {"slow": slow}
    body = [
        "def read_image(data, pos):",
        f"    if data[pos] & {used}:"
        if width == 1
        else f"    if int.from_bytes(data[pos:pos + {width}], 'little') & {used}:",
        "        return slow(data, pos)",
        f"    pos += {width}",
    ]
    i = 0
    while i < count:
        layout = layouts[i]
        if layout is not None and layout.fmt:
            end, fmt = i, "<"
            while end < count and (run := layouts[end]) is not None and run.fmt:
                fmt += run.fmt
                end += 1
            packed = struct.Struct(fmt)
            space[f"s{i}"] = packed.unpack_from
            body.append("    " + "".join(f"v{k}, " for k in range(i, end)) + f"= s{i}(data, pos)")
            body.append(f"    pos += {packed.size}")
            i = end
            continue
        if layout is None:
            space[f"r{i}"] = readers[i]
            body.append(f"    v{i}, pos = r{i}(data, pos)")
        else:
            body.append(f"    end = pos + {layout.prefix} + {_length(layout.prefix)}")
            value = f"data[pos + {layout.prefix}:end]"
            if layout.codec is not None:
                space[f"c{i}"] = layout.codec
                value += f".decode(c{i})"
            body.append(f"    v{i} = {value}")
            body.append("    pos = end")
        i += 1
    body.append("    return (" + "".join(f"v{k}, " for k in range(count)) + "), pos")
    exec("\n".join(body), space)  # numbers and fixed names only (see the docstring)
    reader: ImageReader = space["read_image"]
    return reader


def _length(prefix: int) -> str:
    """The expression of a little-endian length of ``prefix`` bytes at ``pos``."""
    if prefix == 1:
        return "data[pos]"
    if prefix == 2:
        return "(data[pos] | data[pos + 1] << 8)"
    if prefix in (3, 4):
        return f"int.from_bytes(data[pos:pos + {prefix}], 'little')"
    raise ValueError(f"a length prefix of {prefix} bytes")
