"""A changefeed's barrier as this capture sees it: the latest value of ``barrier/<cf>``.

One view per changefeed is shared by the table pipelines of this capture. It
reads the key and the revision of that same read (one etcd response), then
watches from that revision + 1, so a barrier put between the read and the
watch is still seen. When the watch ends with an error (etcd compacted the
history, or refused it), the view reads and watches again, retrying with
backoff until that works or the view is closed: a view that gave up would
leave every table stalled at an old barrier forever. Pipelines ask
``allows(position)`` and wait with ``wait`` when an event lies beyond the barrier.
"""

from __future__ import annotations

import threading

from cdc.changefeed import Barrier
from cdc.logs import get_logger
from cdc.model.position import Position
from cdc.store import EtcdStore, EventKind, StoreError, WatchEvent, WatchHandle

__all__ = ["RESTART_FIRST_DELAY", "RESTART_MAX_DELAY", "BarrierView"]

#: Seconds before the first attempt to follow the barrier again; doubled up to the maximum.
RESTART_FIRST_DELAY = 0.2
RESTART_MAX_DELAY = 5.0


class BarrierView:
    """The newest barrier of one changefeed (None until the owner has published one)."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.key = store.keys.barrier(changefeed_id)
        self.log = get_logger(__name__, changefeed=changefeed_id)
        self._changed = threading.Condition()
        self._barrier: Barrier | None = None
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._handle: WatchHandle | None = None
        self._restarting: threading.Thread | None = None
        self._follow()

    def _follow(self) -> None:
        """Reads the barrier and watches it from the revision of that very read."""
        current, revision = self.store.get_with_revision(self.key)
        if current is not None:
            self._set(Barrier.from_dict(current.json()))
        handle = self.store.watch_key(
            self.key, self._on_event, start_revision=revision + 1, on_error=self._on_error
        )
        with self._lock:
            if not self._closed.is_set():
                self._handle = handle
                return
        handle.cancel()

    def _on_event(self, event: WatchEvent) -> None:
        if event.kind is EventKind.PUT:
            self._set(Barrier.from_dict(event.kv.json()))

    def _on_error(self, error: StoreError) -> None:
        """The watch ended: follow the key again from a thread of its own, until it works."""
        self.log.warning("barrier watch ended (%s); reading it again", error)
        with self._lock:
            self._handle = None
            if self._closed.is_set():
                return
            thread = threading.Thread(
                target=self._restart, name=f"barrier-view {self.key}", daemon=True
            )
            self._restarting = thread
        thread.start()

    def _restart(self) -> None:
        delay = RESTART_FIRST_DELAY
        while not self._closed.is_set():
            try:
                self._follow()
                self.log.info("barrier watch restarted")
                return
            except StoreError as exc:
                self.log.warning("barrier watch could not restart (retry in %.1fs): %s", delay, exc)
            self._closed.wait(delay)
            delay = min(delay * 2, RESTART_MAX_DELAY)

    def _set(self, barrier: Barrier) -> None:
        with self._changed:
            old = self._barrier
            if old is None or barrier.limit.key() >= old.limit.key():
                self._barrier = barrier
            self._changed.notify_all()

    @property
    def barrier(self) -> Barrier | None:
        return self._barrier

    def allows(self, position: Position) -> bool:
        barrier = self._barrier
        return barrier is not None and barrier.allows(position)

    def wait(self, timeout: float) -> None:
        """Blocks until the barrier changes (or is closed), at most ``timeout`` seconds."""
        with self._changed:
            if not self._closed.is_set():
                self._changed.wait(timeout)

    def close(self) -> None:
        with self._lock:
            self._closed.set()
            handle, self._handle = self._handle, None
            restarting, self._restarting = self._restarting, None
        if handle is not None:
            handle.cancel()
        if restarting is not None and restarting is not threading.current_thread():
            restarting.join()
        with self._changed:
            self._changed.notify_all()
