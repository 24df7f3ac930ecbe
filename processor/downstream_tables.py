"""A table pipeline's downstream table: prepared before its first chunk, dropped when the
changefeed lets the table go. What that means is the sink kind's (``SinkKind.prepare_table``
and ``drop_table``: a database sink creates and checks the table, others have none).
"""

from __future__ import annotations

from typing import Any

from cdc.model.schema import TableName, TableSchema
from cdc.sink.kind import DownstreamTableMismatch, SinkURI
from cdc.sink.registry import kind_of

__all__ = ["DownstreamTableMismatch", "drop_downstream_table", "prepare_downstream_table"]


def prepare_downstream_table(
    source_conn: Any, sink: SinkURI, schema: TableSchema, *, replace: bool = False
) -> str:
    """What was done ('created', 'existing', 'not a database sink'); DownstreamTableMismatch
    if an existing downstream table cannot take the table's rows.

    ``replace``: the downstream table holds only a partial snapshot of this table, under
    an older schema (a table renamed before its snapshot settled): it is dropped and
    created anew, as the snapshot fills it entirely.
    """
    return kind_of(sink).prepare_table(sink, source_conn, schema, replace=replace)


def drop_downstream_table(sink: SinkURI, name: TableName) -> None:
    """Drops the downstream table ``name`` if the sink holds tables and has one."""
    kind_of(sink).drop_table(sink, name)
