"""Fixtures for the snapshot tests: one object bundling a fresh source database and helpers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cdc.model.schema import TableName, TableSchema
from cdc.playground.mariadb import MariaDBServer
from cdc.schema.loader import load_table_schema
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, detect
from cdc.typeconv import row_converter, select_list, snapshot_connect_kwargs
from cdc.uri.mysql import MySQLURI, parse_source_uri


@dataclass
class Source:
    """The test's database on the shared source server, and ways to poke at it."""

    server: MariaDBServer
    db: str
    uri: MySQLURI
    info: ServerInfo
    admin: Any  # autocommit connection for preparing and changing tables
    snap: Any  # a connection opened the way the splitter's callers open theirs

    def execute(self, *statements: str, params: Any = None) -> None:
        with self.admin.cursor() as cur:
            for statement in statements:
                cur.execute(statement, params)

    def table(self, name: str) -> TableName:
        return TableName(self.db, name)

    def schema(self, name: str) -> TableSchema:
        return load_table_schema(self.admin, self.table(name))

    def rows(self, schema: TableSchema, where: str = "1=1") -> list[dict[str, Any]]:
        """The table's rows now, converted exactly as the snapshot converts them."""
        convert = row_converter(schema.columns, "select")
        sql = f"SELECT {select_list(schema.columns)} FROM {schema.name.quoted()} WHERE {where}"
        with self.snap.cursor() as cur:
            cur.execute(sql)
            return [dict(zip(schema.column_names, convert(r), strict=True)) for r in cur.fetchall()]


@pytest.fixture
def src(source_db: MariaDBServer, source_database: str) -> Iterator[Source]:
    uri = parse_source_uri(source_db.uri)
    admin = source_db.connect(database=source_database)  # for seq_1_to_N tables
    snap = connect(uri, "source", **snapshot_connect_kwargs())
    try:
        yield Source(source_db, source_database, uri, detect(admin), admin, snap)
    finally:
        snap.close()
        admin.close()
