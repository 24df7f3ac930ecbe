"""A lane: one queue, one connection; it writes its rows in order, planning the next
transaction while the downstream applies the last one.

    queue: [item s=4: 37 ops] [item s=5: 2 ops] [item s=7: 300 ops] ...
              │ planner thread: takes ops in order, up to max-txn-row per downstream
              │ transaction (an atomic item, one source transaction, is never split),
              ▼ and renders them: plan() ─► statements (a large group of upserts as
              │ one LOAD DATA, bulk.py)
              │ hand-off queue: one planned transaction waits while one is written
              ▼
    writer thread: Downstream.run(transaction) ─► markers of the whole items passed
      (LOAD DATA refused by the downstream: the same transaction again as
       statements, and statements from then on)

Two threads because a lane used to spend its time in turn rendering rows (Python,
under the interpreter lock) and waiting for the downstream to apply them (no
lock held), while the reader waited on its full queue: planned ahead, the
rendering of one transaction overlaps the downstream's work on the one before
(docs/data-path.md, "How many lanes, how large a transaction"). The writer
passes items in the order the planner took them, so a lane's rows stay in
order and its markers pass in order.

After a failure (its own or another lane's) a lane writes nothing more: the
planner drains its queue without planning and the writer drops what was
planned, so the driver never blocks on it, and its unfinished markers stay
unfinished, so the flushed position never passes the failed change.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from cdc.logs import ContextLogger
from cdc.sink.base import SinkError
from cdc.sink.mysql.bulk import BulkLoads
from cdc.sink.mysql.downstream import Downstream
from cdc.sink.mysql.markers import MarkerBook
from cdc.sink.mysql.statements import RowOp, Statement, plan

__all__ = ["Lane", "LaneItem"]

_JOIN_TIMEOUT = 30.0


@dataclass(frozen=True)
class _Planned:
    """A transaction the planner rendered: its ops, their statements, and how many whole
    items it finishes."""

    ops: list[RowOp]
    statements: list[Statement]
    done: int


@dataclass(frozen=True)
class LaneItem:
    """Ops for one lane from one ``write_rows`` call (tag ``seq``); ``atomic`` items
    (a whole source transaction) go into one downstream transaction."""

    ops: list[RowOp]
    seq: int
    atomic: bool = False


class Lane:
    """One worker: a planner and a writer thread, writing its queue's items in order to
    its own connection."""

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
        self._planned: queue.Queue[_Planned | None] = queue.Queue(maxsize=1)
        self._writer = threading.Thread(
            target=self._write_planned, name=f"mysql-sink-write-{index}", daemon=True
        )
        self._writer.start()
        self._thread = threading.Thread(
            target=self._run, name=f"mysql-sink-lane-{index}", daemon=True
        )
        self._thread.start()

    def put(self, item: LaneItem) -> None:
        """Queues ``item``; waits while the queue is full (back pressure)."""
        self._book.enqueued(self.index, item.seq)
        self._queue.put(item)

    def stop(self) -> None:
        """Asks the threads to end after the transactions in hand and waits for them."""
        self._queue.put(None)
        deadline = time.monotonic() + _JOIN_TIMEOUT
        for thread in (self._thread, self._writer):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                self._log.warning(
                    "lane %d: %s did not stop within %.0fs", self.index, thread.name, _JOIN_TIMEOUT
                )
        self._downstream.close()

    def _run(self) -> None:
        """The planner: gathers items into transactions and renders them for the writer
        (which ends once the planner does, however it ends)."""
        try:
            self._gather_and_plan()
        finally:
            self._planned.put(None)

    def _gather_and_plan(self) -> None:
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
                statements = self._plan(ops, self._loads)
            except Exception as exc:  # the sink fails, whatever it was (_failing)
                self._failing(ops, exc)
                continue
            self._planned.put(_Planned(ops, statements, done))

    def _plan(self, ops: list[RowOp], loads: BulkLoads | None) -> list[Statement]:
        """``ops`` as statements, large upsert groups as loads while the downstream takes
        them."""
        if loads is None or not loads.active:
            return plan(ops, self._max_rows)
        return plan(ops, self._max_rows, loads)

    def _write_planned(self) -> None:
        """The writer: runs each planned transaction, then marks its items passed."""
        while (planned := self._planned.get()) is not None:
            if self._failed():
                continue
            try:
                self._write(planned)
            except Exception as exc:  # the sink fails, whatever it was (_failing)
                self._failing(planned.ops, exc)
                continue
            self._book.passed(self.index, planned.done)

    def _failing(self, ops: list[RowOp], exc: Exception) -> None:
        """Fails the sink with what went wrong in planning or writing ``ops``; anything
        but a ``SinkError`` is a bug, which must fail the sink, not kill a thread silently."""
        if not isinstance(exc, SinkError):
            self._log.exception("lane %d failed unexpectedly", self.index)
            self._fail(SinkError(f"lane {self.index} failed unexpectedly: {exc!r}"))
            return
        first, last = ops[0].position, ops[-1].position
        where = f"at {first}" if first == last else f"at positions {first} .. {last}"
        self._fail(
            SinkError(
                f"lane {self.index}: writing {len(ops)} row change(s) {where} failed: {exc.reason}",
                exc.statement,
            )
        )

    def _write(self, planned: _Planned) -> None:
        """Writes a planned transaction; refused loads: the same ops again as statements."""
        try:
            self._downstream.run(planned.statements, transaction=True)
        except SinkError as exc:
            # refused: nothing of the transaction was committed (the connection is gone)
            if self._loads is None or not self._loads.refused(exc):
                raise
            self._downstream.run(self._plan(planned.ops, None), transaction=True)

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
