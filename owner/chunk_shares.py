"""The owner's side of shared snapshot plans: which capture runs which share (issue #16).

A capture holding a large table publishes its plan in shares
(``cdc.changefeed.snapshot_shares``); this loop gives them out::

    every change of snapshot-share/, capture/ or changefeed/status/ (else each second):
        shares open on no live capture, of changefeeds in state normal
            ──► assign(): each to the live capture with the fewest open shares, while it
                has fewer than SHARES_PER_CAPTURE; ties by capture id (deterministic)
            ──► one fenced compare-and-swap per share (a share whose revision moved is
                decided again next time)

A capture that dies mid-snapshot leaves its open shares on a capture that is no longer
live: they are given to others at once, and the dead capture's late writes fail on the
share's revision. Its own loop, with its own mirrors, beside the owner's cycle
(``owner.py``): it needs nothing of the changefeeds' tables, checkpoints or barriers,
and the owner's cycle nothing of it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from cdc.changefeed import ChangefeedState, ChangefeedStatus
from cdc.changefeed.snapshot_shares import SHARES_PER_CAPTURE, HeldShare, ShareBook, ShareState
from cdc.logs import get_logger
from cdc.store import (
    EtcdStore,
    Fence,
    FencedError,
    KeyMirror,
    StoreError,
    Versioned,
)
from cdc.store.keys import CaptureKey, ChangefeedStatusKey, Key, SnapshotShareKey

__all__ = ["Assignment", "ShareOwner", "assign"]


@dataclass(frozen=True)
class Assignment:
    """Give ``held`` to ``capture_id``."""

    held: HeldShare
    capture_id: str


def assign(
    shares: Sequence[HeldShare],
    captures: Iterable[str],
    running: set[str],
    per_capture: int = SHARES_PER_CAPTURE,
) -> list[Assignment]:
    """The shares to give out now (see the module docstring): ``captures`` are the live
    ones, ``running`` the changefeeds in state normal."""
    live = sorted(set(captures))
    if not live:
        return []
    load: Counter[str] = Counter({c: 0 for c in live})
    waiting: list[HeldShare] = []
    for held in shares:
        if held.share.state is not ShareState.OPEN:
            continue
        capture = held.share.capture
        if capture is not None and capture in load:
            load[capture] += 1
        elif held.changefeed_id in running:
            waiting.append(held)
    waiting.sort(key=lambda h: (h.changefeed_id, str(h.table), h.share.n))
    out = []
    for held in waiting:
        target = min(live, key=lambda c: (load[c], c))
        if load[target] >= per_capture:
            break
        out.append(Assignment(held, target))
        load[target] += 1
    return out


class ShareOwner:
    """Runs ``cycle`` on its own thread for one term of ownership (one ``fence``)."""

    def __init__(
        self,
        store: EtcdStore,
        fence: Fence,
        *,
        per_capture: int = SHARES_PER_CAPTURE,
        interval: float = 1.0,
    ) -> None:
        self.store = store
        self.fence = fence
        self.per_capture = per_capture
        self.interval = interval
        self.assigned = 0
        self.log = get_logger(__name__, role="owner")
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._mirrors: dict[type[Key], KeyMirror] = {}
        self._thread = threading.Thread(target=self._loop, name="share-owner", daemon=True)

    def start(self) -> ShareOwner:
        keys = self.store.keys
        try:
            for kind in (SnapshotShareKey, CaptureKey, ChangefeedStatusKey):
                mirror = KeyMirror(self.store, keys.prefix_of(kind), lambda _k: self._wake.set())
                self._mirrors[kind] = mirror.start()
        except BaseException:
            self._close()
            raise
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()
        self._close()

    def _close(self) -> None:
        for mirror in self._mirrors.values():
            mirror.close()
        self._mirrors.clear()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            try:
                self.cycle()
            except FencedError as exc:
                self.log.info("share owner steps down: %s", exc)
                return
            except StoreError as exc:
                self.log.error("share owner: etcd error, retrying: %s", exc)
            except Exception:
                self.log.exception("share owner cycle failed, retrying")
            self._wake.wait(self.interval)
            self._stop.wait(0.02)  # a burst of changes makes one cycle

    def _items(self, kind: type[Key]) -> list[Versioned]:
        mirror = self._mirrors[kind]
        return mirror.get_prefix(self.store.keys.prefix_of(kind))

    def cycle(self) -> int:
        """One decision and its writes; how many shares were given out."""
        keys = self.store.keys
        captures = [keys.parse(i.key, CaptureKey).capture_id for i in self._items(CaptureKey)]
        running = set()
        for item in self._items(ChangefeedStatusKey):
            status = ChangefeedStatus.from_dict(item.json())
            if status.state is ChangefeedState.NORMAL:
                running.add(keys.parse(item.key, ChangefeedStatusKey).changefeed_id)
        books: dict[str, ShareBook] = {}
        shares = []
        for item in self._items(SnapshotShareKey):
            cf = keys.parse(item.key, SnapshotShareKey).changefeed_id
            book = books.get(cf) or books.setdefault(cf, ShareBook(self.store, cf))
            shares.append(book.decode(item))
        given = 0
        for assignment in assign(shares, captures, running, self.per_capture):
            held = assignment.held
            share = replace(held.share, capture=assignment.capture_id)
            if books[held.changefeed_id].swap(held, share, fence=self.fence):
                given += 1
                self.log.info(
                    "share %d of %s/%s (chunks %d..%d) to %s%s",
                    held.share.n,
                    held.changefeed_id,
                    held.table,
                    held.share.first,
                    held.share.last - 1,
                    assignment.capture_id,
                    f" (was {held.share.capture})" if held.share.capture else "",
                )
        self.assigned += given
        return given
