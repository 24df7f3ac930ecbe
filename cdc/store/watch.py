"""A running etcd watch that outlives broken streams.

pyetcd calls every watch callback of a connection on one shared thread, and a
stream that breaks (etcd restart, endpoint switch) simply ends. A
``WatchHandle`` therefore:

1. queues what arrives (``EtcdStore`` has already turned it into a list of
   ``WatchEvent``, a ``StoreError``, or a text saying why the stream ended);
2. calls the user's callback from its own thread, in revision order, so a
   slow callback delays only its own watch and may itself use the store;
3. remembers the revision after the last delivered event and, when the
   stream ends, re-attaches from there (backoff 0.2 s doubling to 5 s), so
   no event is lost or delivered twice;
4. ends with ``on_error(WatchCompacted)`` when etcd no longer has that history.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Protocol

from cdc.store.errors import StoreError, WatchCompacted
from cdc.store.records import WatchEvent

__all__ = ["WatchCalls", "WatchHandle"]

log = logging.getLogger(__name__)

#: What the store hands a watch: events, the error that ends it, or why the stream ended.
Item = list[WatchEvent] | StoreError | str


class WatchCalls(Protocol):
    """The two calls a watch makes on its store (``EtcdStore``, which imports this module)."""

    def _attach_watch(
        self, key: str, prefix: bool, deliver: Callable[[Item], None], start_revision: int
    ) -> Callable[[], None]: ...

    def _forget(self, handle: WatchHandle) -> None: ...


_STOP = object()


class WatchHandle:
    """A running watch (``EtcdStore.watch_prefix`` / ``watch_key``); see the module docstring."""

    def __init__(
        self,
        store: WatchCalls,
        key: str,
        prefix: bool,
        callback: Callable[[WatchEvent], None],
        start_revision: int,
        on_error: Callable[[StoreError], None] | None,
    ) -> None:
        self.key = key
        self._store = store
        self._prefix = prefix
        self._callback = callback
        self._on_error = on_error
        self._next_revision = start_revision
        self._queue: queue.SimpleQueue[Item | object] = queue.SimpleQueue()
        self._cancelled = threading.Event()
        self._detach: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, name=f"etcd-watch {key}", daemon=True)
        self._attach()
        self._thread.start()

    @property
    def next_revision(self) -> int:
        """The revision the watch continues from (last delivered event + 1)."""
        return self._next_revision

    def cancel(self) -> None:
        """Stop the watch; no callback runs after this returns (unless called from one)."""
        self._cancelled.set()
        detach, self._detach = self._detach, None
        if detach is not None:
            detach()
        self._queue.put(_STOP)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        self._store._forget(self)

    def _deliver(self, item: Item) -> None:
        self._queue.put(item)

    def _attach(self) -> None:
        detach = self._store._attach_watch(
            self.key, self._prefix, self._deliver, self._next_revision
        )
        self._detach = detach
        if self._cancelled.is_set():
            detach()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP or self._cancelled.is_set():
                return
            if isinstance(item, list):
                for event in item:
                    self._next_revision = event.kv.mod_revision + 1
                    if self._cancelled.is_set():
                        return
                    try:
                        self._callback(event)
                    except Exception:
                        log.exception("watch on %s: callback failed on %s", self.key, event)
                continue
            if isinstance(item, StoreError):
                self._fail(item)
                return
            log.warning(
                "watch on %s: stream ended (%s); re-attaching from revision %d",
                self.key,
                item,
                self._next_revision,
            )
            if not self._reattach():
                return

    def _reattach(self) -> bool:
        delay = 0.2
        while not self._cancelled.is_set():
            try:
                self._attach()
                return True
            except WatchCompacted as exc:
                self._fail(exc)
                return False
            except StoreError as exc:
                log.warning(
                    "watch on %s: re-attach failed (retry in %.1fs): %s", self.key, delay, exc
                )
                self._cancelled.wait(delay)
                delay = min(delay * 2, 5.0)
        return False

    def _fail(self, error: StoreError) -> None:
        self._detach = None
        self._store._forget(self)
        if self._on_error is None:
            log.error("watch on %s ended: %s", self.key, error)
            return
        try:
            self._on_error(error)
        except Exception:
            log.exception("watch on %s: on_error callback failed", self.key)
