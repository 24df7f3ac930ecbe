"""Fixtures for the consistency-check tests: one database of the same name on both servers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cdc.diff import DiffReport, TableReport, check
from cdc.filter.table_filter import TableFilter
from cdc.model.schema import TableName
from cdc.playground import isolation
from cdc.playground.mariadb import MariaDBServer
from cdc.uri.mysql import MySQLURI, parse_source_uri


@dataclass
class Pair:
    """The test's database on the source server and on the downstream (target) server."""

    db: str
    source_server: MariaDBServer
    target_server: MariaDBServer
    source_admin: Any
    target_admin: Any

    @property
    def source_uri(self) -> MySQLURI:
        return parse_source_uri(self.source_server.uri)

    @property
    def target_uri(self) -> MySQLURI:
        return parse_source_uri(self.target_server.uri)

    def source(self, *statements: str) -> None:
        _run(self.source_admin, statements)

    def target(self, *statements: str) -> None:
        _run(self.target_admin, statements)

    def both(self, *statements: str) -> None:
        self.source(*statements)
        self.target(*statements)

    def table(self, name: str) -> TableName:
        return TableName(self.db, name)

    @staticmethod
    def of(report: DiffReport, name: str) -> TableReport:
        """The report of table ``name``."""
        found = [t for t in report.tables if t.table.table == name]
        assert len(found) == 1, [str(t.table) for t in report.tables]
        return found[0]

    def check(self, *rules: str, chunk_size: int = 1000, threads: int = 2) -> DiffReport:
        table_filter = TableFilter.parse(list(rules) or [f"{self.db}.*"])
        return check(
            self.source_uri, self.target_uri, table_filter, chunk_size=chunk_size, threads=threads
        )


def _run(conn: Any, statements: tuple[str, ...]) -> None:
    with conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


@pytest.fixture
def pair(
    source_db: MariaDBServer, sink_db: MariaDBServer, request: pytest.FixtureRequest
) -> Iterator[Pair]:
    name = isolation.database_name(request.node.name)
    admins = []
    for server in (source_db, sink_db):
        conn = server.connect()
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
            cur.execute(f"USE `{name}`")
        admins.append(conn)
    try:
        yield Pair(name, source_db, sink_db, admins[0], admins[1])
    finally:
        for conn in admins:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
            conn.close()
