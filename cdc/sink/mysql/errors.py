"""Which downstream errors are worth retrying, which DDL errors mean "already done", and
how a failed statement is described without leaking values or secrets.

Three answers for an error raised while writing:

* transient: the connection or the transaction was lost, not the change's fault
  (server gone or restarting, deadlock, lock wait timeout). Reconnect, replay
  the whole downstream transaction; idempotent writes make the replay safe.
* DDL already applied: a replayed DDL finds its effect in place (``CREATE
  TABLE`` of an existing table, ``ADD COLUMN`` of an existing column). Logged
  and skipped, so a replay after a crash converges.
* anything else is permanent: retrying cannot help, the sink fails.
"""

from __future__ import annotations

import re

import pymysql

from cdc.masking import mask_secret
from cdc.model.events import DdlKind
from cdc.source.flavor import SourceError

__all__ = [
    "TRANSIENT_CODES",
    "describe_error",
    "error_code",
    "is_ddl_already_applied",
    "is_transient",
    "redact_statement",
]

TRANSIENT_CODES = frozenset(
    {
        1040,  # too many connections
        1053,  # server shutdown in progress
        1205,  # lock wait timeout exceeded
        1213,  # deadlock found
        1317,  # query execution was interrupted (KILL QUERY, shutdown)
        1927,  # connection was killed (MariaDB)
        2002,  # cannot connect through socket
        2003,  # cannot connect to server
        2006,  # server has gone away
        2013,  # lost connection during query
        2055,  # lost connection at reading
        4031,  # disconnected by the server because of inactivity (MySQL 8)
    }
)
"""MySQL/MariaDB error numbers after which a reconnect and a replay may succeed."""

# DDL errors that say "the effect is already there" (replay after a crash).
_ALREADY_APPLIED = frozenset(
    {
        1007,  # CREATE DATABASE: database exists
        1008,  # DROP DATABASE: database doesn't exist
        1050,  # CREATE TABLE / VIEW, RENAME target: table already exists
        1051,  # DROP TABLE: unknown table
        1060,  # ADD COLUMN: duplicate column name
        1061,  # ADD INDEX / CREATE INDEX: duplicate key name
        1068,  # ADD PRIMARY KEY: multiple primary key defined
        1091,  # DROP COLUMN / INDEX / PRIMARY KEY: can't drop, check that it exists
        1507,  # DROP PARTITION: partition does not exist
        1517,  # ADD PARTITION: duplicate partition name
        4092,  # DROP VIEW: unknown view (MariaDB)
    }
)
# Errors that mean "already applied" only for some kinds: a rename whose old name is gone.
_ALREADY_APPLIED_FOR_KIND = {
    1146: frozenset({DdlKind.RENAME_TABLE}),  # table doesn't exist (old name)
    1054: frozenset({DdlKind.RENAME_COLUMN, DdlKind.MODIFY_COLUMN}),  # unknown column (old name)
}

_MAX_REASON = 300
_MAX_STATEMENT = 500
_PASSWORD_CLAUSE = re.compile(
    r"(IDENTIFIED\s+(?:VIA\s+\w+\s+)?(?:BY|USING|AS)\s+(?:PASSWORD\s*)?\(?\s*)('(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\")",
    re.IGNORECASE,
)
_PASSWORD_CALL = re.compile(r"(PASSWORD\s*\(\s*)('(?:[^'\\]|\\.|'')*')", re.IGNORECASE)


def error_code(exc: BaseException) -> int | None:
    """The server's or client's error number of ``exc`` (or of its cause), if it has one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, pymysql.err.MySQLError) and current.args:
            code = current.args[0]
            if isinstance(code, int):
                return code
        current = current.__cause__
    return None


def is_transient(exc: BaseException) -> bool:
    """True when reconnecting and replaying the transaction may succeed."""
    if isinstance(exc, pymysql.err.InterfaceError | ConnectionError | TimeoutError):
        return True
    code = error_code(exc)
    if code is not None:
        return code in TRANSIENT_CODES
    if isinstance(exc, pymysql.err.InternalError):
        return True  # a client-side protocol error ("packet sequence number wrong"): reconnect
    # connect() wraps an unreachable server in SourceError; its cause carries the code.
    return isinstance(exc, OSError | SourceError) and not isinstance(exc, PermissionError)


def is_ddl_already_applied(exc: BaseException, kind: DdlKind) -> bool:
    """True when a DDL failed only because its effect is already in place."""
    code = error_code(exc)
    if code is None:
        return False
    return code in _ALREADY_APPLIED or kind in _ALREADY_APPLIED_FOR_KIND.get(code, frozenset())


def describe_error(exc: BaseException) -> str:
    """The server's words and number, truncated and with secrets masked."""
    code = error_code(exc)
    if isinstance(exc, pymysql.err.MySQLError) and len(exc.args) > 1:
        message = str(exc.args[1])
    else:
        message = str(exc) or type(exc).__name__
    text = _truncate(mask_secret(message), _MAX_REASON)
    return f"{text} (MySQL error {code})" if code is not None else text


def redact_statement(statement: str) -> str:
    """A DDL statement fit for an error message: passwords masked, long text cut."""
    text = _PASSWORD_CLAUSE.sub(lambda m: m.group(1) + "'******'", statement)
    text = _PASSWORD_CALL.sub(lambda m: m.group(1) + "'******'", text)
    return _truncate(mask_secret(" ".join(text.split())), _MAX_STATEMENT)


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
