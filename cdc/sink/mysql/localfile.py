"""``LOAD DATA LOCAL INFILE`` that sends only the bytes the sink built, never a file on disk.

In that protocol the *server* names the file the client must send, and a
client that simply opens whatever it is asked for (PyMySQL's own handler
does) hands any readable file to a server that asks for it: a downstream
that is not what it claims to be could read the capture's password files
or TLS keys. A sink connection opened with local files therefore answers
such a request from memory only::

    Downstream.run(statement with local_file)
      offer(LocalFile(name, data))      the one buffer this statement may send
      LOAD DATA LOCAL INFILE 'name' ...
        server: "send me <file>"
          <file> == name, first request   -> data, in packets, then the end
          anything else                   -> nothing (an empty file), then
                                             LocalFileRefused: the write fails
      offer(None)                       whatever happened

Nothing is ever read from the client's disk, whatever the server asks, and an
offer serves one request only. PyMySQL has no hook for this: the subclass
replaces its result reader (``_read_query_result``, ``_read_load_local_packet``,
as in PyMySQL 2.2); the sink's integration tests fail if that stops working.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, cast

import pymysql
from pymysql.connections import MySQLResult
from pymysql.constants import CR
from pymysql.protocol import LoadLocalPacketWrapper

__all__ = [
    "LOCAL_INFILE_REFUSED",
    "LocalFile",
    "LocalFileConnection",
    "LocalFileRefused",
    "guard",
    "refuses_local_files",
]

LOCAL_INFILE_REFUSED = frozenset({1148, 2068, 3948, 4166})
"""ER_NOT_ALLOWED_COMMAND, CR_LOAD_DATA_LOCAL_INFILE_REJECTED, MySQL 8's
ER_CLIENT_LOCAL_FILES_DISABLED, MariaDB's ER_LOAD_INFILE_CAPABILITY_DISABLED: the
downstream does not take local files (``local_infile=OFF``, or built without)."""

_PACKET = 16 * 1024
_HEADER = struct.Struct("<I")  # a packet's payload length: its first three bytes


@dataclass(frozen=True)
class LocalFile:
    """What one ``LOAD DATA LOCAL INFILE 'name'`` statement sends: ``data`` under ``name``."""

    name: str
    data: bytes

    def __repr__(self) -> str:
        return f"LocalFile({self.name!r}, {len(self.data)} bytes)"


class LocalFileRefused(Exception):
    """The server asked for a file other than the one offered (or for one more): it was
    sent nothing. A permanent failure of the write."""

    def __init__(self, asked: str, offered: str | None) -> None:
        what = f"the sink offered only {offered!r}" if offered else "the sink offered none"
        super().__init__(
            f"the downstream asked for the local file {asked!r}, but {what}: nothing was sent"
        )


class _OfferedFileResult(MySQLResult):
    """PyMySQL's result reader with the local-file request answered from the offer."""

    def _read_load_local_packet(self, first_packet: Any) -> None:
        conn = cast(LocalFileConnection, self.connection)
        asked = LoadLocalPacketWrapper(first_packet).filename
        offer, conn.offered = conn.offered, None
        matched = offer is not None and asked == offer.name.encode()
        # the file, then an empty packet (its end); nothing but the end when not matched
        conn.send_packets(offer.data if offer is not None and matched else b"")
        answer = conn._read_packet()  # raises the server's error, if it sent one
        if not answer.is_ok_packet():
            raise pymysql.err.OperationalError(CR.CR_COMMANDS_OUT_OF_SYNC, "Commands Out of Sync")
        self._read_ok_packet(answer)
        if not matched:
            raise LocalFileRefused(
                asked.decode(errors="replace"), offer.name if offer is not None else None
            )


class LocalFileConnection(pymysql.connections.Connection):
    """A PyMySQL connection whose local-file requests are served by :meth:`offer` only."""

    offered: LocalFile | None = None
    _next_seq_id: int  # PyMySQL's packet sequence number, kept by its Connection

    def offer(self, local_file: LocalFile | None) -> None:
        """The file the next request may have (``None``: none)."""
        self.offered = local_file

    def send_packets(self, data: bytes) -> None:
        """``data`` in packets of at most 16 KiB, then an empty one, in a single write.

        One write, not one per packet: a lane thread gives up the interpreter lock at
        every socket call and may then wait for it behind the threads building rows.
        """
        size = min(self.max_allowed_packet, _PACKET)
        view = memoryview(data)
        parts: list[bytes | memoryview] = []
        seq = self._next_seq_id
        for start in range(0, len(view), size):
            chunk = view[start : start + size]
            parts += (_HEADER.pack(len(chunk))[:3], bytes((seq,)), chunk)
            seq = (seq + 1) % 256
        parts += (b"\0\0\0", bytes((seq,)))
        self._next_seq_id = (seq + 1) % 256
        self._write_bytes(b"".join(parts))

    def _read_query_result(self, unbuffered: bool = False) -> int:
        # PyMySQL's own, with the result reader above
        self._result = None
        result = _OfferedFileResult(self)
        if unbuffered:
            result.init_unbuffered_query()
        else:
            result.read()
        self._result = result
        if result.server_status is not None:
            self.server_status = result.server_status
        return result.affected_rows


def guard(conn: pymysql.connections.Connection) -> LocalFileConnection:
    """``conn`` (opened with ``local_infile=True``) turned into a :class:`LocalFileConnection`.

    The class is changed in place, because ``cdc.source.connect`` makes the plain
    PyMySQL connection (with its error messages); the subclass adds no state a
    connection must be created with.
    """
    conn.__class__ = LocalFileConnection
    guarded = cast(LocalFileConnection, conn)
    guarded.offer(None)
    return guarded


def refuses_local_files(error: BaseException) -> bool:
    """True when ``error`` (or the error it was raised from) is the downstream refusing
    ``LOAD DATA LOCAL INFILE`` as such, whatever the data."""
    cause = error.__cause__ if error.__cause__ is not None else error
    return (
        isinstance(cause, pymysql.err.MySQLError)
        and bool(cause.args)
        and cause.args[0] in LOCAL_INFILE_REFUSED
    )
