"""The puller: one source's binlog as a stream of committed changes, DDL and resolved marks.

    BinLogStreamReader (one unique server_id)
      │  GTID / BEGIN ........ a transaction opens
      │  TableMapEvent ....... RowDecoder learns the table (skipped for filtered tables)
      │  Write/Update/Delete . rows decoded to canonical values, buffered
      │  XID / COMMIT ........ the buffered rows come out, all at the commit position,
      │                        then Resolved(commit position): the transaction is whole
      │  Query (DDL) ......... DdlEvent at its own position (a DDL commits implicitly)
      │  Query (DML), ........ rows logged as a statement (binlog_format STATEMENT or
      │  Execute_load_query    MIXED in the writing session): ChangesUnavailable if it
      │                        may write a watched table, since skipping it loses rows
      │                        (see `statements.classify_statement`); otherwise part of
      │                        its transaction, which goes on
      │  Heartbeat ........... Resolved(position) while the watched tables are idle
      ▼
    Puller.events() -> RowChange | DdlEvent | Resolved, in binlog order

Why rows carry their transaction's commit position: a transaction is atomic,
and the only positions a reader can resume from are transaction boundaries.
So a position handed out is always a place the stream can restart at, and
"deliver a change only if it is after watermark w" (the snapshot hand-off)
compares commit positions with watermarks, which are boundaries too.

Reconnects: a lost connection (server restart, KILL of the dump thread,
network) drops the open transaction's buffer and reopens the stream at the
last commit handed out, after a backoff. Nothing handed out is repeated and
nothing committed is skipped within one `events()` run.

Another server. Every binlog connection (the puller's own and the library's
automatic reconnects) first asks the server who it is, and raises
``SourceSwitched`` when the source URI reaches another server than
``config.server``: a file:offset of another server means nothing. A start
read on an earlier source of the changefeed (``Position.gen`` below the
server's generation, after ``cdc.changefeed.failover`` followed a failover) is
resumed by its GTID set; every position read is stamped with the server's
generation.

Lag. A resolved mark carries the time the source's state at its position
was current: after a heartbeat, which proves the reader holds everything the
server had, the time it arrived; after a commit, its timestamp (whole seconds
of the source's clock) or, when later, the last heartbeat's arrival (the
commit came after it).

Decoding is skipped for tables the filter rejects: their table-map events are
refused before parsing, so their row events are never decoded (see
`_TableGate`).

With a decode pool (``PullerConfig.decode``) a reading thread reads ahead,
hands each committed transaction's row-event bytes to worker processes and
queues everything in binlog order; ``events()`` yields the same items in the
same order (``cdc.binlog.readahead``). Reconnects then resume at the last
commit read, which is also after everything handed out or queued.
"""

from __future__ import annotations

import random
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (
    ExecuteLoadQueryEvent,
    GtidEvent,
    HeartbeatLogEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    XidEvent,
)
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc.binlog.decode_pool import DecodePool
from cdc.binlog.readahead import RawTxn, ReadAhead, ReadAheadClosed, Resolved
from cdc.binlog.rowchanges import TableShape, row_change, shape_of
from cdc.binlog.rowdecode import BinlogDecodeError, RowDecoder, rows_body, table_map_body
from cdc.binlog.statements import (
    StatementVerdict,
    TemporaryTables,
    classify_statement,
    statement_shape,
)
from cdc.filter.table_filter import is_system_schema
from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.gtid import GtidSet
from cdc.model.position import Position
from cdc.schema.ddl import parse_ddl
from cdc.source.checks import (
    ChangesUnavailable,
    SourceSwitched,
    check_binlog_settings,
    check_position_available,
)
from cdc.source.connect import connect
from cdc.source.flavor import ServerInfo, server_identity
from cdc.uri.mysql import MySQLURI

SERVER_ID_RANGE = (1 << 20, (1 << 31) - 1)
_NON_DDL_PREFIXES = ("BEGIN", "COMMIT", "XA ", "SAVEPOINT", "ROLLBACK", "FLUSH", "SET ", "#")


class TableMatcher(Protocol):
    """Which tables a puller decodes and watches: a changefeed's ``TableFilter``, or the
    changing set of tables a capture's shared reader holds (asked at every table map)."""

    def matches(self, schema: str, table: str) -> bool: ...

    def matches_schema(self, schema: str) -> bool: ...


@dataclass(frozen=True)
class PullerConfig:
    """Where and what to read. `start` is a commit boundary: FILE:OFFSET or a GTID set."""

    source: MySQLURI
    server: ServerInfo
    start: Position | GtidSet
    tables: TableMatcher
    server_id: int = field(default_factory=lambda: random.randint(*SERVER_ID_RANGE))
    heartbeat_interval: float = 0.5
    """The replication heartbeat period asked of the server: an idle source proves every
    half second that nothing is unread, which bounds the lag shown for it."""
    backoff_initial: float = 0.2
    backoff_max: float = 10.0
    max_retries: int = 30
    rows: bool = True
    """False: DDL and positions only (the owner's DDL puller); row events are not
    even parsed, so following DDL costs the binlog's bytes and nothing per row."""
    decode: DecodePool | None = None
    """Worker processes that decode the rows (``cdc.binlog.readahead``); None: the
    thread iterating ``events()`` decodes them."""


class PullerError(RuntimeError):
    """The binlog cannot be read any further; the message says why and what to do."""


class _TableGate:
    """`only_tables`/`only_schemas` containers that apply our TableFilter to the pair.

    python-mysql-replication checks `table in only_tables` and then `schema in
    only_schemas` for each table map, always in that order; the first check
    remembers the table so the second can judge the (schema, table) pair. A
    refused table map is never parsed, and row events of an unknown table id
    are skipped undecoded.
    """

    def __init__(self, tables: TableMatcher, *, rows: bool = True) -> None:
        self._filter = tables
        self._rows = rows
        self._table = ""
        self.tables = _Remember(self)
        self.schemas = _Judge(self)


class _Remember:
    def __init__(self, gate: _TableGate) -> None:
        self._gate = gate

    def __contains__(self, table: object) -> bool:
        self._gate._table = str(table)
        return True


class _Judge:
    def __init__(self, gate: _TableGate) -> None:
        self._gate = gate

    def __contains__(self, schema: object) -> bool:
        schema = str(schema)
        return (
            self._gate._rows
            and not is_system_schema(schema)
            and self._gate._filter.matches(schema, self._gate._table)
        )


_EVENTS = [
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    ExecuteLoadQueryEvent,
    XidEvent,
    RotateEvent,
    HeartbeatLogEvent,
    TableMapEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
]

_DDL_EVENTS = [
    e for e in _EVENTS if e not in (TableMapEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
]

_RECOVERABLE = (
    pymysql.err.OperationalError,
    pymysql.err.InterfaceError,
    ConnectionError,
    struct.error,
    OSError,
)


class _Txn:
    """The open transaction: its GTID and its decoded rows (or, read ahead for decode
    workers, its row events' bytes), until commit."""

    __slots__ = ("gtid", "raw", "rows", "size")

    def __init__(self, gtid: str | None) -> None:
        self.gtid = gtid
        self.rows: list[tuple[TableShape, Op, tuple | None, tuple | None]] = []
        self.raw: list[tuple[tuple[bytes, str], int, bytes, int]] = []
        self.size = 0


class Puller:
    """Reads one source's binlog from `config.start`; iterate `events()`."""

    def __init__(self, config: PullerConfig) -> None:
        self.config = config
        self.log = get_logger(
            __name__, source=f"{config.source.host}:{config.source.port}", reader=config.server_id
        )
        self._committed: Position | GtidSet = config.start
        self._handed: Position | GtidSet = config.start
        self._gtids: GtidSet | None = (
            config.start if isinstance(config.start, GtidSet) else (config.start.gtid)
        )
        self._stream: BinLogStreamReader | None = None
        self.decoder: RowDecoder | None = None
        self._closed = False
        self._temporary = TemporaryTables()
        self._ahead: ReadAhead | None = None
        self.reconnects = 0
        self._gen = config.server.generation
        self._current_at = 0.0
        """When a heartbeat last proved the reader holds everything the server had."""

    @property
    def committed(self) -> Position | GtidSet:
        """The boundary after the last transaction handed out: where a restart resumes."""
        return self._handed if self._ahead is not None else self._committed

    @property
    def read_position(self) -> Position | GtidSet:
        """The boundary after the last transaction read: where a reconnect resumes. With
        read-ahead it may be ahead of ``committed``."""
        return self._committed

    def close(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def check_source(self) -> None:
        """The startup checks: binlog settings, and that the start position still exists.

        Raises SourceError naming the setting or the purged file and what to do.
        """
        conn = connect(self.config.source)
        try:
            self._check_server(conn)
            check_binlog_settings(conn)
            check_position_available(conn, self.config.server, self.config.start)
        finally:
            conn.close()

    def _check_server(self, conn: Any) -> None:
        """``SourceSwitched`` unless ``conn`` reaches the server this reader was started on."""
        expected = self.config.server
        server_id, uuid = server_identity(conn, expected)
        if (server_id, uuid) != (expected.server_id, expected.uuid):
            found = f"server_id {server_id}" + (f", server_uuid {uuid}" if uuid else "")
            raise SourceSwitched(
                f"the source {self.config.source} now reaches another server ({found}) than "
                f"the one this binlog reader started on ({expected.describe()}); a binlog "
                "file:offset of another server means nothing, so the reader stops, and the "
                "changefeed resumes on the new server by GTID once it is checked"
            )

    def _connect_checked(self, **settings: Any) -> pymysql.connections.Connection:
        """The library's connections (its automatic reconnects too), each checked to reach
        the same server (``_check_server``)."""
        conn = pymysql.connect(**settings)
        try:
            self._check_server(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def events(self) -> Iterator[RowChange | DdlEvent | Resolved]:
        """Committed changes in binlog order, DDL, and resolved marks; until `close()`.

        The startup checks run first, so a bad source fails here with SourceError.
        With a decode pool, a reading thread reads ahead (bounded) and workers
        decode; what comes out is the same, in the same order.
        """
        self.check_source()
        pool = self.config.decode
        if pool is None or not self.config.rows:
            yield from self._stream_items(raw=False)
            return
        ahead = self._ahead = ReadAhead(pool)
        reading = threading.Thread(
            target=self._read_ahead, args=(ahead,), name="binlog-read-ahead", daemon=True
        )
        reading.start()
        try:
            for item in ahead.items():
                self._handed = item.position
                yield item
        finally:
            ahead.close()
            self.close()
            reading.join(30)

    def hold(self) -> None:
        """Asks a reading thread that reads ahead to stop at its next transaction
        boundary (see ``drained``); nothing to do without one."""
        if self._ahead is not None:
            self._ahead.hold()

    def drained(self) -> bool:
        """Whether what decides the rows read from here on (the ``TableMatcher``) may
        change now: the next event is read only after the caller asks for it. Always
        true without read-ahead; with it, once ``hold()`` took effect and everything read
        was handed out."""
        return self._ahead is None or self._ahead.drained()

    def _read_ahead(self, ahead: ReadAhead) -> None:
        try:
            for item in self._stream_items(raw=True):
                if isinstance(item, RawTxn):
                    ahead.put_txn(item)
                else:
                    ahead.put_event(item)
                ahead.at_boundary()
        except ReadAheadClosed:
            return
        except BaseException as exc:  # the consumer raises it where it stood
            try:
                ahead.put_event(exc)
            except ReadAheadClosed:
                return
        finally:
            ahead.finish()

    def _stream_items(self, *, raw: bool) -> Iterator[Any]:
        """The binlog from the last commit, reconnecting after recoverable errors."""
        failures = 0
        backoff = self.config.backoff_initial
        while not self._closed:
            try:
                for item in self._read_stream(raw=raw):
                    failures = 0
                    backoff = self.config.backoff_initial
                    yield item
                if self._closed:
                    return
                raise ConnectionError("the source ended the binlog stream")
            except _RECOVERABLE as exc:
                if self._closed:
                    return
                failures += 1
                if failures > self.config.max_retries:
                    raise PullerError(
                        f"binlog of {self.config.source} unreadable after {failures - 1} "
                        f"reconnects (last error: {exc}); the changefeed resumes from "
                        f"{self._committed} once the source is reachable"
                    ) from exc
                self.log.warning(
                    "binlog connection lost (%s); reconnecting from %s in %.1fs",
                    exc,
                    self._committed,
                    backoff,
                )
                self._drop_stream()
                time.sleep(backoff)
                backoff = min(backoff * 2, self.config.backoff_max)
                self.reconnects += 1

    def _drop_stream(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception as exc:  # a broken stream may fail to close
                self.log.debug("closing the broken stream: %s", exc)
            self._stream = None

    def _open(self) -> BinLogStreamReader:
        cfg = self.config
        settings: dict[str, Any] = cfg.source.connection_kwargs()
        settings["charset"] = "utf8mb4"
        gate = _TableGate(cfg.tables, rows=cfg.rows)
        kwargs: dict[str, Any] = {
            "connection_settings": settings,
            "server_id": cfg.server_id,
            "blocking": True,
            "resume_stream": True,
            "only_events": _EVENTS if cfg.rows else _DDL_EVENTS,
            "only_tables": gate.tables,
            "only_schemas": gate.schemas,
            "slave_heartbeat": cfg.heartbeat_interval,
            "freeze_schema": True,
            "pymysql_wrapper": self._connect_checked,
        }
        start = self._committed
        if isinstance(start, Position) and start.gen != self._gen:
            # Read on an earlier source (a failover): its GTID set is where to resume
            # here (check_source refused one without). Never its file:offset.
            assert start.gtid is not None
            kwargs["auto_position"] = str(start.gtid)
            kwargs["is_mariadb"] = cfg.server.flavor.value == "mariadb"
        elif isinstance(start, GtidSet):
            kwargs["auto_position"] = str(start)
            kwargs["is_mariadb"] = cfg.server.flavor.value == "mariadb"
        else:
            # MariaDB's own dump (is_mariadb=True) ignores file/offset; the
            # classic COM_BINLOG_DUMP takes them on both flavours.
            kwargs["log_file"] = start.file
            kwargs["log_pos"] = start.offset
        stream = BinLogStreamReader(**kwargs)
        self._stream = stream
        self.log.info("binlog reader opened at %s", start)
        return stream

    def _read_stream(self, *, raw: bool) -> Iterator[RowChange | DdlEvent | Resolved | RawTxn]:
        """One connection's events. ``raw``: a committed transaction comes out as its row
        events' bytes (``RawTxn``), decoded elsewhere; else as decoded row changes."""
        stream = self._open()
        decoder = self.decoder = RowDecoder()
        shapes: dict[int, tuple[object, TableShape]] = {}
        maps: dict[int, tuple[bytes, str]] = {}
        txn: _Txn | None = None
        committed = self._committed
        # a position of an earlier source names no file here: the first rotate does
        file = (
            committed.file
            if isinstance(committed, Position) and committed.gen == self._gen
            else None
        )
        for event in stream:
            if self._closed:
                return
            end = event.packet.log_pos
            if isinstance(event, RotateEvent):
                file = event.next_binlog
                # Table ids are the server's and start again when it restarts, which
                # begins a new binlog file; the library reconnects by itself and keeps
                # its map. A table map of a filtered table is never seen, so an id
                # remembered from before could name another table now and have its rows
                # decoded as that table's. Every transaction brings its own table maps.
                decoder.forget_tables()
                maps.clear()
                stream.table_map.clear()
                continue
            if isinstance(event, (MariadbGtidEvent, GtidEvent)):
                # A GTID always opens a new transaction; one still open here
                # was cut by a reconnect and is being sent again from its start.
                txn = _Txn(str(event.gtid))
                continue
            if isinstance(event, TableMapEvent):
                decoder.table_map(event)
                if raw:
                    table_id, body, dbms = table_map_body(event)
                    maps[table_id] = (body, dbms)
                continue
            if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                if txn is None:
                    txn = _Txn(None)
                if raw:
                    known = maps.get(event.table_id)
                    if known is None:
                        decoder.table(event)  # raises: a row event before its table map
                        raise BinlogDecodeError(f"no table map for table id {event.table_id}")
                    body = rows_body(event)
                    txn.raw.append((known, event.event_type, body, end))
                    txn.size += len(body)
                    continue
                table = decoder.table(event)
                cached = shapes.get(id(table))
                if cached is None or cached[0] is not table:
                    cached = shapes[id(table)] = (table, shape_of(table))
                shape = cached[1]
                op = _OPS[type(event)]
                append = txn.rows.append
                for before, after in decoder.rows(event):
                    append((shape, op, before, after))
                continue
            if isinstance(event, XidEvent):
                yield from self._commit(txn, file, end, event.timestamp, raw)
                txn = None
                self._follow(stream)
                continue
            if isinstance(event, QueryEvent):
                statement = event.query.strip()
                upper = statement[:10].upper()
                if upper.startswith("BEGIN"):
                    if txn is None:
                        txn = _Txn(None)
                    continue
                if upper.startswith("COMMIT"):
                    yield from self._commit(txn, file, end, event.timestamp, raw)
                else:
                    schema = _text(event.schema)
                    if self._statement_rows(
                        event.slave_proxy_id, statement, schema, txn, file, end
                    ):
                        # Rows of tables nobody watches: the transaction goes on.
                        txn = txn or _Txn(None)
                        continue
                    yield from self._ddl(event, statement, schema, txn, file, end)
                txn = None
                self._follow(stream)
                continue
            if isinstance(event, ExecuteLoadQueryEvent):
                statement, schema = _load_statement(event)
                self._statement_rows(event.slave_proxy_id, statement, schema, txn, file, end)
                txn = txn or _Txn(None)
                continue
            if isinstance(event, HeartbeatLogEvent) and txn is None and file is not None and end:
                # A heartbeat names the current end of the binlog; between
                # transactions that is a boundary with nothing unseen before it, and
                # the source's state there is the state now (its lag is nil).
                position = Position(file, end, self._gtids, self._gen)
                if isinstance(self._committed, GtidSet) or position > self._committed:
                    self._committed = position
                self._current_at = time.time()
                yield Resolved(self._committed, self._current_at, idle=True)

    def _follow(self, stream: BinLogStreamReader) -> None:
        """Points the library's own reconnect (on errors 2006/2013) at the last commit.

        python-mysql-replication reconnects by itself, from its last event in
        file mode (fine: the stream continues), but in GTID mode from the GTID
        set it was opened with, which would replay everything since. Keeping
        its `auto_position` at our committed set makes it resume at the
        transaction in flight; the GTID event that restarts it discards the
        partial buffer (see `_read_stream`).
        """
        if stream.auto_position is not None and self._gtids is not None:
            stream.auto_position = str(self._gtids)

    def _advance(self, txn: _Txn | None, file: str | None, end: int) -> Position:
        if txn is not None and txn.gtid is not None and self._gtids is not None:
            self._gtids = self._gtids.add(txn.gtid)
        if file is None:
            raise PullerError("binlog event before any rotate event: cannot name its position")
        position = Position(file, end, self._gtids, self._gen)
        self._committed = position
        return position

    def _commit(
        self, txn: _Txn | None, file: str | None, end: int, when: float, raw: bool
    ) -> Iterator[RowChange | Resolved | RawTxn]:
        position = self._advance(txn, file, end)
        when = max(when, self._current_at)
        if raw:
            yield (
                RawTxn(position, txn.gtid, when, txn.raw, txn.size)
                if txn is not None
                else RawTxn(position, None, when)
            )
            return
        if txn is not None:
            txn_id = txn.gtid
            for shape, op, before, after in txn.rows:
                yield row_change(shape, op, before, after, position, txn_id)
        yield Resolved(position, when)

    def _ddl(
        self,
        event: QueryEvent,
        statement: str,
        schema: str,
        txn: _Txn | None,
        file: str | None,
        end: int,
    ) -> Iterator[DdlEvent | Resolved]:
        position = self._advance(txn, file, end)
        when = max(event.timestamp, self._current_at)
        if statement.upper().startswith(_NON_DDL_PREFIXES):
            yield Resolved(position, when)
            return
        ddl = parse_ddl(statement, schema, position)
        if self._wanted(ddl):
            yield ddl
        else:
            yield Resolved(position, when)

    def _statement_rows(
        self,
        thread: int,
        statement: str,
        schema: str,
        txn: _Txn | None,
        file: str | None,
        end: int,
    ) -> bool:
        """Whether the statement changes rows; ChangesUnavailable if it may change watched ones.

        Such rows have no row event, so passing the statement by would lose them
        silently. The message names the statement's form and tables, never its values.
        """
        self._temporary.observe(thread, statement, schema)
        tables = self.config.tables
        verdict = classify_statement(
            statement,
            schema,
            self._temporary.matcher(thread, lambda t: tables.matches(t.schema, t.table)),
        )
        if verdict.refuse:
            gtid = f", GTID {txn.gtid}" if txn is not None and txn.gtid else ""
            raise ChangesUnavailable(_refusal(verdict, statement, schema, f"{file}:{end}{gtid}"))
        return verdict.rows

    def _wanted(self, ddl: DdlEvent) -> bool:
        tables = self.config.tables
        if ddl.tables:
            return any(
                not is_system_schema(t.schema) and tables.matches(t.schema, t.table)
                for t in ddl.tables
            )
        return (
            bool(ddl.schema)
            and not is_system_schema(ddl.schema)
            and tables.matches_schema(ddl.schema)
        )


def _refusal(verdict: StatementVerdict, statement: str, schema: str, where: str) -> str:
    if verdict.captured:
        names = ", ".join(str(t) for t in verdict.captured)
        copy = names
    else:
        names = "tables the statement does not show, so possibly captured ones"
        copy = "the captured tables"
    return (
        f"row changes at {where} ({verdict.verb} on {names}) were written to the binlog as an "
        f"SQL statement, not as rows: `{statement_shape(statement)}` (default schema "
        f"'{schema}'). The session that wrote them had binlog_format=STATEMENT or MIXED. They "
        "cannot be captured, and passing them by would lose them, so the changefeed stops "
        "before them. Set binlog_format=ROW for every session (SET GLOBAL binlog_format=ROW "
        "and in the server config; open sessions keep their format until they reconnect), "
        f"then create the changefeed again with snapshot mode 'initial' to copy {copy}."
    )


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value or ""


def _load_statement(event: ExecuteLoadQueryEvent) -> tuple[str, str]:
    """The LOAD DATA statement and default schema of an Execute_load_query event.

    python-mysql-replication reads only the event's fixed fields; the rest is
    laid out as in a query event: status variables, schema, NUL, statement.
    An unreadable rest gives a bare "LOAD DATA", which the classifier refuses
    as a row change on tables it cannot name.
    """
    try:
        packet = event.packet
        packet.read(event.status_vars_length)
        schema = _text(packet.read(event.schema_length))
        packet.advance(1)
        size = event.event_size - 26 - event.status_vars_length - event.schema_length - 1
        statement = _text(packet.read(size)) if size > 0 else ""
    except (struct.error, ValueError, IndexError):
        return "LOAD DATA", ""
    return (statement.strip() or "LOAD DATA"), schema


_OPS = {WriteRowsEvent: Op.CREATE, UpdateRowsEvent: Op.UPDATE, DeleteRowsEvent: Op.DELETE}
