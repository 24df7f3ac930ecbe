"""A lane: one thread, one connection, one queue; it writes its rows in order.

    queue: [item s=4: 37 ops] [item s=5: 2 ops] [item s=7: 300 ops] ...
              │ take ops in order, up to max-txn-row per downstream transaction
              │ (an atomic item, one source transaction, is never split)
              ▼
    plan() ─► statements ─► Downstream.run(transaction) ─► markers of the whole items passed
      (a large group of upserts as LOAD DATA, bulk.py; refused by the downstream:
       the same transaction again as statements, and statements from then on)

After a failure (its own or another lane's) a lane writes nothing more: it
drains its queue without writing, so the driver never blocks on it, and its
unfinished markers stay unfinished, so the flushed position never passes the
failed change.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cdc.logs import ContextLogger
from cdc.sink.base import SinkError
from cdc.sink.mysql.bulk import BulkLoads
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.markers import MarkerBook
from cdc.sink.mysql.statements import RowOp, plan

__all__ = ["Lane", "LaneItem"]

_JOIN_TIMEOUT = 30.0


@dataclass(frozen=True)
class LaneItem:
    """Ops for one lane from one ``write_rows`` call (tag ``seq``); ``atomic`` items
    (a whole source transaction) go into one downstream transaction."""

    ops: list[RowOp]
    seq: int
    atomic: bool = False


class Lane:
    """One worker: a thread writing its queue's items to its own connection."""

    def __init__(
        self,
        index: int,
        downstream: Downstream,
        book: MarkerBook,
        *,
        max_rows: int,
        queue_depth: int,
        failed: Callable[[], bool],
        fail: Callable[[SinkError], None],
        log: ContextLogger,
        loads: BulkLoads | None = None,
    ) -> None:
        self.index = index
        self._downstream = downstream
        self._book = book
        self._max_rows = max_rows
        self._loads = loads
        self._queue: queue.Queue[LaneItem | None] = queue.Queue(maxsize=queue_depth)
        self._failed = failed
        self._fail = fail
        self._log = log
        self._thread = threading.Thread(
            target=self._run, name=f"mysql-sink-lane-{index}", daemon=True
        )
        self._thread.start()

    def put(self, item: LaneItem) -> None:
        """Queues ``item``; waits while the queue is full (back pressure)."""
        self._book.enqueued(self.index, item.seq)
        self._queue.put(item)

    def stop(self) -> None:
        """Asks the thread to end after its current transaction and waits for it."""
        self._queue.put(None)
        self._thread.join(_JOIN_TIMEOUT)
        if self._thread.is_alive():
            self._log.warning("lane %d did not stop within %.0fs", self.index, _JOIN_TIMEOUT)
        self._downstream.close()

    def _run(self) -> None:
        buffer: deque[LaneItem] = deque()
        buffered = 0
        stopping = False
        while not stopping or buffer:
            if not buffer:
                item = self._queue.get()
                if item is None:
                    break
                buffer.append(item)
                buffered = len(item.ops)
            while buffered < self._max_rows and not stopping:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                buffer.append(item)
                buffered += len(item.ops)
            ops, done = self._take(buffer)
            buffered -= len(ops)
            if stopping or self._failed():
                buffer.clear()
                buffered = 0
                continue
            try:
                self._write(ops)
            except SinkError as exc:
                first, last = ops[0].position, ops[-1].position
                where = f"at {first}" if first == last else f"at positions {first} .. {last}"
                self._fail(
                    SinkError(
                        f"lane {self.index}: writing {len(ops)} row change(s) {where} failed: "
                        f"{exc.reason}",
                        exc.statement,
                    )
                )
                continue
            except Exception as exc:  # a bug must fail the sink, not kill silently
                self._log.exception("lane %d failed unexpectedly", self.index)
                self._fail(SinkError(f"lane {self.index} failed unexpectedly: {exc!r}"))
                continue
            self._book.passed(self.index, done)

    def _write(self, ops: list[RowOp]) -> None:
        """Writes ``ops`` in one downstream transaction, large upsert groups as loads
        while the downstream takes them."""
        loads = self._loads
        if loads is None or not loads.active:
            self._downstream.run(plan(ops, self._max_rows), transaction=True)
            return
        try:
            self._downstream.run(plan(ops, self._max_rows, loads), transaction=True)
        except SinkError as exc:
            # refused: nothing of the transaction was committed (the connection is gone)
            if not loads.refused(exc):
                raise
            self._downstream.run(plan(ops, self._max_rows), transaction=True)

    def _take(self, buffer: deque[LaneItem]) -> tuple[list[RowOp], int]:
        """The ops of the next downstream transaction and how many whole items they finish."""
        ops: list[RowOp] = []
        done = 0
        while buffer:
            item = buffer[0]
            room = self._max_rows - len(ops)
            if len(item.ops) <= room or (item.atomic and not ops):
                ops.extend(item.ops)
                buffer.popleft()
                done += 1
            elif item.atomic:
                break
            else:
                ops.extend(item.ops[:room])
                buffer[0] = LaneItem(item.ops[room:], item.seq)
            if len(ops) >= self._max_rows:
                break
        return ops, done
