"""The admin API's side of ``cdcctl changefeed snapshot``: checks, then one etcd write.

Every refusal is one line, before anything is written:

    no such changefeed ............................ NOT_FOUND (ChangefeedNotFound)
    an empty or malformed table name, a table the
      changefeed does not replicate ............... INVALID_ARGUMENT "table: ..."
    a predicate that is not one condition over
      the table's columns ......................... INVALID_ARGUMENT "where: ..."
    the changefeed not normal (paused, in error),
      a sink kind that cannot take it, column rules
      or event filters on the table, the table not
      streaming yet, or already re-snapshotting ... FAILED_PRECONDITION
    the two servers' tables not fit for it (the
      sink kind's ``resnapshot_refusal``: for a
      MySQL sink, a downstream engine other than
      InnoDB, a unique key besides the row key,
      a key column's charset or collation not the
      same on both sides) ......................... FAILED_PRECONDITION

The request itself is ``cdc.changefeed.snapshot_request`` (create-only); the capture
holding the table runs it (``processor/resnapshot.py``).
"""

from __future__ import annotations

import pymysql

from cdc.api.gen.cdc.v1 import admin_pb2
from cdc.changefeed import ChangefeedStore, read_tables
from cdc.changefeed.snapshot_progress import SnapshotProgress
from cdc.changefeed.snapshot_request import (
    SnapshotRequest,
    SnapshotRequests,
    TableSnapshotting,
    not_ready,
    refusal,
)
from cdc.changefeed.state import ChangefeedState
from cdc.config.changefeed import ChangefeedConfig
from cdc.errors import ConfigError
from cdc.masking import mask_secret
from cdc.model.schema import TableName
from cdc.schema.loader import load_table_schema
from cdc.sink.registry import kind_of
from cdc.snapshot.predicate import PredicateError, parse_predicate
from cdc.source.connect import connect
from cdc.source.flavor import SourceError
from cdc.store import EtcdStore

__all__ = ["RequestRefused", "request_snapshot", "resnapshot_message", "table_refusal"]

_TABLE_MAX = 200


class RequestRefused(Exception):
    """The changefeed or the table is not in a state that allows a re-snapshot now."""


def request_snapshot(
    store: EtcdStore,
    changefeeds: ChangefeedStore,
    changefeed_id: str,
    table_text: str,
    where: str,
    by: str,
) -> SnapshotRequest:
    """Checks everything (see the module doc), then writes the request."""
    cf = changefeeds.get(changefeed_id)
    if cf.status.state is not ChangefeedState.NORMAL:
        raise RequestRefused(
            f"changefeed {changefeed_id} is {cf.status.state.value}; a re-snapshot runs "
            "only while it runs (resume it first)"
        )
    table = _table(table_text)
    refused = refusal(cf.config, table)
    if refused is not None:
        raise RequestRefused(refused)
    entries = read_tables(store, changefeed_id)
    entry = entries.get(str(table))
    if entry is None or entry.task is None:
        known = sorted(t for t, e in entries.items() if e.task is not None)
        shown = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
        raise ConfigError(
            "table",
            f"changefeed {changefeed_id} does not replicate {table} (it replicates: "
            f"{shown or 'no table yet'})",
        )
    predicate = where.strip() or None
    if predicate is not None:
        schema = entry.record.schema if entry.record is not None else None
        if schema is None:
            raise RequestRefused(f"table {table} has no known schema yet; ask again later")
        try:
            parse_predicate(predicate, schema.column_names)
        except PredicateError as exc:
            raise ConfigError("where", str(exc).removeprefix("--where: ")) from None
    requests = SnapshotRequests(store, changefeed_id)
    current = requests.get(table)
    if current is not None and current.active:
        try:
            return requests.create(table, predicate, by)  # refused with the reason
        except TableSnapshotting as exc:
            raise RequestRefused(str(exc)) from None
    reason = not_ready(table, entry, SnapshotProgress(store, changefeed_id).load(table))
    if reason is not None:
        raise RequestRefused(reason)
    reason = table_refusal(cf.config, table)
    if reason is not None:
        raise RequestRefused(reason)
    try:
        return requests.create(table, predicate, by)
    except TableSnapshotting as exc:
        raise RequestRefused(str(exc)) from None


def table_refusal(config: ChangefeedConfig, table: TableName) -> str | None:
    """Why the source's and the sink's tables as they are now rule out a re-snapshot
    (``SinkKind.resnapshot_refusal``), in one line; None when they do not. Connects to
    both with this process's environment, as the create-time checks do."""
    try:
        source = connect(config.source_uri, "source")
    except SourceError as exc:
        return f"the source cannot be reached to check table {table}: {exc}"
    try:
        try:
            schema = load_table_schema(source, table)
        except LookupError:
            return f"table {table} does not exist on the source"
        chunk_column = config.chunk_key_columns.get(str(table))
        return kind_of(config.sink_uri).resnapshot_refusal(
            config.sink_uri, source, schema, chunk_column
        )
    except pymysql.err.MySQLError as exc:
        return f"table {table} could not be checked: {exc}"
    finally:
        source.close()


def _table(text: str) -> TableName:
    if not text.strip():
        raise ConfigError("table", "is empty; give it as schema.table")
    if len(text) > _TABLE_MAX:
        raise ConfigError("table", f"is {len(text)} characters long; names are shorter")
    try:
        return TableName.parse(text.strip())
    except ValueError as exc:
        raise ConfigError("table", f"{text!r} is not schema.table ({exc})") from None


def resnapshot_message(request: SnapshotRequest | None) -> admin_pb2.Resnapshot | None:
    """A table's last re-snapshot as ``cdcctl changefeed query`` shows it."""
    if request is None:
        return None
    return admin_pb2.Resnapshot(
        id=request.request_id,
        state=request.state.value,
        where=request.where or "",
        requested_at=request.requested_at,
        finished_at=request.finished_at or 0.0,
        chunks=request.chunks,
        rows=request.rows,
        error=mask_secret(request.error) if request.error else "",
        by=request.by,
    )
