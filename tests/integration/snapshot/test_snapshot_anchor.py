"""The snapshot's anchor (``processor.table_snapshot.anchor_snapshot``) against real servers:
a DDL between its reads of the schema."""

from __future__ import annotations

from typing import Any

import pytest
from testkit import execute

from cdc.model.schema import TableName
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.sink.registry import kind_of, parse_sink_uri
from cdc.source.flavor import detect
from processor.table_snapshot import anchor_snapshot

pytestmark = pytest.mark.integration


def test_a_downstream_table_created_before_a_ddl_is_made_again_with_the_new_schema(
    source_db: MariaDBServer,
    sink_db: MariaDBServer,
    source_database: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the fuzz (seed 6106): the first attempt created the downstream table, a
    DDL widened a column before the schema was read again, and the second attempt found
    that table too narrow for the new schema: DownstreamTableMismatch, the changefeed
    failed closed. A table the anchor created itself is made again."""
    table = TableName(source_database, "t")
    execute(source_db, f"CREATE TABLE {table.quoted()} (id INT PRIMARY KEY, v INT)")
    sink = parse_sink_uri(sink_db.uri)
    kind = type(kind_of(sink))
    real = kind.prepare_table
    outcomes: list[str] = []

    def prepare(self: Any, *args: Any, **kwargs: Any) -> str:
        outcome = real(self, *args, **kwargs)
        if not outcomes:  # the DDL lands between the anchor's two reads of the schema
            execute(source_db, f"ALTER TABLE {table.quoted()} MODIFY v BIGINT")
        outcomes.append(outcome)
        return outcome

    monkeypatch.setattr(kind, "prepare_table", prepare)
    source = source_db.connect()
    try:
        anchor = anchor_snapshot(source, detect(source), sink, table)
        assert outcomes == ["created", "created"]
        assert [c.data_type for c in anchor.schema.columns] == ["int", "bigint"]
        downstream = sink_db.connect()
        try:
            shape = load_table_schema(downstream, table)
        finally:
            downstream.close()
        assert [c.data_type for c in shape.columns] == ["int", "bigint"]
    finally:
        source.close()
        execute(sink_db, f"DROP DATABASE IF EXISTS `{source_database}`")
