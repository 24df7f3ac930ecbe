"""One connection to the downstream that outlives its failures.

:meth:`Downstream.run` executes a list of statements and, on a transient
error, drops the connection, waits, reconnects and runs the *whole* list again.
A row session (``strict``, see ``strict.py``) runs without autocommit: its
statements and their warning checks, then one COMMIT, so a statement that
changed a value is rolled back, never committed (two round trips for a lone
statement). A DDL session runs in autocommit, a lone statement atomic by itself::

    attempt ─► ok
       │ transient error (2006/2013/2003 lost, 1213 deadlock, 1205 lock wait, 1053 shutdown)
       ▼
    close connection ─► wait backoff (doubling, capped) ─► attempt again
       │ still failing after retry_timeout seconds, or a permanent error
       ▼
    SinkError(reason, statement)

Replaying the whole transaction is safe because every statement is
idempotent (upsert / delete by key, DDL whose replay is recognised). A
statement whose warnings say a value changed (``strict.ValueChanged``) is a
permanent error: the connection is closed before any COMMIT, so the server
rolls the transaction back.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pymysql

from cdc.logs import ContextLogger
from cdc.sink.base import SinkError
from cdc.sink.mysql.errors import describe_error, is_transient
from cdc.sink.mysql.localfile import LocalFileConnection, guard
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.sink.mysql.statements import Statement
from cdc.sink.mysql.strict import (
    BINLOG_PROBE,
    RELAXED_SQL_MODE,
    STRICT_SQL_MODE,
    ValueChanged,
    changed_values,
    isolation_sql,
    parse_warning,
    session_sql,
)
from cdc.source.connect import connect
from cdc.source.flavor import idle_transaction_limit
from cdc.typeconv import sink_connect_kwargs
from cdc.uri.mysql import MySQLURI

__all__ = ["Downstream"]

_T = TypeVar("_T")

_RELAX = f"SET SESSION sql_mode = '{RELAXED_SQL_MODE}'"
_RESTRICT = f"SET SESSION sql_mode = '{STRICT_SQL_MODE}'"


class FencedOut(Exception):
    """The write fence said no: nothing more may be written (see MySQLSinkOptions.writable)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            "refusing to write: this capture can no longer prove its lease is alive, so "
            "the table may run elsewhere now (the open transaction was rolled back)"
        )
        self.what = what


class Downstream:
    """A lazily (re)opened connection and the retry loop around it. One thread uses it.

    ``strict`` (row sessions): strict sql_mode, no autocommit, every statement's
    warnings checked (``strict.py``); otherwise (DDL) the relaxed mode, autocommit,
    warnings only logged. ``local_infile``: the connection may run ``LOAD DATA LOCAL
    INFILE``, and sends a statement's own ``local_file`` and nothing else (``localfile.py``).
    """

    def __init__(
        self,
        uri: MySQLURI,
        options: MySQLSinkOptions,
        log: ContextLogger,
        stop: threading.Event,
        *,
        read_timeout: float | None,
        local_infile: bool = False,
        strict: bool = True,
    ) -> None:
        self._uri = uri
        self._strict = strict
        self._local_infile = local_infile
        self._options = options
        self._log = log
        self._stop = stop
        self._read_timeout = read_timeout
        self._conn: pymysql.connections.Connection | None = None

    def _connection(self) -> pymysql.connections.Connection:
        if self._conn is None:
            extra: dict[str, Any] = dict(sink_connect_kwargs())
            if self._read_timeout is not None:
                extra["read_timeout"] = self._read_timeout
                extra["write_timeout"] = self._read_timeout
            if self._local_infile:
                extra["local_infile"] = True
            conn = connect(self._uri, what="sink", autocommit=not self._strict, **extra)
            if self._local_infile:
                conn = guard(conn)
            limit = idle_transaction_limit(
                conn.get_server_info(), self._options.idle_transaction_timeout
            )
            try:
                with conn.cursor() as cur:
                    for sql in (*session_sql(strict=self._strict), *limit):
                        cur.execute(sql)
                    if self._strict:
                        cur.execute(BINLOG_PROBE)
                        for sql in isolation_sql(cur.fetchall()):
                            cur.execute(sql)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def close(self) -> None:
        """Closes the connection (an open transaction is rolled back by the server)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            # closing a broken connection may fail; it is gone either way
            with contextlib.suppress(Exception):
                conn.close()

    def check(self) -> None:
        """Opens the connection now (retrying transient failures) to fail early on a bad
        address or password."""
        self.run([], transaction=False)

    def _check_fence(self, statement: Statement | None) -> None:
        writable = self._options.writable
        if writable is not None and not writable():
            raise FencedOut(statement.description if statement is not None else "commit")

    def run(self, statements: Sequence[Statement], *, transaction: bool) -> None:
        """Executes ``statements`` (in one transaction when ``transaction``; a strict
        session always commits them together), retrying transient errors; raises
        :class:`SinkError` for a permanent one (a changed value included) or when
        ``retry_timeout`` is used up."""
        strict = self._strict
        # One statement is atomic by itself (autocommit): no BEGIN / COMMIT round trips.
        # A strict session has no autocommit: its COMMIT comes after the warning checks.
        transaction = not strict and transaction and len(statements) > 1
        running: list[Statement] = []

        def attempt(conn: pymysql.connections.Connection) -> None:
            running.clear()
            with conn.cursor() as cur:
                if transaction:
                    conn.begin()
                for current in statements:
                    running[:] = [current]
                    self._check_fence(current)
                    relaxed = strict and bool(current.enum_errors)
                    if relaxed:
                        cur.execute(_RELAX)
                    try:
                        self._execute(conn, cur, current)
                    except pymysql.err.MySQLError as exc:
                        if current.tolerate is not None and current.tolerate(exc):
                            continue
                        raise
                    if current.check is not None:
                        current.check(cur.fetchall())
                    if cur.warning_count:
                        self._check_warnings(cur, current)
                    if relaxed:
                        cur.execute(_RESTRICT)
                running.clear()
                if transaction or (strict and statements):
                    self._check_fence(None)
                    conn.commit()

        self._retrying(attempt, lambda: running[0].description if running else None)

    def fetch(self, sql: str, args: Sequence[Any], what: str) -> tuple[Any, ...]:
        """The one row ``sql`` answers (a query reading no table), retrying transient
        errors as :meth:`run` does; ``what`` names it in errors."""

        def attempt(conn: pymysql.connections.Connection) -> tuple[Any, ...]:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                row = cur.fetchone()
            if row is None:
                raise SinkError("the downstream answered no row", what)
            return tuple(row)

        return self._retrying(attempt, lambda: what)

    def _retrying(
        self,
        attempt: Callable[[pymysql.connections.Connection], _T],
        doing: Callable[[], str | None],
    ) -> _T:
        """``attempt`` on the connection until it succeeds, a permanent error, or
        ``retry_timeout``; ``doing`` names the statement it is at (None: connecting or
        committing) for errors."""
        first_failure: float | None = None
        delay = self._options.backoff_initial
        tries = 0
        while True:
            tries += 1
            try:
                result = attempt(self._connection())
                if tries > 1:
                    self._log.info("downstream call succeeded after %d attempts", tries)
                return result
            except FencedOut as exc:
                self.close()
                raise SinkError(str(exc), exc.what) from exc
            except ValueChanged as exc:
                self.close()
                raise SinkError(str(exc), doing() or "commit") from exc
            except SinkError:
                self.close()
                raise
            except Exception as exc:  # classified below; nothing is swallowed
                self.close()
                what = doing() or "connecting to the sink"
                reason = describe_error(exc)
                if not is_transient(exc):
                    raise SinkError(reason, what) from exc
                now = time.monotonic()
                if first_failure is None:
                    first_failure = now
                spent = now - first_failure
                budget = self._options.retry_timeout
                if spent >= budget:
                    raise SinkError(
                        f"gave up after {tries} attempts in {spent:.1f}s "
                        f"(retry timeout {budget:g}s): {reason}",
                        what,
                    ) from exc
                wait = min(delay, budget - spent)
                self._log.warning(
                    "transient downstream error, retry %d in %.2fs: %s (while %s)",
                    tries,
                    wait,
                    reason,
                    what,
                )
                if self._stop.wait(wait):
                    raise SinkError(f"the sink was closed while retrying: {reason}", what) from exc
                delay = min(delay * 2, self._options.backoff_max)

    def _execute(self, conn: Any, cur: Any, statement: Statement) -> None:
        local_file = statement.local_file
        if local_file is None:
            cur.execute(statement.sql)
            return
        if not isinstance(conn, LocalFileConnection):
            raise TypeError("a statement with a local file needs Downstream(local_infile=True)")
        conn.offer(local_file)
        try:
            cur.execute(statement.sql)
        finally:
            conn.offer(None)

    def _check_warnings(self, cur: Any, statement: Statement) -> None:
        """Reads the warnings ``statement`` left; in a strict session raises
        :class:`ValueChanged` for those meaning a changed value, else logs them."""
        count = cur.warning_count
        cur.execute("SHOW WARNINGS")
        warnings = [parse_warning(row) for row in cur.fetchall()]
        if not self._strict:
            for warning in warnings:
                if warning.level != "Note":
                    self._log.warning(
                        "downstream warning: %s (while %s)", warning, statement.description
                    )
            return
        bad = changed_values(warnings, statement.enum_errors)
        hidden = max(0, count - len(warnings))
        if bad or hidden:
            raise ValueChanged(bad, hidden)
