"""What `CreateChangefeed` checks before it writes anything: source, binlog, tables, sink.

Tables: the sink's kind must be able to write them (``SinkKind.check_tables``:
the MySQL sink needs a key to write by), and each one the filter matches must
be capturable, or the changefeed would fail on it later: every column of a
supported type, a key (or a ``chunk-key-columns`` entry) to snapshot it by,
and every column an event filter's value expression (``ignore-*-value-expr``)
names, for each table the filter's matcher accepts: an expression on a column
the table lacks could only stop the changefeed at that table's first row. The
column selectors and masks (``[[sink.column-selectors]]``,
``[[sink.column-masks]]``) must fit each table they apply to
(``cdc.filter.column_plan``: no key column excluded or masked, masks on text
columns only, every column named without a wildcard present); a refusal is a
``ConfigError`` naming the rule, the table and the column. A
start position (mode never) must still be in the source's binlog. The sink
must be reachable and writable (``SinkKind.check_reachable``).

The server the source URI reaches is returned as the changefeed's first source
record (server_id, server_uuid / gtid_domain_id, GTID state): the failover
guard (``cdc.changefeed.failover``) compares every later connection with it.

Each failure is a ``PreconditionFailed`` (FAILED_PRECONDITION) saying what is
wrong and what to do; a malformed value is a ``ConfigError`` (INVALID_ARGUMENT),
and so is an event-filter expression naming a column a matched table lacks
(``filter.event-filters[i].ignore-insert-value-expr: table db.t: unknown column ...``).
The checks run on the capture that got the request, with its environment
(``password-env`` references are resolved there, as on every capture).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import Any

from cdc.changefeed.source_record import SourceRecord
from cdc.config import ChangefeedConfig
from cdc.config.changefeed import SnapshotMode
from cdc.filter.column_plan import plan_columns
from cdc.filter.event_filter import EventFilter
from cdc.filter.table_filter import TableFilter
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.loader import list_tables, load_schemas
from cdc.sink.kind import SinkCheckFailed
from cdc.sink.registry import kind_of
from cdc.source.checks import check_binlog_settings, check_position_available
from cdc.source.connect import connect
from cdc.source.flavor import SourceError, detect, executed_gtids, gtid_enabled
from cdc.typeconv import converter_for

__all__ = ["PreconditionFailed", "check_changefeed", "check_new_tables"]


class PreconditionFailed(Exception):
    """The request is well-formed but the world does not allow it (yet)."""


def check_changefeed(config: ChangefeedConfig) -> SourceRecord:
    """Raises ``PreconditionFailed`` for the first check that fails; the source's record."""
    source = _check_source(config)
    _check_sink(config)
    return source


def _check_source(config: ChangefeedConfig) -> SourceRecord:
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
        check_new_tables(conn, config, tables)
        _check_start(conn, config)
        info = detect(conn)
        gtids = executed_gtids(conn, info) if gtid_enabled(conn, info) else None
        return SourceRecord.first(info, gtids, time.time())
    finally:
        conn.close()


def check_new_tables(
    conn: Any,
    config: ChangefeedConfig,
    tables: list[TableName],
    streamed: Collection[TableName] = (),
) -> None:
    """What create checks of each table (also for the tables an update adds);
    ``streamed``: tables that start without a snapshot, so need no key to split by."""
    leave_out = "or leave the table out with a filter rule"
    events = EventFilter(config.event_filters, config.case_sensitive)
    schemas = load_schemas(conn, tables)
    _check_sink_tables(config, schemas)
    for table, schema in schemas.items():
        events.verify_table(table, [column.name for column in schema.columns])
        rules = config.columns.for_table(table)
        if rules is not None:
            plan_columns(rules, schema, strict=True)
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
        needs_chunks = config.snapshot_mode is not SnapshotMode.NEVER and table not in streamed
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


def _check_sink_tables(config: ChangefeedConfig, schemas: dict[TableName, TableSchema]) -> None:
    """Whether the sink's kind can write these tables (a database sink needs keys)."""
    try:
        kind_of(config.sink_uri).check_tables(config.sink_uri, schemas)
    except SinkCheckFailed as exc:
        raise PreconditionFailed(str(exc)) from None


def _check_sink(config: ChangefeedConfig) -> None:
    """Whether the sink can be reached and written now (a server, a directory)."""
    try:
        kind_of(config.sink_uri).check_reachable(config.sink_uri)
    except SinkCheckFailed as exc:
        raise PreconditionFailed(str(exc)) from None
