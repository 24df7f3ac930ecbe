"""A re-snapshot chunk into a MySQL/MariaDB table whose binlog stream keeps writing it.

The table's stream and the re-snapshot both write the chunk's range, from different
processes and without a common order. DBLog puts a chunk's rows into the stream at its
high watermark, where they override only the keys the window did not change; here the
stream is another process's lanes, so the order comes from the downstream's own locks
instead. One downstream transaction per chunk, REPEATABLE READ:

    1. SELECT key, (predicate) FROM t WHERE <range> FOR UPDATE
         next-key locks on every row and gap of the range: from now until COMMIT the
         stream cannot insert, change or delete a row of the range (its lane waits; a
         lock wait timeout or deadlock is a transient error it retries)
    2. the source window (``cdc.snapshot.repair``): low watermark, SELECT, high
       watermark, the keys the binlog changed in between ("touched"), and the source
       table's facts (engine, collations, unique keys; ``cdc.schema.tablefacts``)
    3. the checks of ``repaircheck`` on both sides' facts (the downstream's read under
       the metadata lock 1 holds): InnoDB downstream, no unique key but the row key,
       each key column's charset and collation equal on both sides. One failing fails
       the chunk, and with it the re-snapshot, with the reason: nothing is written
    4. DELETE the downstream rows read in 1 that the predicate selects (all of them
       without one) whose key the source has no row for, except touched keys
    5. REPLACE the selected source rows, except touched keys
    6. ask the source which of the keys 5 wrote that the downstream did not hold in 1 it
       still holds (``held``), and DELETE the others
    7. COMMIT

Why nothing is lost (a key k of the range, S(p) the source's row at position p):

* k not touched: the source had no change of k in (low, high], so the SELECT saw
  S(high), and 4/5 write exactly that. Every change of k after high (and after low) was
  binlogged after the lock was taken in 1, so the stream writes it after 7, in order.
  Changes of k at or before low that the stream had not written yet (it lags) come after
  7 as well, each a full row image, in order, ending with k's last one: the downstream
  ends at the source's row either way.
* ...except a deletion of a k the downstream lacked at 1 (the very rows a re-snapshot
  brings back): a DELETE of a row that is not there waits for no lock (there is no
  record to lock, and gap locks hold back inserts only), so the stream may apply it
  before 5 writes k, and k would come back. Hence 6: once 5 holds k's record lock, a
  deletion after 6's read waits for 7, and one before it is seen by 6, which deletes k.
* k touched: nothing of this chunk writes k. Its changes after low are all written by
  the stream after 7, the last of them carrying k's current row, or its absence.
* A row inserted at the source after the SELECT (even after high) is not deleted by 4:
  4 deletes only rows the downstream had at 1, and the stream cannot have written k's
  insert before 7.

With a predicate, a downstream row is deleted only when the source has no row of that
key at all: a row that exists but that the predicate leaves out (say, its downstream
copy was damaged into matching) is left as it is, outside the work asked for.

What the lock costs: the stream's writes of the range wait for one chunk's source read
and write (a lane holding other rows meanwhile); keep chunks small on a busy table.

What the argument takes for granted, and 3 checks: the locks exist (InnoDB); "the
range" is the same set of rows on both sides (the chunk's bounds are in the source's
order, ``key >= lo AND key < hi`` is evaluated in the downstream's: equal collations);
only the row key makes rows clash (a REPLACE removes every row clashing on any unique
key, outside the range and the predicate).

Keys are the same row when the downstream's collation says so
(``repaircheck.key_matcher``): compared in Python where that is exact (numbers, binary
strings, ``*_bin``; trailing spaces dropped under PAD SPACE), so ``'A'`` downstream is
removed when the source holds only ``'a'`` in a case-sensitive key; under a linguistic
collation (``_ci``, ``_ai``) a downstream row is removed only when the downstream itself
finds none of the source's keys equal to it (``key IN (...)``, under the range's locks).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any

import pymysql

from cdc.logs import get_logger
from cdc.model.position import Position
from cdc.model.schema import TableSchema
from cdc.schema.tablefacts import read_table_facts
from cdc.sink.base import SinkError
from cdc.sink.chunks import RangeRepairer
from cdc.sink.mysql.errors import describe_error, error_code
from cdc.sink.mysql.repaircheck import key_matcher, refusal
from cdc.sink.mysql.statements import (
    Kind,
    RowOp,
    Statement,
    TableWriter,
    literal,
    plan,
    row_literal,
)
from cdc.sink.mysql.strict import changed_values, parse_warning, session_sql
from cdc.sink.mysql.uri import MySQLSinkURI
from cdc.snapshot.chunk import SnapshotChunk
from cdc.snapshot.repair import RepairOutcome, RepairRead
from cdc.source.connect import connect
from cdc.typeconv import row_converter, select_list, sink_connect_kwargs, snapshot_connect_kwargs

__all__ = ["ATTEMPTS", "RangeRepair"]

#: Tries of one chunk's transaction that the downstream ends in a deadlock or lock wait
#: timeout (the stream's lane holding a row of the range).
ATTEMPTS = 5
_RETRY_CODES = frozenset({1205, 1213})
_ROWS_PER_STATEMENT = 256
_MAX_LIST_CHARS = 1 << 19
#: Below MariaDB's in_predicate_conversion_threshold (1000): a longer IN list becomes a
#: subquery over a table value constructor, whose column need not compare in the key
#: column's collation.
_MAX_LIST_ITEMS = 500


class RangeRepair(RangeRepairer):
    """Writes re-snapshot chunks of one changefeed; one connection, used by one thread."""

    def __init__(self, uri: MySQLSinkURI, changefeed_id: str) -> None:
        self._uri = uri
        self._log = get_logger(__name__, changefeed=changefeed_id)
        self._conn: Any | None = None

    def _connection(self) -> Any:
        if self._conn is None:
            kwargs = dict(sink_connect_kwargs())
            kwargs["conv"] = snapshot_connect_kwargs()["conv"]
            conn = connect(self._uri.connection, what="sink", autocommit=False, **kwargs)
            try:
                with conn.cursor() as cur:
                    for sql in session_sql(strict=True):
                        cur.execute(sql)
                    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def repair(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        predicate_sql: str | None,
        read: Callable[[], RepairRead],
        held: Callable[[Sequence[tuple[Any, ...]]], Sequence[bool]],
    ) -> RepairOutcome:
        """The chunk's transaction (see the module doc), tried again after a deadlock or a
        lock wait timeout; ``SinkError`` for anything else the downstream refuses."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return self._once(schema, chunk, predicate_sql, read, held)
            except pymysql.err.MySQLError as exc:
                self.close()
                if error_code(exc) not in _RETRY_CODES or attempt == ATTEMPTS:
                    raise SinkError(
                        f"re-snapshot chunk {chunk.chunk_id}: {describe_error(exc)}",
                        f"re-snapshot of {schema.name}",
                    ) from exc
                self._log.warning(
                    "re-snapshot chunk %s: %s; trying again (%d of %d)",
                    chunk.chunk_id,
                    describe_error(exc),
                    attempt + 1,
                    ATTEMPTS,
                )
                time.sleep(0.2 * attempt)
            except BaseException:
                self.close()
                raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _once(
        self,
        schema: TableSchema,
        chunk: SnapshotChunk,
        predicate_sql: str | None,
        read: Callable[[], RepairRead],
        source_holds: Callable[[Sequence[tuple[Any, ...]]], Sequence[bool]],
    ) -> RepairOutcome:
        conn = self._connection()
        conn.begin()
        held = self._lock(conn, schema, chunk, predicate_sql)
        # under the metadata lock step 1 took: what this transaction writes under
        downstream = read_table_facts(conn, schema.name)
        source = read()
        reason = refusal(
            schema.name, schema.key_columns, source.facts, downstream, chunk.key_column
        )
        if reason is not None or downstream is None:
            raise SinkError(f"refused, nothing written: {reason}", f"re-snapshot of {schema.name}")
        canonical, exact = key_matcher(schema.key_columns, downstream)
        touched = {canonical(k) for k in source.touched}
        theirs = {canonical(k) for k in source.keys} | touched
        writer = TableWriter(schema, safe_mode=True)
        gone = [key for key in held if canonical(key) not in theirs]
        if gone and not exact:
            # a linguistic collation: the downstream alone knows which keys are equal
            everyone = source.keys | source.touched
            equal = self._same_rows(conn, writer, chunk, gone, everyone, source.high)
            same = {canonical(k) for k in equal}
            gone = [key for key in gone if canonical(key) not in same]
        ops: list[RowOp] = [writer.delete(key, source.high) for key in gone]
        deleted = len(ops)
        left = 0
        for row in source.rows:
            key = writer.key_of(row, source.high)
            if canonical(key) in touched:
                left += 1
                continue
            ops.append(writer.upsert(row, key, source.high))
        self._run(conn, plan(ops, _ROWS_PER_STATEMENT))
        ours = {canonical(k) for k in held}
        brought = [op.key for op in ops if op.kind is Kind.UPSERT and canonical(op.key) not in ours]
        answers = source_holds(brought) if brought else []
        vanished = [key for key, there in zip(brought, answers, strict=True) if not there]
        if vanished:
            again = [writer.delete(key, source.high) for key in vanished]
            self._run(conn, plan(again, _ROWS_PER_STATEMENT))
        conn.commit()
        written = len(ops) - deleted - len(vanished)
        self._log.info(
            "re-snapshot chunk %s: %d row(s) written, %d removed, %d left to the stream "
            "(changed between %s and %s), %d deleted at the source while written",
            chunk.chunk_id,
            written,
            deleted,
            left,
            source.low,
            source.high,
            len(vanished),
        )
        return RepairOutcome(source, written, deleted + len(vanished), left)

    def _same_rows(
        self,
        conn: Any,
        writer: TableWriter,
        chunk: SnapshotChunk,
        held: Sequence[tuple[Any, ...]],
        theirs: Collection[tuple[Any, ...]],
        at: Position,
    ) -> list[tuple[Any, ...]]:
        """Which of the downstream's ``held`` keys its key columns' collations call equal
        to one of the source's keys ``theirs``: the downstream's own ``key IN (...)``,
        the source's keys in batches; the range is locked already (read again as held)."""
        schema = writer.schema
        columns = [schema.column(k) for k in schema.key_columns]
        names = select_list(columns).replace("%", "%%")
        where, params = chunk.where_clause()
        single = len(columns) == 1

        def values(keys: Iterable[tuple[Any, ...]]) -> Iterator[str]:
            for key in keys:
                converted = writer.delete(key, at).params
                text = literal(converted[0]) if single else row_literal(converted)
                yield text.replace("%", "%%")

        quoted = ", ".join(f"`{n.replace('`', '``')}`" for n in schema.key_columns)
        target = quoted if single else f"({quoted})"
        table = schema.name.quoted().replace("%", "%%")
        convert = row_converter(columns, "select")
        found: list[tuple[Any, ...]] = []
        everyone = list(_batches(list(values(theirs))))
        with conn.cursor() as cur:
            for mine in _batches(list(values(held))):
                head = (
                    f"SELECT {names} FROM {table} WHERE ({where}) "
                    f"AND {target} IN ({','.join(mine)}) AND {target} IN ("
                )
                for batch in everyone:
                    cur.execute(head + ",".join(batch) + ") FOR UPDATE", params)
                    found.extend(convert(row) for row in cur.fetchall())
        return found

    def _lock(
        self, conn: Any, schema: TableSchema, chunk: SnapshotChunk, predicate_sql: str | None
    ) -> list[tuple[Any, ...]]:
        """Step 1: locks the range; the keys of the downstream rows the predicate selects."""
        columns = [schema.column(k) for k in schema.key_columns]
        where, params = chunk.where_clause()
        selected = "1" if predicate_sql is None else f"({predicate_sql.replace('%', '%%')})"
        sql = (
            f"SELECT {select_list(columns).replace('%', '%%')}, {selected} "
            f"FROM {schema.name.quoted().replace('%', '%%')} WHERE {where} FOR UPDATE"
        )
        convert = row_converter(columns, "select")
        with conn.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
        # NULL (unknown) is not a match: such a row is kept
        return [convert(row[:-1]) for row in rows if row[-1]]

    def _run(self, conn: Any, statements: Sequence[Statement]) -> None:
        with conn.cursor() as cur:
            for statement in statements:
                if statement.enum_errors:
                    raise SinkError(
                        "a re-snapshot writes no invalid ENUM value ''; the rows of this "
                        "range hold one: leave the range out (--where)",
                        statement.description,
                    )
                cur.execute(statement.sql)
                if cur.warning_count:
                    cur.execute("SHOW WARNINGS")
                    bad = changed_values([parse_warning(w) for w in cur.fetchall()])
                    if bad:
                        raise SinkError(
                            f"the downstream changed a value: {bad[0]}", statement.description
                        )


def _batches(texts: list[str]) -> Iterator[list[str]]:
    """``texts`` in lists of at most ``_MAX_LIST_ITEMS`` items and ~``_MAX_LIST_CHARS``."""
    batch: list[str] = []
    size = 0
    for text in texts:
        if batch and (len(batch) >= _MAX_LIST_ITEMS or size + len(text) > _MAX_LIST_CHARS):
            yield batch
            batch, size = [], 0
        batch.append(text)
        size += len(text) + 1
    if batch:
        yield batch
