"""What `CreateChangefeed` checks before it writes anything: source, binlog, tables, sink.

Tables: each one the filter matches must be capturable, or the changefeed would
fail on it later: every column of a supported type, a key the MySQL sink can
write by, a key (or a ``chunk-key-columns`` entry) to snapshot it by, and every
column an event filter's value expression (``ignore-*-value-expr``) names, for
each table the filter's matcher accepts: an expression on a column the table
lacks could only stop the changefeed at that table's first row. A start
position (mode never) must still be in the source's binlog.

Each failure is a ``PreconditionFailed`` (FAILED_PRECONDITION) saying what is
wrong and what to do; a malformed value is a ``ConfigError`` (INVALID_ARGUMENT),
and so is an event-filter expression naming a column a matched table lacks
(``filter.event-filters[i].ignore-insert-value-expr: table db.t: unknown column ...``).
The checks run on the capture that got the request, with its environment
(``password-env`` references are resolved there, as on every capture).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from cdc.config import ChangefeedConfig
from cdc.config.changefeed import SnapshotMode
from cdc.config.uri import FileSinkURI, MySQLSinkURI
from cdc.filter.event_filter import EventFilter
from cdc.filter.table_filter import TableFilter
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName
from cdc.schema.loader import list_tables, load_schemas
from cdc.source.checks import check_binlog_settings, check_position_available
from cdc.source.connect import connect
from cdc.source.flavor import SourceError, detect
from cdc.typeconv import converter_for

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
        tables = list_tables(conn, table_filter.matches)
        if not tables:
            raise PreconditionFailed(
                f"filter.rules: {list(config.rules)} match no table on the source "
                f"{config.source_uri}; check the rules (schema.table patterns, e.g. 'shop.*') "
                "and that the tables exist"
            )
        if isinstance(config.sink_uri, FileSinkURI) and len(tables) > 1:
            names = ", ".join(str(t) for t in tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise PreconditionFailed(
                f"sink-uri: the file sink takes one table per changefeed in cdc-server for now "
                f"(each table pipeline writes its own sink, and a folder has one writer); the "
                f"rules match {len(tables)} tables ({names}): create one changefeed per table, "
                "each with its own folder, or use a database sink"
            )
        _check_tables(conn, config, tables)
        _check_start(conn, config)
    finally:
        conn.close()


def _check_tables(conn: Any, config: ChangefeedConfig, tables: list[TableName]) -> None:
    leave_out = "or leave the table out with a filter rule"
    events = EventFilter(config.event_filters, config.case_sensitive)
    for table, schema in load_schemas(conn, tables).items():
        events.verify_table(table, [column.name for column in schema.columns])
        for column in schema.columns:
            try:
                converter_for(column, "select")
            except ValueError:
                raise PreconditionFailed(
                    f"filter.rules: table {table} has column {column.name!r} of type "
                    f"{column.column_type}, which cannot be captured; change the column's type "
                    f"on the source, {leave_out} such as '!{table}'"
                ) from None
        if schema.key_columns:
            continue
        if isinstance(config.sink_uri, MySQLSinkURI):
            raise PreconditionFailed(
                f"filter.rules: table {table} has no primary key and no unique key on NOT NULL "
                "columns; the MySQL sink writes rows by key (upsert and delete by key) and "
                f"cannot write it: add a primary key on the source, {leave_out} such as "
                f"'!{table}'"
            )
        needs_chunks = config.snapshot_mode is not SnapshotMode.NEVER
        if needs_chunks and str(table) not in config.chunk_key_columns:
            raise PreconditionFailed(
                f"snapshot.chunk-key-columns: table {table} has no primary key and no unique "
                "key on NOT NULL columns, so its snapshot cannot be split by key; name a column "
                f'to split it by: [snapshot] chunk-key-columns = {{ "{table}" = "<column>" }}, '
                f"{leave_out} such as '!{table}'"
            )


def _check_start(conn: Any, config: ChangefeedConfig) -> None:
    """A configured start position (mode never) must still be in the binlog."""
    if config.snapshot_mode is not SnapshotMode.NEVER:
        return
    info = detect(conn)
    start: Position | GtidSet
    if config.start_position:
        field, start = "start-position", Position.parse(config.start_position)
    elif config.start_gtid:
        field, start = "start-gtid", GtidSet.parse(config.start_gtid, info.flavor)
    else:
        return
    try:
        check_position_available(conn, info, start)
    except SourceError as exc:
        raise PreconditionFailed(f"{field}: {exc}") from None


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
