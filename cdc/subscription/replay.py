"""A pull consumer that replays a changefeed into a MySQL/MariaDB database (Canal's adapter).

    subscribe ─► Get ─► apply the batch: rows in one transaction, each DDL on its own ─► Ack ─┐
        ▲                                                                                    │
        └── the server died, the changefeed moved, a stale batch: subscribe again ◄──────────┘

Rows are written by key with their whole image: an insert or update is a
``REPLACE`` of the after image (an update that moved its key deletes the old
key first), a delete is a ``DELETE`` by key. So applying a table's changes
again from an earlier point, in order, ends in the same rows, and the
redelivery that at-least-once brings (every batch not acked, and some acked
since the changefeed's last checkpoint, see ``cdc.subscription``) is harmless.

A DDL is not idempotent. The consumer keeps the position of the last DDL it
applied in the target (``_cdc_pull.progress``, one row per changefeed and
client) and passes any DDL at or before it. A DDL commits implicitly, so a
crash between it and its progress row brings it again: the server's refusal
because it is already in place is recognised, as the MySQL sink does.

The target's tables must exist when the changefeed starts (create them from
the source's definitions); tables created later arrive as DDL. Values are the
canonical ones (``cdc.typeconv``), written with the target column's converter
in the MySQL sink's session settings (UTC; rows in its strict sql_mode, and a
warning meaning a changed value fails the batch before its commit; DDL in its
relaxed mode: ``cdc.sink.mysql.strict``), so they land exactly or not at all.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import pymysql

from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.schema.loader import load_table_schema
from cdc.sink.mysql.errors import describe_error, is_ddl_already_applied
from cdc.sink.mysql.strict import (
    RELAXED_SQL_MODE,
    STRICT_SQL_MODE,
    ValueChanged,
    changed_values,
    parse_warning,
    session_sql,
)
from cdc.source.connect import connect
from cdc.subscription.client import SubscriptionClient, SubscriptionRpcError
from cdc.typeconv import sink_connect_kwargs, sql_param_converter
from cdc.uri.mysql import MySQLURI

__all__ = ["PROGRESS_TABLE", "ApplyError", "Replayer", "ReplayStats", "TargetApplier"]

PROGRESS_TABLE = TableName("_cdc_pull", "progress")
#: Codes of Get / Ack / Rollback after which subscribing again helps: the server went away
#: or moved (UNAVAILABLE, DEADLINE_EXCEEDED), forgot the client (NOT_FOUND) or the batch
#: (INVALID_ARGUMENT on batch_id: a new capture's ring).
_AGAIN = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.NOT_FOUND,
}
#: Codes of Subscribe worth retrying: no capture serves the changefeed right now.
_SUBSCRIBE_AGAIN = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class ApplyError(RuntimeError):
    """The target refused a change; the message names the table or DDL and the server's
    words. Nothing of the batch was acked: fix the target and run again."""


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


@dataclass
class ReplayStats:
    """What the consumer did; ``applied`` is the position of the last change applied."""

    batches: int = 0
    rows: int = 0
    ddls: int = 0
    ddls_passed: int = 0
    subscribes: int = 0
    seen_ddl: list[str] = field(default_factory=list)
    applied: Position | None = None


@dataclass(frozen=True)
class _Table:
    """How rows of one table (as the target has it now) are written."""

    schema: TableSchema
    keys: tuple[str, ...]
    convert: dict[str, Callable[[Any], Any]]
    generated: frozenset[str]

    def statement_for(self, names: Sequence[str]) -> str:
        columns = ", ".join(_quote(n) for n in names)
        marks = ", ".join(["%s"] * len(names))
        return f"REPLACE INTO {self.schema.name.quoted()} ({columns}) VALUES ({marks})"

    @property
    def delete(self) -> str:
        where = " AND ".join(f"{_quote(k)} = %s" for k in self.keys)
        return f"DELETE FROM {self.schema.name.quoted()} WHERE {where}"


class TargetApplier:
    """One connection to the target: applies batches, keeps the DDL progress of
    ``consumer`` (``<changefeed>/<client>``)."""

    def __init__(self, target: MySQLURI, consumer: str) -> None:
        self.consumer = consumer
        self.log = get_logger(__name__, consumer=consumer)
        self.conn = connect(target, "target", **sink_connect_kwargs(), autocommit=False)
        self._tables: dict[TableName, _Table] = {}
        with self.conn.cursor() as cur:
            for statement in session_sql(strict=True):
                cur.execute(statement)
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {_quote(PROGRESS_TABLE.schema)}")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE.quoted()} ("
                "consumer VARCHAR(255) PRIMARY KEY, ddl_position TEXT, acked_position TEXT, "
                "updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)"
            )
        self.conn.commit()
        self.last_ddl = self._read_last_ddl()

    def close(self) -> None:
        self.conn.close()

    def _read_last_ddl(self) -> Position | None:
        with self.conn.cursor() as cur:
            cur.execute(
                f"SELECT ddl_position FROM {PROGRESS_TABLE.quoted()} WHERE consumer = %s",
                (self.consumer,),
            )
            row = cur.fetchone()
        self.conn.commit()
        return None if row is None or row[0] is None else Position.from_json(row[0])

    def apply(self, events: Sequence[RowChange | DdlEvent], stats: ReplayStats) -> None:
        """Rows between DDLs in one transaction each; ``ApplyError`` when refused."""
        rows: list[RowChange] = []
        for event in events:
            if isinstance(event, DdlEvent):
                self._rows(rows)
                rows = []
                self._ddl(event, stats)
            else:
                rows.append(event)
        self._rows(rows)
        stats.rows += sum(1 for e in events if isinstance(e, RowChange))
        if events:
            stats.applied = events[-1].position

    def record_acked(self, acked: Position | None) -> None:
        """What the server says is acked, beside the DDL progress (for operators)."""
        if acked is None:
            return
        with self.conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {PROGRESS_TABLE.quoted()} (consumer, acked_position) "
                "VALUES (%s, %s) ON DUPLICATE KEY UPDATE acked_position = VALUES(acked_position)",
                (self.consumer, acked.to_json()),
            )
        self.conn.commit()

    # --- rows ------------------------------------------------------------------------------------

    def _rows(self, rows: Sequence[RowChange]) -> None:
        """One transaction; the tables' schemas are read before it (reading one commits)."""
        if not rows:
            return
        tables = {}
        for row in rows:
            if row.table not in tables:
                tables[row.table] = self._table(row.table)
        try:
            with self.conn.cursor() as cur:
                for row in rows:
                    self._row(cur, row, tables[row.table])
            self.conn.commit()
        except pymysql.err.MySQLError as exc:
            self.conn.rollback()
            raise ApplyError(f"the target refused a row: {describe_error(exc)}") from exc
        except ValueChanged as exc:
            self.conn.rollback()
            raise ApplyError(f"the target would change a row: {exc}") from exc
        except ApplyError:
            self.conn.rollback()
            raise

    def _row(self, cur: Any, row: RowChange, table: _Table) -> None:
        if row.op is Op.DELETE:
            assert row.before is not None
            self._execute(cur, table.delete, self._key(table, row.before))
            return
        after = row.after
        assert after is not None
        if row.op is Op.UPDATE and row.before is not None:
            old = self._key(table, row.before)
            if old != self._key(table, after):
                self._execute(cur, table.delete, old)
        self._execute(cur, *self._upsert(table, row, after))

    @staticmethod
    def _execute(cur: Any, statement: str, params: Sequence[Any]) -> None:
        """One row statement; a warning meaning a changed value raises ``ValueChanged``."""
        cur.execute(statement, params)
        if cur.warning_count:
            count = cur.warning_count
            cur.execute("SHOW WARNINGS")
            warnings = [parse_warning(r) for r in cur.fetchall()]
            bad = changed_values(warnings)
            if bad or count > len(warnings):
                raise ValueChanged(bad, max(0, count - len(warnings)))

    @staticmethod
    def _upsert(table: _Table, row: RowChange, after: Any) -> tuple[str, list[Any]]:
        names = [n for n in after if n in table.convert]
        if len(names) + len(table.generated) < len(after):
            missing = [n for n in after if n not in table.convert and n not in table.generated]
            if missing:
                raise ApplyError(
                    f"the target's {row.table} has no column {', '.join(missing)} that the "
                    f"change at {row.position} carries; align the target's table with the "
                    "source's (a DDL the changefeed skipped?)"
                )
        return table.statement_for(names), [table.convert[n](after[n]) for n in names]

    def _key(self, table: _Table, image: Any) -> list[Any]:
        try:
            return [table.convert[k](image[k]) for k in table.keys]
        except KeyError as exc:
            raise ApplyError(
                f"a change of {table.schema.name} lacks key column {exc}; the target's key "
                f"({', '.join(table.keys)}) must be the source's"
            ) from None

    def _table(self, name: TableName) -> _Table:
        found = self._tables.get(name)
        if found is not None:
            return found
        try:
            schema = load_table_schema(self.conn, name)
        except LookupError:
            raise ApplyError(
                f"the target has no table {name}: create it from the source's definition "
                "before the changefeed starts (tables created later arrive as DDL)"
            ) from None
        finally:
            self.conn.commit()
        keys = schema.key_columns
        if not keys:
            raise ApplyError(
                f"table {name} has no primary key or NOT NULL unique key in the target, so "
                "its changes cannot be replayed by key; add the source's key"
            )
        convert = {c.name: sql_param_converter(c) for c in schema.columns if not c.generated}
        generated = frozenset(c.name for c in schema.columns if c.generated)
        found = self._tables[name] = _Table(schema, keys, convert, generated)
        return found

    # --- DDL -------------------------------------------------------------------------------------

    def _ddl(self, ddl: DdlEvent, stats: ReplayStats) -> None:
        stats.seen_ddl.append(ddl.statement)
        if self.last_ddl is not None and ddl.position.key() <= self.last_ddl.key():
            stats.ddls_passed += 1
            return
        try:
            with self.conn.cursor() as cur:
                cur.execute(f"SET SESSION sql_mode = '{RELAXED_SQL_MODE}'")
                try:
                    if ddl.schema:
                        # a schema not there yet: the statement creates it, or names tables
                        # in full
                        with contextlib.suppress(pymysql.err.OperationalError):
                            cur.execute(f"USE {_quote(ddl.schema)}")
                    cur.execute(ddl.statement)
                finally:
                    cur.execute(f"SET SESSION sql_mode = '{STRICT_SQL_MODE}'")
        except pymysql.err.MySQLError as exc:
            if not is_ddl_already_applied(exc, ddl.kind):
                raise ApplyError(
                    f"the target refused the DDL at {ddl.position} ({ddl.kind.value}): "
                    f"{describe_error(exc)}"
                ) from exc
            self.log.info("DDL at %s is already in the target: %s", ddl.position, exc)
        with self.conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {PROGRESS_TABLE.quoted()} (consumer, ddl_position) VALUES (%s, %s) "
                "ON DUPLICATE KEY UPDATE ddl_position = VALUES(ddl_position)",
                (self.consumer, ddl.position.to_json()),
            )
        self.conn.commit()
        self.last_ddl = ddl.position
        self._tables.clear()
        stats.ddls += 1


class Replayer:
    """The loop of the module docstring: ``step`` once, or ``run`` until stopped."""

    def __init__(self, client: SubscriptionClient, applier: TargetApplier) -> None:
        self.client = client
        self.applier = applier
        self.stats = ReplayStats()
        self.log = get_logger(__name__, client=client.client_id)
        self._subscribed = False

    @property
    def subscribed(self) -> bool:
        """Whether the last step left the client subscribed (else the next one subscribes)."""
        return self._subscribed

    def step(self, max_events: int = 500, wait: float = 1.0) -> int:
        """One Get, applied and acked; how many events. 0 when none came or the server
        must be found again (the next step subscribes); ``SubscriptionRpcError`` when the
        server refused for good, ``ApplyError`` when the target did."""
        if not self._subscribed:
            try:
                acked = self.client.subscribe()
            except SubscriptionRpcError as exc:
                if exc.code not in _SUBSCRIBE_AGAIN:
                    raise
                self.log.info("subscribe: %s; trying again", exc)
                return 0
            self._subscribed = True
            self.stats.subscribes += 1
            self.log.info("subscribed at %s, acked up to %s", self.client.target, acked)
        try:
            batch = self.client.get(max_events, wait)
            if not batch:
                return 0
            self.applier.apply(batch.events, self.stats)
            acked = self.client.ack(batch.batch_id)
        except SubscriptionRpcError as exc:
            stale = exc.code is grpc.StatusCode.INVALID_ARGUMENT and exc.details.startswith(
                "batch_id"
            )
            if exc.code not in _AGAIN and not stale:
                raise
            self.log.info("%s; subscribing again", exc)
            self._subscribed = False
            return 0
        self.applier.record_acked(acked)
        self.stats.batches += 1
        return len(batch)

    def run(self, stop: threading.Event, retry: float = 0.5) -> None:
        """``step`` until ``stop`` is set; waits ``retry`` seconds after a step that found
        no server."""
        while not stop.is_set():
            subscribed = self.subscribed
            if self.step() == 0 and not (subscribed and self.subscribed):
                time.sleep(retry)
