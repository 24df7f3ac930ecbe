"""Decode worker processes shared by the readers of one changefeed on one capture.

    reader thread ── submit(unit) ──► worker with the fewest units in flight
                                        │ its sender thread writes the unit to its stdin;
                                        │ units are decoded in the order they went in
    collector thread per worker ◄───────┘ results in that order
          │ slot.done, then every listener (a reader dispatching what waited)
          ▼
    the reader's consumer takes each slot's result in the stream's order

A worker decodes the units it was given in the order it was given them, and
the collector pairs each result with the oldest unit in flight there, so a
slot always gets its own result. Only a worker's sender thread ever waits on
its stdin: a submit from its collector's listener (a reader dispatching what
waited) that wrote itself would wait for the worker to read while the worker
waits for the collector to take its result, and neither would go on.
Ordering across workers is the reader's business (it keeps its slots in
binlog order: ``cdc.binlog.readahead``).

A worker that exits (killed, out of memory) fails every unit it held with
:class:`DecodeWorkerError` (the tables of that reader stop with it and are
restarted from their checkpoints, as after any reader failure) and is started
again by the next submit.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable

from cdc.binlog.decode_worker import Result, Unit, read_frame, write_frame
from cdc.logs import get_logger

__all__ = ["DecodePool", "DecodeSlot", "DecodeWorkerError"]

log = get_logger(__name__)


class DecodeWorkerError(RuntimeError):
    """A decode worker process was lost with units in flight; their rows were not decoded."""


class DecodeSlot:
    """One submitted unit: its result once a worker decoded it, or the worker's loss."""

    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Result | None = None
        self.error: BaseException | None = None

    def set(self, result: Result | None, error: BaseException | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()


class _Worker:
    def __init__(self, pool: DecodePool, number: int) -> None:
        self.number = number
        self.pool = pool
        self.inflight: deque[DecodeSlot] = deque()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cdc.binlog.decode_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
        )
        self.alive = True
        self._outbox: queue.SimpleQueue[Unit | None] = queue.SimpleQueue()
        self._thread = threading.Thread(
            target=self._collect, name=f"decode-collector-{number}", daemon=True
        )
        self._sender = threading.Thread(
            target=self._send, name=f"decode-sender-{number}", daemon=True
        )
        self._thread.start()
        self._sender.start()

    def send(self, slot: DecodeSlot, unit: Unit) -> None:
        """Queues ``unit`` for the worker; never waits (see the module docstring)."""
        with self.pool.lock:
            if not self.alive:
                raise DecodeWorkerError(f"decode worker {self.number} is gone")
            self.inflight.append(slot)
            self._outbox.put(unit)

    def _send(self) -> None:
        assert self.proc.stdin is not None
        while True:
            unit = self._outbox.get()
            if unit is None:
                return
            try:
                write_frame(self.proc.stdin, unit)
            except (OSError, ValueError) as exc:
                # The collector sees the same loss and fails what was in flight, this too.
                log.warning("decode worker %d: sending a unit failed: %s", self.number, exc)
                return

    def _collect(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                result = read_frame(self.proc.stdout)
                with self.pool.lock:
                    slot = self.inflight.popleft()
                slot.set(result)
                self.pool.freed()
        except (EOFError, OSError, ValueError) as exc:
            self._lost(exc)

    def _lost(self, cause: BaseException) -> None:
        code = self.proc.poll()
        if code is None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        with self.pool.lock:
            self.alive = False
            lost = list(self.inflight)
            self.inflight.clear()
            closing = self.pool.closed
        self._outbox.put(None)  # its sender ends too
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if lost or not closing:
            log.error(
                "decode worker %d (pid %d) exited with code %s (%s); %d unit(s) in flight fail",
                self.number,
                self.proc.pid,
                code,
                cause,
                len(lost),
            )
        error = DecodeWorkerError(
            f"decode worker {self.number} (pid {self.proc.pid}) exited with code {code} "
            "while decoding; the tables it decoded for restart from their checkpoints"
        )
        for slot in lost:
            slot.set(None, error)
        self.pool.freed()

    def stop(self) -> None:
        self._outbox.put(None)
        self._sender.join(5)
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._thread.join(5)


class DecodePool:
    """``workers`` decode processes, started on first use; ``close()`` ends them."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a decode pool needs at least one worker, not {workers}")
        self.size = workers
        self.lock = threading.Lock()
        self.closed = False
        self._workers: list[_Worker | None] = [None] * workers
        self._listeners: list[Callable[[], None]] = []

    def listen(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Calls ``callback`` (outside any lock) whenever a worker finished a unit; returns
        what removes it."""
        with self.lock:
            self._listeners.append(callback)

        def remove() -> None:
            with self.lock:
                if callback in self._listeners:
                    self._listeners.remove(callback)

        return remove

    def idle(self) -> bool:
        """Whether some worker has nothing in flight (or was not started yet)."""
        with self.lock:
            return any(w is None or not w.alive or not w.inflight for w in self._workers)

    def submit(self, unit: Unit, slot: DecodeSlot) -> None:
        """Gives ``unit`` to the least busy worker; its result comes on ``slot``."""
        with self.lock:
            if self.closed:
                raise DecodeWorkerError("the decode pool is closed")
            number = min(range(self.size), key=self._load)
            worker = self._workers[number]
            if worker is None or not worker.alive:
                worker = self._workers[number] = _Worker(self, number)
        worker.send(slot, unit)

    def _load(self, number: int) -> int:
        worker = self._workers[number]
        return 0 if worker is None or not worker.alive else len(worker.inflight)

    def freed(self) -> None:
        with self.lock:
            listeners = list(self._listeners)
        for callback in listeners:
            callback()

    def pids(self) -> list[int]:
        """The live workers' process ids (tests and diagnostics)."""
        with self.lock:
            return [w.proc.pid for w in self._workers if w is not None and w.alive]

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self.closed = True
            workers = [w for w in self._workers if w is not None]
        for worker in workers:
            worker.stop()
