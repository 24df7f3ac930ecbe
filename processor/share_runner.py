"""The shares of large snapshot plans the owner gave this capture, run as Spark tasks.

    snapshot-share/ (a mirror, woken by every change)
        │ open, capture = this one, not running yet
        ▼
    one thread per share: the plan's schema, the changefeed's config, the share's chunk
    records; its pending chunks to the capture's snapshot scheduler (the same Spark jobs
    as the tables held here, ``batch_chunks`` at a time) ──► each outcome:
        done    ─► recorded while the share is still at the revision taken
                   (``ShareBook.mark_done``); refused: the share was taken back, stop
        another schema ─► the share ends ``changed`` at a position read after it
        failed  ─► the share ends ``failed`` with the error (the table fails, the owner
                   retries the changefeed)
    every write of its chunks carries the etcd revision at which the share was still as
    taken (a fence token: a capture that lost the share writes nothing once the next
    holder wrote the chunk, ``cdc.sink.mysql.chunkfence``);
    the share ends ``done`` when every chunk is recorded (``failed`` when one ran while
    the lease was not known alive, so it is read again); a share whose revision moved under it
    (the owner gave it to another capture, its holder stopped it) is withdrawn from the
    scheduler and ends without a write

Writes happen only while the capture's lease is known alive; a capture that lost it
has its shares given to others by the owner.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cdc.changefeed.snapshot_shares import HeldShare, ShareBook, ShareRevoked, ShareState
from cdc.config.changefeed import ChangefeedConfig
from cdc.filter.event_filter import EventFilter
from cdc.logs import get_logger
from cdc.masking import mask_secret
from cdc.metrics import snapshot_chunks_done
from cdc.source.connect import connect
from cdc.source.flavor import current_position, detect
from cdc.store import EtcdStore, KeyMirror, StoreError
from cdc.store.keys import SnapshotShareKey
from processor.snapshot_scheduler import JobKey, SnapshotScheduler, TableChunks

__all__ = ["ShareRunner"]

_SCHEMA_CHANGED = "ChunkSchemaChanged"
#: Seconds a finished share waits for a lagging lease proof before it is left open.
ALIVE_WAIT = 10.0


class ShareRunner:
    """See the module docstring. One per capture; ``start`` after the processor's."""

    def __init__(
        self,
        store: EtcdStore,
        capture_id: str,
        scheduler: SnapshotScheduler,
        spark: Callable[[ChangefeedConfig], Any],
        *,
        alive: Callable[[], bool] = lambda: True,
        batch_chunks: int = 8,
    ) -> None:
        self.store = store
        self.capture_id = capture_id
        self.scheduler = scheduler
        self.spark = spark
        self.alive = alive
        self.batch_chunks = batch_chunks
        self.log = get_logger(__name__, capture=capture_id, role="processor")
        self.prefix = store.keys.prefix_of(SnapshotShareKey)
        self.chunks_run = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._running: dict[str, _Running] = {}
        self._mirror: KeyMirror | None = None
        self._thread = threading.Thread(target=self._loop, name="share-runner", daemon=True)

    def start(self) -> ShareRunner:
        self._mirror = KeyMirror(self.store, self.prefix, lambda _key: self._wake.set()).start()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Withdraws the shares' queued chunks; the running ones finish, recorded or not."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join()
        for running in list(self._running.values()):
            running.stop.set()
            running.wake.set()
        for running in list(self._running.values()):
            running.thread.join(timeout=30)
        if self._mirror is not None:
            self._mirror.close()

    def running(self) -> int:
        """Shares running here."""
        return sum(1 for r in self._running.values() if r.thread.is_alive())

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(1.0)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self._pass()
            except StoreError as exc:
                self.log.error("share runner: etcd error, retrying: %s", exc)
            except Exception:
                self.log.exception("share runner pass failed, retrying")

    def _pass(self) -> None:
        assert self._mirror is not None
        current: dict[str, int] = {}
        for item in self._mirror.get_prefix(self.prefix):
            current[item.key] = item.mod_revision
            running = self._running.get(item.key)
            if running is not None and running.thread.is_alive():
                continue
            parsed = self.store.keys.parse(item.key, SnapshotShareKey)
            book = ShareBook(self.store, parsed.changefeed_id)
            held = book.decode(item)
            share = held.share
            if share.capture != self.capture_id or share.state is not ShareState.OPEN:
                continue
            if not self.alive():
                continue
            self._running[item.key] = _Running.start(self, book, held)
        for key, running in list(self._running.items()):
            if not running.thread.is_alive():
                del self._running[key]
            elif current.get(key) != running.held.revision:
                running.stop.set()  # taken back: record nothing more
                running.wake.set()

    def run_share(
        self, book: ShareBook, held: HeldShare, stop: threading.Event, wake: threading.Event
    ) -> None:
        """Runs one share to its end (see the module docstring); on its own thread. ``stop``
        withdraws its queued chunks; ``wake`` is set with it, and by the scheduler."""
        table, share = held.table, held.share
        log = self.log.bind(changefeed=held.changefeed_id, table=str(table))
        info = self.store.get(self.store.keys.changefeed_info(held.changefeed_id))
        plan = book.plan(table)
        if info is None or plan is None:
            return  # removed meanwhile
        config = ChangefeedConfig.from_dict(info.json())
        records = book.records(table, share)
        pending = [r.chunk for r in records if not r.done]
        log.info(
            "share %d (chunks %d..%d): %d to run",
            share.n,
            share.first,
            share.last - 1,
            len(pending),
        )
        changed = False
        error: str | None = None
        if pending:
            token = book.proof(held)
            if token is None:
                log.info("share %d was taken back before it ran", share.n)
                return
            events = EventFilter(config.event_filters, config.case_sensitive)
            request = TableChunks(
                JobKey.of(config),
                plan.schema,
                tuple(pending),
                lambda: self.spark(config),
                clear_ranges=not events.keeps_deleted_rows(table),
                per_job=self.batch_chunks,
                token=token,
            )
            ticket = self.scheduler.submit(request, stop, wake)
            for batch in ticket.batches():
                done = rows = 0
                for chunk, outcome in batch:
                    if outcome.error_type == _SCHEMA_CHANGED:
                        log.warning("share %d: %s", share.n, outcome.error)
                        changed = True
                    elif not outcome.ok:
                        error = error or mask_secret(f"chunk {outcome.chunk_id}: {outcome.error}")
                    elif not stop.is_set() and self.alive():
                        assert outcome.high_watermark is not None
                        try:
                            book.mark_done(held, chunk, outcome.high_watermark, outcome.row_count)
                        except ShareRevoked:
                            stop.set()
                            continue
                        done += 1
                        rows += outcome.row_count
                self.chunks_run += done
                snapshot_chunks_done(held.changefeed_id, str(table), done, rows)
                if changed or error:
                    stop.set()  # no further chunk of the share runs
            if ticket.stopped and not (changed or error):
                log.info("share %d withdrawn", share.n)
                return
        if not self._alive_again(stop):
            log.warning(
                "share %d left open: %s (the owner gives a lost capture's shares to others)",
                share.n,
                "stopped" if stop.is_set() else f"the lease not known alive for {ALIVE_WAIT:.0f}s",
            )
            return
        unrecorded = 0
        if not (changed or error):
            unrecorded = sum(1 for r in book.records(table, share) if not r.done)
        if changed:
            book.end(held, ShareState.CHANGED, changed_by=_position_now(config))
        elif error:
            book.end(held, ShareState.FAILED, error=error)
        elif unrecorded:
            # a chunk that finished while the lease was not known alive was not recorded:
            # ``done`` would hand the table over with that chunk never read
            book.end(
                held,
                ShareState.FAILED,
                error=f"{unrecorded} chunk(s) of share {share.n} ran but are not recorded "
                "(the capture's lease was not known alive when they ended); read again",
            )
        else:
            book.end(held, ShareState.DONE)
        log.info("share %d ended", share.n)

    def _alive_again(self, stop: threading.Event) -> bool:
        """Whether the lease is known alive, waiting up to ``ALIVE_WAIT`` s for a proof
        that lags (a loaded machine): returning at once left the share open on a live
        capture, where the owner never looks for it again, and the table waiting."""
        deadline = time.monotonic() + ALIVE_WAIT
        while not self.alive():
            if stop.is_set() or time.monotonic() > deadline:
                return False
            stop.wait(0.2)
        return True


class _Running:
    """A share running on its own thread."""

    def __init__(self, held: HeldShare, thread: threading.Thread) -> None:
        self.held = held
        self.thread = thread
        self.stop = threading.Event()
        self.wake = threading.Event()

    @classmethod
    def start(cls, runner: ShareRunner, book: ShareBook, held: HeldShare) -> _Running:
        running = cls(held, threading.Thread())

        def main() -> None:
            try:
                runner.run_share(book, held, running.stop, running.wake)
            except Exception as exc:  # the share fails: its table fails and is retried
                runner.log.exception("share %d of %s failed", held.share.n, held.table)
                if not running.stop.is_set() and runner.alive():
                    error = mask_secret(f"{type(exc).__name__}: {exc}")
                    try:
                        book.end(held, ShareState.FAILED, error=error)
                    except Exception as report:  # the owner gives it to another capture
                        runner.log.error("could not report share %d: %s", held.share.n, report)

        running.thread = threading.Thread(target=main, daemon=True, name=f"share-{held.share.n}")
        running.thread.start()
        return running


def _position_now(config: ChangefeedConfig) -> Any:
    """The source's position now: a DDL that a chunk met lies before it."""
    conn = connect(config.source_uri)
    try:
        return current_position(conn, detect(conn))
    finally:
        conn.close()
