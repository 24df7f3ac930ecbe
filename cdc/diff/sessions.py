"""Reader connections for a consistency check: one pair (source, target) per thread.

Every connection is opened as the snapshot reader opens its own
(``typeconv.snapshot_connect_kwargs``: utf8mb4, UTC time zone, empty
sql_mode, numbers converted), with REPEATABLE READ isolation. Each chunk is
read inside :func:`consistent_snapshot` on both sides: a plain read-only
transaction with a consistent snapshot, so its checksum and its rows come
from one view of the data, and no lock is ever taken (no LOCK TABLES, no
FLUSH, no locking reads).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql

from cdc.diff.errors import DiffError, DiffInputError, DiffUnavailableError
from cdc.source.connect import connect
from cdc.source.flavor import SourceError
from cdc.typeconv import snapshot_connect_kwargs
from cdc.uri.mysql import MySQLURI

__all__ = ["ReaderPool", "consistent_snapshot", "database_error", "open_reader"]

# MySQL client and server error codes: nobody answered / the login was refused.
_UNREACHABLE = frozenset({2002, 2003, 2005, 2006, 2013})
_ACCESS_DENIED = frozenset({1044, 1045, 1698})
_START = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"


def _code(exc: BaseException | None) -> int | None:
    if isinstance(exc, pymysql.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def open_reader(uri: MySQLURI, what: str) -> Any:
    """A reader connection to ``uri`` (``what`` is "source" or "target" for messages).

    Raises :class:`DiffUnavailableError` when nobody answers, :class:`DiffInputError`
    when the login is refused, :class:`DiffError` otherwise; every message
    names the masked URI.
    """
    try:
        conn = connect(uri, what, **snapshot_connect_kwargs())
    except SourceError as exc:
        code = _code(exc.__cause__)
        if code in _UNREACHABLE:
            raise DiffUnavailableError(str(exc)) from exc
        if code in _ACCESS_DENIED:
            raise DiffInputError(str(exc)) from exc
        raise DiffError(str(exc)) from exc
    with conn.cursor() as cur:
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    return conn


def database_error(exc: pymysql.MySQLError, doing: str) -> DiffError:
    """The :class:`DiffError` for a statement that failed while ``doing`` something."""
    code = _code(exc)
    if code in _UNREACHABLE:
        return DiffUnavailableError(f"lost the connection while {doing}: {exc}")
    return DiffError(f"{doing} failed: {exc}")


@contextmanager
def consistent_snapshot(*conns: Any) -> Iterator[None]:
    """A read-only consistent-snapshot transaction on each of ``conns`` for the block."""
    started = []
    try:
        for conn in conns:
            with conn.cursor() as cur:
                cur.execute(_START)
            started.append(conn)
        yield
    finally:
        for conn in started:
            # a connection that is gone has nothing to roll back; its error is already raised
            with contextlib.suppress(pymysql.MySQLError):
                conn.rollback()


class ReaderPool:
    """One (source, target) reader pair per thread, opened on first use, all closed at once."""

    def __init__(self, source: MySQLURI, target: MySQLURI) -> None:
        self._source = source
        self._target = target
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: list[Any] = []

    def pair(self) -> tuple[Any, Any]:
        """This thread's (source, target) connections."""
        pair = getattr(self._local, "pair", None)
        if pair is None:
            source = open_reader(self._source, "source")
            with self._lock:
                self._open.append(source)
            target = open_reader(self._target, "target")
            with self._lock:
                self._open.append(target)
            pair = self._local.pair = (source, target)
        return pair

    def close(self) -> None:
        with self._lock:
            conns, self._open = self._open, []
        for conn in conns:
            with contextlib.suppress(pymysql.MySQLError):  # already dead: nothing to release
                conn.close()
