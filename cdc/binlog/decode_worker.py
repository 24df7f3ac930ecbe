"""A decode worker: a child process that turns row events' bytes into row changes.

    capture (reader) ── unit ───► stdin ─┐
                                          │ python -m cdc.binlog.decode_worker
                     ◄── result ─ stdout ─┘

    unit    (tables, parts)
            tables  [(table-map bytes after the id, server kind)]
            parts   [(commit position, transaction id, events)]
            event   (index into tables, row event type code, event bytes, end position)
    result  (rows, error)
            rows    one list of RowChange per part, in event and row order
            error   None, or (index of the part that failed, message): the parts
                    before it are whole in ``rows``, nothing of it or after it is

Frames are an 8-byte little-endian length and a pickle. The pipes join only
the capture and the children it started, so nothing untrusted is unpickled.

Why a process and not a thread: decoding is pure Python and holds the
interpreter lock; a capture reading one stream decodes at one core's speed
however many cores it has (docs/data-path.md, "Decoding beyond one
interpreter"). A worker starts with ``-m``, importing this module and the
decoder only, never the capture's gRPC server or its threads.
"""

from __future__ import annotations

import gc
import os
import pickle
import struct
import sys
from typing import IO, Any

from cdc.binlog.rowchanges import TableShape, op_of, row_change, shape_of
from cdc.binlog.rowdecode import BinlogDecodeError, BinlogTable, TableCache, decode_rows
from cdc.model.events import RowChange
from cdc.model.position import Position

__all__ = ["Event", "Part", "Result", "Unit", "decode_unit", "read_frame", "write_frame"]

Event = tuple[int, int, bytes, int]
Part = tuple[Position, str | None, list[Event]]
Unit = tuple[list[tuple[bytes, str]], list[Part]]
Result = tuple[list[list[RowChange]], tuple[int, str] | None]

_LENGTH = struct.Struct("<Q")


def write_frame(out: IO[bytes], payload: Any) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_LENGTH.pack(len(data)))
    out.write(data)
    out.flush()


def read_frame(source: IO[bytes]) -> Any:
    """The next frame's object; EOFError when the other side closed."""
    head = source.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("decode pipe closed")
    (size,) = _LENGTH.unpack(head)
    data = source.read(size)
    if len(data) < size:
        raise EOFError("decode pipe closed mid-frame")
    return pickle.loads(data)


class _Tables:
    """Parsed tables and their shapes, by table-map bytes (kept across units)."""

    def __init__(self) -> None:
        self._cache = TableCache()
        self._shapes: dict[int, tuple[BinlogTable, TableShape]] = {}

    def get(self, body: bytes, dbms: str, where: str) -> tuple[BinlogTable, TableShape]:
        table = self._cache.get(body, dbms, where)
        known = self._shapes.get(id(table))
        if known is None or known[0] is not table:
            if len(self._shapes) >= TableCache.LIMIT:
                self._shapes.clear()
            known = self._shapes[id(table)] = (table, shape_of(table))
        return known


def decode_unit(unit: Unit, tables: _Tables) -> Result:
    """Every part's row changes, or those of the parts before the first that fails."""
    table_bodies, parts = unit
    done: list[list[RowChange]] = []
    for index, (position, txn_id, events) in enumerate(parts):
        rows: list[RowChange] = []
        append = rows.append
        try:
            for table_index, event_type, body, end in events:
                where = f"end position {end}"
                table, shape = tables.get(*table_bodies[table_index], where)
                op = op_of(event_type)
                for before, after in decode_rows(event_type, body, table, where):
                    append(row_change(shape, op, before, after, position, txn_id))
        except BinlogDecodeError as exc:
            return done, (index, str(exc))
        except Exception as exc:  # a bug: the transaction fails, the worker goes on
            return done, (index, f"decoding failed at {position}: {type(exc).__name__}: {exc}")
        done.append(rows)
    return done, None


def serve(source: IO[bytes], out: IO[bytes]) -> None:
    """Decodes units from ``source`` until it closes, a result to ``out`` for each."""
    # Like the capture's own policy (capture/gc_policy.py): a unit's rows hold no cycles.
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    tables = _Tables()
    while True:
        try:
            unit = read_frame(source)
            write_frame(out, decode_unit(unit, tables))
        except (EOFError, BrokenPipeError):
            return  # the capture closed the pool, or is gone


def main() -> None:
    """Frames go out on a copy of stdout; stdout itself then points at stderr, so that
    whatever else prints (a library's warning) cannot corrupt a frame."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
