"""The MySQL / MariaDB sink: row changes as idempotent, batched, parallel writes.

    write_rows(changes)
      1. each change -> key operations (statements.py): upsert / delete by key,
         a key-changing UPDATE = delete old key + upsert new row
      2. each operation -> a lane by hash(table, key) (routing.py), text key parts
         folded by their collation so that spellings of one row meet (keyfold.py);
         a table with another unique key -> one lane by table; transaction-atomicity
         -> lane 0
      3. per lane one item tagged with this call's marker number (markers.py)
    lanes (lanes.py), each a thread with its own connection:
      4. up to max-txn-row operations per downstream transaction, planned into
         one DELETE ... IN (...) and one multi-row REPLACE per table; from
         load-data-rows upserts of a table on, one LOAD DATA LOCAL INFILE ...
         REPLACE of them instead (bulk.py)
      5. transient errors: reconnect, replay the transaction (downstream.py)
      6. strict sql_mode, warnings read: a value the downstream would change fails
         the sink before the commit (strict.py)
    flushed = the position of the lowest marker every lane has passed
    apply_ddl: flush, then the DDL with its database selected (ddl.py)

Guarantees: one row's changes keep their order (same lane, in queue order);
after a crash, replaying from the last flushed position converges (every write
is by key and complete); a permanent error fails the sink, after which every
call raises that same error and nothing more is written (other lanes stop
before their next transaction; what they had already written is rewritten on
replay), and ``flushed`` never passes the failed change.

``transaction-atomicity=true``: the rows of one source transaction (same
``txn_id``, else same position) are written in one downstream transaction, so
readers of the downstream never see half of it. The price: all changes go
down a single lane (worker-count is ignored; rows of different keys can no
longer be spread without giving up per-key order), so throughput is that of
one connection. Whole transactions are still batched together up to
max-txn-row rows; a larger transaction is one downstream transaction of its
own. A transaction is complete when a change of another transaction
arrives, or at ``flush`` / ``apply_ddl``. Snapshot reads (op READ) are not
transactions and are batched freely.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from cdc.logs import get_logger
from cdc.model.events import DdlEvent, Op, RowChange
from cdc.model.position import Position
from cdc.model.schema import TableName, TableSchema
from cdc.sink.base import SchemaLookup, Sink, SinkError
from cdc.sink.mysql.bulk import BulkLoads
from cdc.sink.mysql.ddl import ddl_statements
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.keyfold import KeyFolds
from cdc.sink.mysql.lanes import Lane, LaneItem
from cdc.sink.mysql.markers import MarkerBook
from cdc.sink.mysql.options import MySQLSinkOptions
from cdc.sink.mysql.routing import lane_for
from cdc.sink.mysql.statements import ColumnsAt, RowOp, TableWriter
from cdc.sink.mysql.uri import MySQLSinkURI

__all__ = ["MySQLSink"]


class MySQLSink(Sink):
    """Writes a changefeed into a MySQL or MariaDB database (see the module docstring).

    Opens one connection at once (a wrong address or password fails here with
    a ``SinkError``; an unreachable server is retried up to
    ``options.retry_timeout``), then one per lane as the lanes start writing.
    """

    def __init__(
        self,
        uri: MySQLSinkURI,
        schemas: SchemaLookup,
        changefeed_id: str,
        options: MySQLSinkOptions | None = None,
    ) -> None:
        if not isinstance(uri, MySQLSinkURI):
            raise TypeError(f"MySQLSink needs a MySQLSinkURI, not {type(uri).__name__}")
        self._uri = uri
        self._schemas = schemas
        self._options = options or MySQLSinkOptions()
        self._log = get_logger(__name__, changefeed=changefeed_id, sink="mysql")
        self._atomic = uri.transaction_atomicity
        lanes = 1 if self._atomic else uri.worker_count
        if self._atomic and uri.worker_count > 1:
            self._log.info(
                "transaction-atomicity=true: writing through one lane (worker-count %d unused)",
                uri.worker_count,
            )
        self._stop = threading.Event()
        self._failure: SinkError | None = None
        self._failure_lock = threading.Lock()
        self._book = MarkerBook(lanes)
        loads = BulkLoads(uri.load_data_rows, self._log) if uri.load_data_rows > 0 else None
        self._writers: dict[TableName, TableWriter] = {}
        self._open_txn: list[RowOp] = []
        self._open_txn_key: object = None
        # DDL replays the source's own statements in the relaxed sql_mode (strict.py).
        self._ddl = Downstream(
            uri.connection,
            self._options,
            self._log.bind(lane="ddl"),
            self._stop,
            read_timeout=None,
            strict=False,
        )
        self._ddl.check()
        self._folds = KeyFolds(self._weights_query)
        self._lanes = [
            Lane(
                index,
                Downstream(
                    uri.connection,
                    self._options,
                    self._log.bind(lane=index),
                    self._stop,
                    read_timeout=self._options.read_timeout,
                    local_infile=loads is not None,
                ),
                self._book,
                max_rows=uri.max_txn_row,
                queue_depth=self._options.queue_depth,
                failed=self._is_failed,
                fail=self._fail,
                log=self._log.bind(lane=index),
                loads=loads,
            )
            for index in range(lanes)
        ]
        self._closed = False
        self._log.info(
            "MySQL sink open: %s, %d lane(s), max-txn-row %d, %s, %s",
            uri.masked,
            lanes,
            uri.max_txn_row,
            "upserts: REPLACE"
            if uri.safe_mode
            else "upserts: INSERT ... ON DUPLICATE KEY UPDATE "
            "(REPLACE for tables with another unique key)",
            f"LOAD DATA from {uri.load_data_rows} REPLACE upserts of a table"
            if loads is not None
            else "no LOAD DATA",
        )

    # --- failure ---------------------------------------------------------------------------------

    def _is_failed(self) -> bool:
        return self._failure is not None or self._stop.is_set()

    def _fail(self, error: SinkError) -> None:
        with self._failure_lock:
            if self._failure is not None or self._stop.is_set():
                return
            self._failure = error
        self._log.error("sink failed: %s", error)
        self._book.wake()

    def _check(self) -> None:
        if self._failure is not None:
            raise self._failure
        if self._closed:
            raise SinkError("the MySQL sink is closed")

    @property
    def failure(self) -> SinkError | None:
        """The permanent error the sink failed with, if any."""
        return self._failure

    # --- rows ------------------------------------------------------------------------------------

    def _writer(self, table: TableName) -> TableWriter:
        try:
            schema = self._schemas(table)
        except LookupError as exc:
            raise SinkError(f"no schema known for table {table}: {exc}") from None
        if not isinstance(schema, TableSchema):
            raise SinkError(f"the schema lookup gave {type(schema).__name__} for {table}")
        writer = self._writers.get(table)
        if writer is None or (writer.schema is not schema and writer.schema != schema):
            writer = TableWriter(schema, safe_mode=self._uri.safe_mode, folds=self._folds)
            self._writers[table] = writer
        return writer

    def _weights_query(self, sql: str, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """A query of ``KeyFolds`` on a connection of its own, closed after it (the DDL
        session may be busy in another thread)."""
        session = Downstream(
            self._uri.connection,
            self._options,
            self._log.bind(lane="weights"),
            self._stop,
            read_timeout=self._options.read_timeout,
            strict=False,
        )
        try:
            return session.fetch(sql, args, "reading the weights of a key column's collation")
        finally:
            session.close()

    def _ops(self, changes: Sequence[RowChange], counts: list[int] | None = None) -> list[RowOp]:
        """The key operations of ``changes``, in order (``counts`` gets the number per
        change); raises before anything is queued."""
        writers: dict[TableName, TableWriter] = {}
        ops: list[RowOp] = []
        # the last change's table and column order: a transaction's rows share both objects
        table: TableName | None = None
        writer: TableWriter
        names: tuple[str, ...] | None = None
        at: ColumnsAt | None = None
        for change in changes:
            if not isinstance(change, RowChange):
                raise SinkError(f"write_rows takes RowChange objects, not {change!r:.80}")
            if change.table is not table:
                table = change.table
                known = writers.get(table)
                writer = writers[table] = self._writer(table) if known is None else known
                names = None
            decoded = change.decoded_values()
            if decoded is None:
                added = _image_ops(writer, change, ops)
            else:
                if decoded[0] is not names:
                    names = decoded[0]
                    at = writer.columns_at(names)
                if at is None:
                    added = _image_ops(writer, change, ops)
                else:
                    added = _value_ops(
                        writer, at, change.op, decoded[1], decoded[2], change.position, ops
                    )
            if counts is not None:
                counts.append(added)
        return ops

    def write_rows(self, changes: Sequence[RowChange]) -> None:
        """Hands ``changes`` to the lanes; returns once they are queued (not written).

        Raises the sink's ``SinkError`` once it has failed, and a new one for a
        change it cannot write at all (no key, unknown column, unwritable value);
        in that case nothing of this call is written.
        """
        self._check()
        if not changes:
            return
        counts: list[int] | None = [] if self._atomic else None
        try:
            ops = self._ops(changes, counts)
        except SinkError as exc:
            self._fail(exc)
            raise
        seq = self._book.next_seq()
        if counts is not None:
            self._dispatch_atomic(changes, ops, counts, seq)
        else:
            self._dispatch(ops, seq)
        note = self._book.note
        for change in changes:
            note(change.position)
        self._book.publish(seq)

    def _dispatch(self, ops: list[RowOp], seq: int) -> None:
        lanes = len(self._lanes)
        if lanes == 1:
            self._lanes[0].put(LaneItem(ops, seq))
            return
        per_lane: list[list[RowOp]] = [[] for _ in range(lanes)]
        for op in ops:
            writer = op.writer
            folded = None if writer.serial else op.folded
            parts = writer.lane_parts
            if parts is not None and folded is not None:
                folded = tuple(folded[i] for i in parts) or None
            per_lane[lane_for(writer.name, folded, lanes)].append(op)
        for lane, lane_ops in zip(self._lanes, per_lane, strict=True):
            if lane_ops:
                lane.put(LaneItem(lane_ops, seq))

    def _dispatch_atomic(
        self, changes: Sequence[RowChange], ops: list[RowOp], counts: list[int], seq: int
    ) -> None:
        """Each source transaction as one atomic item, queued once a change of another
        transaction (or a snapshot read, or a flush) shows it is complete."""
        lane = self._lanes[0]
        loose: list[RowOp] = []
        index = 0
        for change, count in zip(changes, counts, strict=True):
            change_ops = ops[index : index + count]
            index += count
            if change.op is Op.READ:
                self._queue_open_txn(seq)
                loose.extend(change_ops)
                continue
            txn = change.txn_id if change.txn_id is not None else change.position.key()
            if self._open_txn and txn != self._open_txn_key:
                self._queue_open_txn(seq)
            if loose:
                lane.put(LaneItem(loose, seq))
                loose = []
            self._open_txn_key = txn
            self._open_txn.extend(change_ops)
        if loose:
            lane.put(LaneItem(loose, seq))

    def _queue_open_txn(self, seq: int) -> None:
        if self._open_txn:
            self._lanes[0].put(LaneItem(self._open_txn, seq, atomic=True))
        self._open_txn = []
        self._open_txn_key = None

    # --- flush, DDL, close ------------------------------------------------------------------

    def flush(self) -> Position | None:
        """Blocks until every change handed in is written; returns the last one's position."""
        self._check()
        seq = self._book.next_seq()
        if self._open_txn:
            self._queue_open_txn(seq)
        self._book.close_group()
        self._book.publish(seq)
        self._book.wait(seq, self._is_failed)
        self._check()
        return self._book.flushed()

    @property
    def flushed(self) -> Position | None:
        """The highest position with every change at or before it written (min over lanes)."""
        return self._book.flushed()

    def written_mark(self) -> int | None:
        """The marker of the last call: its items, and every earlier one's, are queued.
        None while a source transaction is held back whole (``transaction-atomicity``:
        it is queued by the next call, under that call's marker)."""
        return None if self._open_txn else self._book.published

    def durable_mark(self) -> int | None:
        """The newest marker every lane has passed (never one past a failed lane's rows)."""
        return self._book.safe()

    def apply_ddl(self, ddl: DdlEvent) -> None:
        """Writes every earlier row, then runs ``ddl`` downstream (see ``ddl.py``)."""
        if not isinstance(ddl, DdlEvent):
            raise SinkError(f"apply_ddl takes a DdlEvent, not {ddl!r:.80}")
        self.flush()
        log = self._log.bind(ddl_position=str(ddl.position))
        try:
            self._ddl.run(ddl_statements(ddl, log), transaction=False)
        except SinkError as exc:
            error = SinkError(f"DDL at {ddl.position} failed: {exc.reason}", exc.statement)
            self._fail(error)
            raise error from None
        for table in ddl.tables:
            self._writers.pop(table, None)
        seq = self._book.next_seq()
        self._book.set_position(ddl.position)
        self._book.publish(seq)
        log.info("DDL applied: %s", ddl.kind.value)

    def close(self) -> None:
        """Stops the lanes (queued, unwritten rows are dropped) and closes the connections."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for lane in self._lanes:
            lane.stop()
        self._ddl.close()
        self._log.info("MySQL sink closed at flushed position %s", self.flushed)


def _value_ops(
    writer: TableWriter,
    at: ColumnsAt,
    op: Op,
    before: tuple[Any, ...] | None,
    after: tuple[Any, ...] | None,
    position: Position,
    ops: list[RowOp],
) -> int:
    """Appends the operations of a decoded change from its values (``columns_at``), the
    path of every binlog row; returns how many. The op says which images are there
    (``RowChange``'s invariant), which the types cannot: hence the ignores."""
    if op is Op.DELETE:
        ops.append(writer.delete(at.key(before), position))  # type: ignore[arg-type]
        return 1
    new = at.key(after)  # type: ignore[arg-type]
    values = at.values(after)  # type: ignore[arg-type]
    if op is Op.UPDATE:
        old = at.key(before)  # type: ignore[arg-type]
        if old != new:
            ops.append(writer.delete(old, position))
            ops.append(writer.upsert_values(values, new, position))
            return 2
    ops.append(writer.upsert_values(values, new, position))
    return 1


def _image_ops(writer: TableWriter, change: RowChange, ops: list[RowOp]) -> int:
    """Appends the operations of ``change`` from its images; returns how many."""
    op, position = change.op, change.position
    if op is Op.DELETE:
        ops.append(writer.delete(writer.key_of(change.row_before, position), position))
        return 1
    after = change.row_after
    new = writer.key_of(after, position)
    if op is Op.UPDATE:
        old = writer.key_of(change.row_before, position)
        if old != new:
            ops.append(writer.delete(old, position))
            ops.append(writer.upsert(after, new, position))
            return 2
    ops.append(writer.upsert(after, new, position))
    return 1
