"""What `CreateChangefeed` checks before it writes anything: source, binlog, tables, sink.

Each failure is a ``PreconditionFailed`` (FAILED_PRECONDITION) saying what is
wrong and what to do; a malformed value is a ``ConfigError`` (INVALID_ARGUMENT).
The checks run on the capture that got the request, with its environment
(``password-env`` references are resolved there, as on every capture).
"""

from __future__ import annotations

import os
from pathlib import Path

from cdc.config import ChangefeedConfig
from cdc.config.uri import FileSinkURI, MySQLSinkURI
from cdc.filter.table_filter import TableFilter
from cdc.schema.loader import list_tables
from cdc.source.checks import check_binlog_settings
from cdc.source.connect import connect
from cdc.source.flavor import SourceError

__all__ = ["PreconditionFailed", "check_changefeed"]


class PreconditionFailed(Exception):
    """The request is well-formed but the world does not allow it (yet)."""


def check_changefeed(config: ChangefeedConfig) -> None:
    """Raises ``PreconditionFailed`` for the first check that fails."""
    _check_source(config)
    _check_sink(config)


def _check_source(config: ChangefeedConfig) -> None:
    try:
        conn = connect(config.source_uri, "source")
    except SourceError as exc:
        raise PreconditionFailed(f"source-uri: {exc}") from None
    try:
        try:
            check_binlog_settings(conn)
        except SourceError as exc:
            raise PreconditionFailed(f"source-uri: {exc}") from None
        table_filter = TableFilter.parse(config.rules, config.case_sensitive)
        if not list_tables(conn, table_filter.matches):
            raise PreconditionFailed(
                f"filter.rules: {list(config.rules)} match no table on the source "
                f"{config.source_uri}; check the rules (schema.table patterns, e.g. 'shop.*') "
                "and that the tables exist"
            )
    finally:
        conn.close()


def _check_sink(config: ChangefeedConfig) -> None:
    sink = config.sink_uri
    if isinstance(sink, MySQLSinkURI):
        try:
            connect(sink.connection, "sink").close()
        except SourceError as exc:
            raise PreconditionFailed(f"sink-uri: {exc}") from None
    elif isinstance(sink, FileSinkURI):
        _check_directory(Path(sink.path))


def _check_directory(path: Path) -> None:
    """The directory, or the nearest existing parent the sink would create it in, is writable."""
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise PreconditionFailed(
            f"sink-uri: {existing} is not a directory; point the file sink at a directory"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PreconditionFailed(
            f"sink-uri: directory {existing} is not writable by the cdc-server "
            f"(user id {os.getuid()}); fix its permissions or choose another path"
        )
