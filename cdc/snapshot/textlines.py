"""A chunk's rows as the lines of a ``LOAD DATA`` file, made by the source server itself.

The lean copy path (issue #16). Profiling a chunk's copy (``bench/chunk_profile.py``,
docs/benchmarks.md) showed the Python side spending three quarters of its time in
PyMySQL turning each row packet into Python values and a quarter turning those values
back into text for ``LOAD DATA``. Where nothing needs converting, neither is needed:

    SELECT CONCAT_WS('\\t', <each writable column, escaped>) FROM t WHERE <chunk range>
        │  one text line per row: the server's own text of each value (the session is
        │  UTC, as the sink's), text columns converted to utf8mb4, backslash, tab and
        │  newline escaped, NULL as \\N: exactly the file ``loadfile.TableLoad`` reads
        ▼
    read_lines: the result set's row packets read straight off the connection, each
        row's line appended to a block; every ``block_bytes`` the block goes to the
        caller (one LOAD DATA each), so a chunk is never held whole, whatever its size

Why the rows are read by hand: PyMySQL's unbuffered cursor costs about 10 µs a row in
Python (a packet object, a length-coded read and a decode per column, a tuple); a row
that is one length-coded string needs a few slices. The reader below handles exactly
the result rows of a text-protocol query (after PyMySQL has read the column
definitions) and hands the end-of-rows and error packets back to PyMySQL, so the
connection is left as PyMySQL expects it. Written here because no maintained
pure-Python client streams raw rows (mysqlclient's C extension would, at the cost of a
compiler and the client library's headers on every capture and Spark worker).

One value per chunk (:func:`read_chunk_text`). Even so, the loop above costs Python
time on every row. A chunk whose lines fit in ``GROUPED_BYTES`` comes instead as one
value the server concatenates, ``SELECT COUNT(*), GROUP_CONCAT(<line> SEPARATOR
'\\n')``, loaded as one LOAD DATA (``bench/chunk_profile.py --rows 300000``: 1.07 s of
the copying process's CPU row by row, 0.57 s one value per chunk, the rest of it the
load's). GROUP_CONCAT cuts its value at ``group_concat_max_len`` and skips NULL lines
without an error, so the value is taken only when its line count is the row count and
it is shorter than the limit by more than a character's bytes; otherwise the chunk's
lines are read as above, in the same transaction (the same rows), and later chunks of
that table in this process go straight there.

Bare lines (:func:`bare_reason`). Escaping costs the source a test of every text value
(above); lines that need no escapes cost it nothing of the kind. A table whose columns
are all NOT NULL and none binary comes as bare lines: ``CONCAT_WS(0x1F, <each column,
as its bytes in utf8mb4>)`` grouped with ``SEPARATOR 0x1E``, loaded with ``FIELDS
TERMINATED BY 0x1F ESCAPED BY '' LINES TERMINATED BY 0x1E`` (:data:`BARE_FORMAT`). The
two marks are control characters (ASCII's unit and record separators) that text almost
never holds, and numbers and times never do, but text may: the value is taken as bare
lines only when it holds exactly ``rows - 1`` record marks and ``rows x (columns - 1)``
unit marks, i.e. no value holds either (a value only adds marks). Otherwise the chunk is
read again as escaped lines, in the same transaction, and later chunks of that table in
this process are read so at once. NULL has no bare form (``\\N`` is an escape), nor do
bytes that are not text, hence the two conditions. ``bench/chunk_profile.py --rows
300000``, ``--path lean`` (bare) against ``lean-escaped``, alternated twice: the source's
server spent 12.9 and 10.8 ms of CPU a chunk against 18.9 and 17.1; the downstream's
load cost the same (2.1 s either way).

Which tables: :func:`not_lean` says why one cannot take this path (a value whose
server text is not what the canonical path writes: FLOAT and DOUBLE (the server's
text may round), ENUM (the invalid value '' must be named, ``strict.py``), spatial
types; a chunk key other than the table's first key column, whose binlog changes
could not be confined to the chunk by key); those keep the values path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pymysql.cursors
from pymysql.constants import CR
from pymysql.protocol import MysqlPacket

from cdc.model.schema import Column, TableSchema
from cdc.snapshot.chunk import SnapshotChunk
from cdc.typeconv import (
    BLOB_TYPES,
    DECIMAL_TYPES,
    INTEGER_TYPES,
    SPATIAL_TYPES,
    TEXT_TYPES,
    writable_columns,
)

__all__ = [
    "BARE_FORMAT",
    "BLOCK_BYTES",
    "GROUPED_BYTES",
    "LineOverflow",
    "OnBlock",
    "bare_reason",
    "grouped_whole",
    "line_select",
    "not_lean",
    "read_chunk_text",
    "read_lines",
]

#: Bytes of lines per block handed to the caller (one LOAD DATA each).
BLOCK_BYTES = 4 << 20
#: The most bytes of lines a chunk may have to come as one GROUP_CONCAT value.
GROUPED_BYTES = 4 << 20
#: utf8mb4's longest character: GROUP_CONCAT cuts its value on a character boundary.
_CHAR_BYTES = 4
#: Bare lines: the mark between two fields and the one between two lines.
_UNIT = b"\x1f"
_RECORD = b"\x1e"
#: How ``LOAD DATA`` reads bare lines (the words after the table's name and character set).
BARE_FORMAT = "FIELDS TERMINATED BY x'1F' ESCAPED BY '' LINES TERMINATED BY x'1E'"
#: Takes a block of lines: its bytes, its row count and whether the lines are bare.
OnBlock = Callable[[bytes, int, bool], None]
#: Bytes of a result row's packet besides its grouped value.
_PACKET_ROOM = 1024
_MAX_PACKET = 0xFFFFFF

_ESCAPED_TEXT = TEXT_TYPES | {"set", "json"}
_ESCAPED_BYTES = (BLOB_TYPES - set(SPATIAL_TYPES)) | {"binary"}
_AS_IS = INTEGER_TYPES | DECIMAL_TYPES | {"year", "date", "datetime", "timestamp", "time"}
_LEAN_TYPES = _ESCAPED_TEXT | _ESCAPED_BYTES | _AS_IS | {"bit"}
#: In SQL: backslash, tab and newline escaped with a backslash, as LOAD DATA reads them.
_ESCAPE = "REPLACE(REPLACE(REPLACE({}, '\\\\', '\\\\\\\\'), '\\t', '\\\\t'), '\\n', '\\\\n')"
#: The same, only for a value holding one of them: text rarely does, and a REGEXP test
#: costs the source less than three REPLACEs that find nothing (``bench/chunk_profile.py``
#: ``--path lean`` against ``lean-escape-all``: about 21 against 25 ms of the source's CPU a
#: sysbench chunk). The pattern names tab and newline by PCRE's escapes, not as the
#: characters, which a server's ``default_regex_flags`` (EXTENDED_MORE) could make it ignore.
_ESCAPE_IF_NEEDED = r"IF({0} REGEXP '[\\\\\\t\\n]', " + _ESCAPE.format("{0}") + ", {0})"


class LineOverflow(RuntimeError):
    """A row's line came back NULL: longer than the source's ``max_allowed_packet``.
    The chunk is read the values way instead."""


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def not_lean(schema: TableSchema, chunk: SnapshotChunk) -> str | None:
    """Why ``chunk`` of ``schema``'s table cannot take the text-line path; None if it can."""
    keys = schema.key_columns
    if not keys or chunk.key_column != keys[0]:
        return f"chunk key {chunk.key_column!r} is not the first column of the table's key"
    for column in writable_columns(schema.columns):
        kind = column.data_type
        if kind not in _LEAN_TYPES:
            return f"column {column.name!r} is {column.column_type}"
    return None


def bare_reason(schema: TableSchema) -> str | None:
    """Why a lean table's chunks cannot come as bare lines (see the module doc); None if
    they can (when no value holds a mark)."""
    for column in writable_columns(schema.columns):
        if column.nullable:
            return f"column {column.name!r} is nullable"
        if column.data_type in _ESCAPED_BYTES:
            return f"column {column.name!r} is {column.column_type}"
    return None


def _bare_expression(column: Column) -> str:
    """A column's field of a bare line, as bytes: text in utf8mb4, other values as text."""
    name = _quote(column.name)
    kind = column.data_type
    if kind in _ESCAPED_TEXT:
        text = name if column.charset == "utf8mb4" else f"CONVERT({name} USING utf8mb4)"
        # bytes: CONCAT_WS of text would check every value against the marks' charset
        return f"CAST({text} AS BINARY)"
    if kind == "bit":
        return f"CAST({name} AS UNSIGNED)"
    return name


def _bare_select(schema: TableSchema, chunk: SnapshotChunk) -> tuple[str, tuple[Any, ...]]:
    """``_grouped_select`` of bare lines."""
    fields = ", ".join(_bare_expression(c) for c in writable_columns(schema.columns))
    where, params = chunk.where_clause()
    lines = f"GROUP_CONCAT(CONCAT_WS(x'1F', {fields}) SEPARATOR x'1E')"
    value = f"CAST({lines} AS BINARY)".replace("%", "%%")  # bytes, whatever the columns
    rest = f" FROM {schema.name.quoted()} WHERE ".replace("%", "%%") + where
    return f"SELECT COUNT(*), {value}, @@SESSION.group_concat_max_len{rest}", params


def _expression(column: Column, with_bytes: bool) -> str:
    """A column's field of the line; ``with_bytes``: the line also holds binary values."""
    name = _quote(column.name)
    kind = column.data_type
    if kind in _ESCAPED_TEXT:
        if column.charset == "utf8mb4":
            # the file is utf8mb4; a utf8mb4 column's text is that already (CONVERT would
            # copy each value: 4 of a sysbench chunk's 31 ms on the source)
            value = _ESCAPE_IF_NEEDED.format(name)
        else:
            # converted once, escaped whether it needs it or not (testing the converted
            # text first would convert it twice)
            value = _ESCAPE.format(f"CONVERT({name} USING utf8mb4)")
        if with_bytes:
            # Binary values must reach the line as they are, so CONCAT_WS must give a
            # binary string. It does when one argument is binary, unless two text
            # arguments carry collations that do not combine (utf8mb4_general_ci and
            # utf8mb4_unicode_ci): the result is then text, and every byte sequence that
            # is not UTF-8 became '?'. Text as binary (its UTF-8 bytes, nothing
            # converted) leaves no collation to combine.
            value = f"CAST({value} AS BINARY)"
    elif kind in _ESCAPED_BYTES:
        # binary values hold those bytes more often than not: the test would not pay
        value = _ESCAPE.format(name)
    elif kind == "bit":
        value = f"CAST({name} AS UNSIGNED)"
    else:
        value = name
    return f"IFNULL({value}, '\\\\N')" if column.nullable else value


def line_select(schema: TableSchema, chunk: SnapshotChunk) -> tuple[str, tuple[Any, ...]]:
    """``(sql, params)`` of the SELECT whose rows are the chunk's ``LOAD DATA`` lines, in the
    order of ``writable_columns`` (``loadfile.TableLoad``'s); ``%`` doubled for PyMySQL."""
    line, rest, params = _line_parts(schema, chunk)
    return f"SELECT {line}{rest}", params


def _grouped_select(schema: TableSchema, chunk: SnapshotChunk) -> tuple[str, tuple[Any, ...]]:
    """``line_select`` as one row: the row count, every line in one value, and the
    length GROUP_CONCAT cut it at if it was longer."""
    line, rest, params = _line_parts(schema, chunk)
    value = f"CAST(GROUP_CONCAT({line} SEPARATOR '\\n') AS BINARY)"
    return f"SELECT COUNT(*), {value}, @@SESSION.group_concat_max_len{rest}", params


def _line_parts(schema: TableSchema, chunk: SnapshotChunk) -> tuple[str, str, tuple[Any, ...]]:
    """A row's line expression, `` FROM ... WHERE <chunk range>`` and its parameters."""
    if reason := not_lean(schema, chunk):
        raise ValueError(f"chunk {chunk.chunk_id} cannot be read as lines: {reason}")
    columns = writable_columns(schema.columns)
    with_bytes = any(c.data_type in _ESCAPED_BYTES for c in columns)
    fields = ", ".join(_expression(c, with_bytes) for c in columns)
    where, params = chunk.where_clause()  # its own % already doubled
    line = f"CONCAT_WS('\\t', {fields})".replace("%", "%%")
    rest = f" FROM {schema.name.quoted()} WHERE ".replace("%", "%%") + where
    return line, rest, params


#: Tables a chunk of which did not fit in one value, in this process: not tried again.
_UNGROUPED: set[str] = set()
#: Tables a chunk of which did not come whole as bare lines, in this process: escaped.
_NOT_BARE: set[str] = set()


def read_chunk_text(
    conn: Any,
    schema: TableSchema,
    chunk: SnapshotChunk,
    on_block: OnBlock,
    *,
    grouped_bytes: int = GROUPED_BYTES,
    block_bytes: int = BLOCK_BYTES,
) -> int:
    """The chunk's ``LOAD DATA`` lines to ``on_block(data, rows, bare)``: as one value of bare
    lines (:func:`bare_reason`) or of escaped ones when they fit in ``grouped_bytes``, else
    escaped in blocks (:func:`read_lines`); the number of rows. Run it in a transaction (a
    consistent snapshot): a chunk that does not come whole one way is read again the next."""
    table = str(schema.name)
    if table not in _UNGROUPED:
        if table not in _NOT_BARE and bare_reason(schema) is None:
            columns = len(writable_columns(schema.columns))
            count, data, limit = _grouped(conn, _bare_select(schema, chunk), grouped_bytes)
            if not count:
                return 0
            if data is not None and _bare_whole(data, count, limit, columns):
                on_block(bytes(data) + _RECORD, count, True)
                return count
            _NOT_BARE.add(table)
        count, data, limit = _grouped(conn, _grouped_select(schema, chunk), grouped_bytes)
        if not count:
            return 0
        if data is not None and grouped_whole(data, count, limit):
            on_block(bytes(data) + b"\n", count, False)
            return count
        _UNGROUPED.add(table)
    sql, params = line_select(schema, chunk)
    return read_lines(conn, sql, params, on_block, block_bytes)


def _grouped(
    conn: Any, select: tuple[str, tuple[Any, ...]], grouped_bytes: int
) -> tuple[int, bytes | None, int]:
    """(row count, grouped value, the length GROUP_CONCAT cut it at) of a grouped select."""
    sql, params = select
    with conn.cursor() as cur:
        # the value is one row, which the server sends only within max_allowed_packet
        cur.execute(
            "SET SESSION group_concat_max_len = "
            f"LEAST({int(grouped_bytes)}, @@max_allowed_packet - {_PACKET_ROOM})"
        )
        cur.execute(sql, tuple(params))
        count, data, limit = cur.fetchone()
    return int(count), data, int(limit)


def _bare_whole(data: bytes, rows: int, limit: int, columns: int) -> bool:
    """Whether a value of bare lines holds every one of ``rows`` lines whole and no value
    holds a mark: clear of the ``limit``, exactly the marks the lines put there."""
    if len(data) > limit - _CHAR_BYTES:
        return False
    return data.count(_RECORD) == rows - 1 and data.count(_UNIT) == rows * (columns - 1)


def grouped_whole(data: bytes | None, rows: int, limit: int) -> bool:
    """Whether a GROUP_CONCAT value holds every one of ``rows`` lines whole: as many lines
    as rows (none was NULL) and clear of the ``limit`` it would have been cut at."""
    if data is None or len(data) > limit - _CHAR_BYTES:
        return False
    return data.count(b"\n") + 1 == rows


def read_lines(
    conn: Any,
    sql: str,
    params: Sequence[Any],
    on_block: OnBlock,
    block_bytes: int = BLOCK_BYTES,
) -> int:
    """Runs ``sql`` (one column of lines, see :func:`line_select`) and hands its escaped lines
    to ``on_block(data, rows, False)`` in blocks of about ``block_bytes`` (each line ends with a
    newline); the number of rows. A NULL line raises :class:`LineOverflow`."""
    cur = conn.cursor(pymysql.cursors.SSCursor)
    try:
        cur.execute(sql, tuple(params))
        result = cur._result
        if result is None or not result.unbuffered_active:
            return 0
        return _rows(conn, result, on_block, block_bytes)
    finally:
        cur.close()


def _rows(conn: Any, result: Any, on_block: OnBlock, limit: int) -> int:
    read = conn._rfile.read
    seq = conn._next_seq_id
    block = bytearray()
    rows = total = 0
    try:
        while True:
            header = read(4)
            if len(header) < 4:
                _lost(conn)
            length = header[0] | header[1] << 8 | header[2] << 16
            if header[3] != seq:
                _lost(conn)
            seq = (seq + 1) & 0xFF
            payload = read(length)
            if len(payload) < length:
                _lost(conn)
            while length == _MAX_PACKET:  # a row of 16 MiB or more comes in pieces
                more = read(4)
                length = more[0] | more[1] << 8 | more[2] << 16
                seq = (seq + 1) & 0xFF
                payload += read(length)
            first = payload[0]
            if first < 0xFB:
                block += memoryview(payload)[1:]
            elif first == 0xFC:
                block += memoryview(payload)[3:]
            elif first == 0xFD:
                block += memoryview(payload)[4:]
            elif first == 0xFE and len(payload) >= 9:
                block += memoryview(payload)[9:]
            else:
                conn._next_seq_id = seq
                _end(conn, result, payload, first)
                if rows:
                    on_block(bytes(block), rows, False)
                return total + rows
            block += b"\n"
            rows += 1
            if len(block) >= limit:
                on_block(bytes(block), rows, False)
                total += rows
                block.clear()
                rows = 0
    finally:
        conn._next_seq_id = seq


def _end(conn: Any, result: Any, payload: bytes, first: int) -> None:
    """The packet after the last row: the end of rows, read by PyMySQL; an error, raised
    as PyMySQL raises it; a NULL line, :class:`LineOverflow` (the cursor's close then
    reads the rows left)."""
    if first == 0xFB:
        raise LineOverflow(
            "a row's line is longer than the source's max_allowed_packet (CONCAT_WS gave NULL)"
        )
    packet = MysqlPacket(payload, conn.encoding)
    result.unbuffered_active = False
    result.connection = None
    result.rows = None
    if first == 0xFF:
        packet.raise_for_error()
    result._check_packet_is_eof(packet)


def _lost(conn: Any) -> None:
    conn._force_close()
    raise pymysql.err.OperationalError(
        CR.CR_SERVER_LOST, "Lost connection to MySQL server while reading a chunk's lines"
    )
