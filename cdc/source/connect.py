"""Opening PyMySQL connections to a source or a downstream, with errors a user can act on."""

from __future__ import annotations

from typing import Any

import pymysql

from cdc.source.flavor import SourceError
from cdc.uri.mysql import MySQLURI

# MySQL client error codes that mean "nobody answered there".
_UNREACHABLE = {2002, 2003, 2005, 2006, 2013}
_ACCESS_DENIED = {1044, 1045, 1698}


def connect(uri: MySQLURI, what: str = "source", **kwargs: Any) -> pymysql.connections.Connection:
    """A connection to `uri`; SourceError (masked URI, reason, what to check) when it fails."""
    settings: dict[str, Any] = {
        "charset": "utf8mb4",
        "connect_timeout": 10,
        "autocommit": True,
        **uri.connection_kwargs(),
        **kwargs,
    }
    try:
        return pymysql.connect(**settings)
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else None
        reason = exc.args[1] if len(exc.args) > 1 else str(exc)
        if code in _UNREACHABLE:
            hint = "check that the server runs and that host and port are right"
        elif code in _ACCESS_DENIED:
            hint = "check the user and password (or password-env / password-file)"
        else:
            hint = "see the server's error log"
        raise SourceError(f"cannot connect to the {what} {uri}: {reason} ({code}); {hint}") from exc
