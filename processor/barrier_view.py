"""A changefeed's barrier as this capture sees it: the latest value of ``barrier/<cf>``.

One view per changefeed is shared by the table pipelines of this capture. It
reads the key once, then follows it with a watch (re-reading and watching
again if etcd compacted the history); pipelines ask ``allows(position)`` and
wait with ``wait_until_allows`` when an event lies beyond the barrier.
"""

from __future__ import annotations

import threading

from cdc.changefeed import Barrier
from cdc.logs import get_logger
from cdc.model.position import Position
from cdc.store import EtcdStore, EventKind, StoreError, WatchEvent, WatchHandle

__all__ = ["BarrierView"]


class BarrierView:
    """The newest barrier of one changefeed (None until the owner has published one)."""

    def __init__(self, store: EtcdStore, changefeed_id: str) -> None:
        self.store = store
        self.key = store.keys.barrier(changefeed_id)
        self.log = get_logger(__name__, changefeed=changefeed_id)
        self._changed = threading.Condition()
        self._barrier: Barrier | None = None
        self._closed = False
        self._handle: WatchHandle | None = None
        self._follow()

    def _follow(self) -> None:
        current = self.store.get(self.key)
        start = self.store.revision() + 1
        if current is not None:
            self._set(Barrier.from_dict(current.json()))
            start = max(start, current.mod_revision + 1)
        self._handle = self.store.watch_key(
            self.key, self._on_event, start_revision=start, on_error=self._on_error
        )

    def _on_event(self, event: WatchEvent) -> None:
        if event.kind is EventKind.PUT:
            self._set(Barrier.from_dict(event.kv.json()))

    def _on_error(self, error: StoreError) -> None:
        self.log.warning("barrier watch ended (%s); reading it again", error)
        if not self._closed:
            try:
                self._follow()
            except StoreError as exc:
                self.log.error("barrier watch could not restart: %s", exc)

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
            if not self._closed:
                self._changed.wait(timeout)

    def close(self) -> None:
        self._closed = True
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.cancel()
        with self._changed:
            self._changed.notify_all()
