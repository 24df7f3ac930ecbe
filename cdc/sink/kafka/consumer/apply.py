"""Applying merged steps to a MySQL/MariaDB database: whole watermark steps, one transaction.

    step: rows..., DDL at D, rows..., W
      BEGIN; rows before D; COMMIT           each row by key: INSERT/UPDATE as REPLACE (an
      DDL D (USE its schema first)           UPDATE that moved its key deletes the old key
      BEGIN; progress = D; COMMIT            first), DELETE by key
      BEGIN; rows up to W; progress = W; COMMIT

``progress`` is one row per consumer in ``_cdc_consumer.progress`` of the
target: the watermark up to which everything is applied, written in the same
transaction as the rows. A restarted consumer drops what it reads again at or
before it, so a replay never moves a row back. A DDL the target already has
(the consumer stopped between the DDL and its progress row) is recognised by
the server's error and passed, as the MySQL sink does.

Values arrive as canal-json text; each column's ``mysqlType`` gives the
column, whose decoder (``cdc.sink.file.values``) makes the canonical value
that ``cdc.typeconv.sql_param_converter`` writes back exactly, in the sink
session settings (UTC, the sink's sql_mode). Generated columns of the target
are left out: the server computes them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc.logs import get_logger
from cdc.model.events import DdlEvent
from cdc.model.position import Position
from cdc.model.schema import Column, TableName
from cdc.sink.file.values import BytesForm, decoder_for
from cdc.sink.kafka.consumer.events import RowMessage
from cdc.sink.kafka.consumer.merge import Step
from cdc.sink.mysql.errors import describe_error, is_ddl_already_applied
from cdc.source.connect import connect
from cdc.typeconv import sink_connect_kwargs, sql_param_converter
from cdc.uri.mysql import MySQLURI

__all__ = ["ApplyError", "TargetWriter", "column_of"]

_BASE = re.compile(r"\s*([A-Za-z]+(?: precision)?)")
PROGRESS_TABLE = TableName("_cdc_consumer", "progress")


class ApplyError(RuntimeError):
    """The target refused a row or a DDL; the message names the table and the server's words."""


def column_of(name: str, mysql_type: str) -> Column:
    """The column canal-json's ``mysqlType`` describes (``int(10) unsigned``, ``set('a','b')``)."""
    match = _BASE.match(mysql_type)
    base = match.group(1).lower() if match else mysql_type
    return Column(name, base, mysql_type, unsigned="unsigned" in mysql_type.lower())


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass(frozen=True)
class _Table:
    """How rows of one table version are written."""

    columns: tuple[str, ...]
    convert: Mapping[str, Callable[[str | None], Any]]
    keys: tuple[str, ...]
    upsert: str
    delete: str

    def values(self, image: Mapping[str, str | None]) -> list[Any]:
        return [self.convert[name](image[name]) for name in self.columns]

    def key(self, image: Mapping[str, str | None]) -> list[Any]:
        return [self.convert[name](image[name]) for name in self.keys]


def _converter(column: Column) -> Callable[[str | None], Any]:
    decode = decoder_for(column, BytesForm.LATIN1)
    to_param = sql_param_converter(column)
    return lambda text: to_param(decode(text))


class TargetWriter:
    """One connection to the target; applies steps and keeps the consumer's progress."""

    def __init__(self, target: MySQLURI, consumer: str) -> None:
        self.target = target
        self.consumer = consumer
        self.log = get_logger(__name__, consumer=consumer)
        self.conn = connect(target, "target", **sink_connect_kwargs(), autocommit=False)
        self._tables: dict[tuple[TableName, tuple[tuple[str, str], ...]], _Table] = {}
        self._generated: dict[TableName, frozenset[str]] = {}
        self.rows = 0
        self.ddls = 0
        with self.conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {_quote(PROGRESS_TABLE.schema)}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE.quoted()} ("
                "consumer VARCHAR(255) PRIMARY KEY, position TEXT NOT NULL, "
                "updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)"
            )
        self.conn.commit()

    def close(self) -> None:
        self.conn.close()

    def applied(self) -> Position | None:
        """The watermark everything is applied up to, from the target (None: nothing yet)."""
        with self.conn.cursor() as cur:
            cur.execute(
                f"SELECT position FROM {PROGRESS_TABLE.quoted()} WHERE consumer = %s",
                (self.consumer,),
            )
            row = cur.fetchone()
        self.conn.commit()
        return None if row is None else Position.from_json(row[0])

    def apply(self, step: Step) -> None:
        """Applies ``step`` (module docstring); ``ApplyError`` when the target refuses."""
        rows: list[RowMessage] = []
        for action in step.actions:
            if isinstance(action, DdlEvent):
                self._transaction(rows, None)
                rows = []
                self._ddl(action)
                self._transaction([], action.position)
            else:
                rows.append(action)
        self._transaction(rows, step.watermark)

    # --- rows ------------------------------------------------------------------------------------

    def _transaction(self, rows: Sequence[RowMessage], progress: Position | None) -> None:
        if not rows and progress is None:
            return
        try:
            with self.conn.cursor() as cur:
                self._rows(cur, rows)
                if progress is not None:
                    cur.execute(
                        f"REPLACE INTO {PROGRESS_TABLE.quoted()} (consumer, position) "
                        "VALUES (%s, %s)",
                        (self.consumer, progress.to_json()),
                    )
            self.conn.commit()
        except pymysql.err.MySQLError as exc:
            self.conn.rollback()
            raise ApplyError(f"the target refused a row: {describe_error(exc)}") from exc
        self.rows += len(rows)

    def _rows(self, cur: Any, rows: Sequence[RowMessage]) -> None:
        """Consecutive upserts of one table go as one multi-row statement."""
        batch: list[list[Any]] = []
        batch_table: _Table | None = None
        for row in rows:
            table = self._table(row)
            if row.kind == "DELETE":
                self._flush(cur, batch_table, batch)
                cur.execute(table.delete, table.key(row.data))
                continue
            if row.old is not None and table.key(row.old) != table.key(row.data):
                self._flush(cur, batch_table, batch)
                cur.execute(table.delete, table.key(row.old))
            if batch_table is not table:
                self._flush(cur, batch_table, batch)
                batch_table = table
            batch.append(table.values(row.data))
        self._flush(cur, batch_table, batch)

    @staticmethod
    def _flush(cur: Any, table: _Table | None, batch: list[list[Any]]) -> None:
        if table is not None and batch:
            cur.executemany(table.upsert, batch)
        batch.clear()

    def _table(self, row: RowMessage) -> _Table:
        signature = (row.table, tuple(row.types.items()))
        found = self._tables.get(signature)
        if found is None:
            generated = self._generated_columns(row.table)
            columns = {name: column_of(name, text) for name, text in row.types.items()}
            writable = tuple(name for name in columns if name not in generated)
            names = ", ".join(_quote(n) for n in writable)
            marks = ", ".join(["%s"] * len(writable))
            where = " AND ".join(f"{_quote(k)} = %s" for k in row.keys)
            found = self._tables[signature] = _Table(
                writable,
                {name: _converter(column) for name, column in columns.items()},
                row.keys,
                f"REPLACE INTO {row.table.quoted()} ({names}) VALUES ({marks})",
                f"DELETE FROM {row.table.quoted()} WHERE {where}",
            )
        return found

    def _generated_columns(self, table: TableName) -> frozenset[str]:
        found = self._generated.get(table)
        if found is None:
            with self.conn.cursor() as cur:
                cur.execute(
                    "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
                    "AND TABLE_NAME = %s AND (EXTRA LIKE '%%GENERATED%%' OR "
                    "EXTRA LIKE '%%VIRTUAL%%' OR EXTRA LIKE '%%PERSISTENT%%')",
                    (table.schema, table.table),
                )
                found = self._generated[table] = frozenset(r[0] for r in cur.fetchall())
        return found

    # --- DDL -------------------------------------------------------------------------------------

    def _ddl(self, ddl: DdlEvent) -> None:
        try:
            with self.conn.cursor() as cur:
                if ddl.schema:
                    # a schema not there yet: the statement creates it, or names tables in full
                    with contextlib.suppress(pymysql.err.OperationalError):
                        cur.execute(f"USE {_quote(ddl.schema)}")
                cur.execute(ddl.statement)
        except pymysql.err.MySQLError as exc:
            if not is_ddl_already_applied(exc, ddl.kind):
                raise ApplyError(
                    f"the target refused the DDL at {ddl.position} ({ddl.kind.value}): "
                    f"{describe_error(exc)}"
                ) from exc
            self.log.info("DDL at %s is already in the target: %s", ddl.position, exc)
        self.ddls += 1
        self._tables.clear()
        self._generated.clear()
