"""Key prefixes of etcd in memory: read once, then kept current by a watch.

The owner decides over every table of every changefeed each cycle; reading
them from etcd each time made its requests grow with the number of tables
(issue #15). A ``KeyMirror`` reads its prefix once (one revision, paged) and
then applies the watch's events, so a read costs no request and what the
owner sends etcd follows what changes, as tiflow's reactor state and
Kubernetes' informer caches do::

    start()      get_prefix_with_revision(prefix) -> contents at revision R
                 watch_prefix(prefix, from R + 1)
    watch event  applied if newer than what the mirror holds for that key
    own write    applied at once (the store tells its write listeners, with
                 the write's revision): the owner sees what it wrote in the
                 same cycle, never a stale task it just replaced
    compaction   (or a watch that cannot re-attach) read again, watch again;
                 ``synced`` is False meanwhile and ``MirroredReads`` reads
                 the store instead

Changes: every key a change touched is also journaled (in a bounded
queue, under the same lock as the change), so a reader that keeps its own
decoded copy (the owner's table reader) asks ``changes_since`` and handles
only what changed instead of reading the whole prefix each cycle; it reads
the prefix again when the journal has dropped what it had not seen yet.

Ordering: a change is applied only if its revision is above the one the
mirror holds for the key (a deleted key keeps its deletion's revision until
the watch has passed it), so a watch event older than an own write already
applied is dropped. Other processes' writes arrive when the watch delivers
them (milliseconds): the same staleness as a read that began a moment
earlier.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from cdc.store.errors import StoreError
from cdc.store.etcd import EtcdStore
from cdc.store.keys import KeySpace
from cdc.store.records import (
    Delete,
    DeletePrefix,
    EventKind,
    KeyLike,
    Op,
    Put,
    Versioned,
    WatchEvent,
)
from cdc.store.watch import WatchHandle

__all__ = ["Changes", "KeyMirror", "KeyReader", "MirroredReads"]

log = logging.getLogger(__name__)

#: Seconds between attempts to read a prefix again after its watch ended.
_RESYNC_BACKOFF = (0.2, 5.0)
#: Changed keys a mirror remembers for ``changes_since``.
JOURNAL = 200_000


@dataclass(frozen=True)
class Changes:
    """The keys changed (in the order of their changes, possibly repeated) between two
    journal positions; ``end`` is the position to ask from next time, ``applied_through``
    the revision up to which the mirror holds every change, read at the same moment."""

    keys: list[str]
    end: int
    applied_through: int


class KeyReader(Protocol):
    """What a reader of keys needs: ``EtcdStore``, or ``MirroredReads`` over it."""

    @property
    def keys(self) -> KeySpace: ...

    def get(self, key: KeyLike) -> Versioned | None: ...

    def get_prefix(self, prefix: str) -> list[Versioned]: ...

    def applied_through(self, prefix: str) -> int | None:
        """The revision up to which reads of ``prefix`` from now on include every change;
        None when every read is made at the store's current revision (nothing to wait
        for: a read made later sees everything written earlier)."""
        ...

    def changes_since(self, prefix: str, position: int) -> Changes | None:
        """The keys under ``prefix``'s mirror changed since journal ``position``; None when
        nothing journals them (no mirror, one that is reading its prefix again, or a
        journal that dropped them): read the prefix instead."""
        ...

    def journal_position(self, prefix: str) -> int | None:
        """Where the journal of ``prefix``'s mirror stands now (take it before reading the
        prefix whole, then ask ``changes_since`` from it); None: nothing journals it."""
        ...


class KeyMirror:
    """One prefix of the store in memory (see the module docstring).

    ``on_change(key)`` is called (on the watch's or the writer's thread) for
    every change applied, own writes included.
    """

    def __init__(
        self, store: EtcdStore, prefix: str, on_change: Callable[[str], None] | None = None
    ) -> None:
        if not prefix:
            raise ValueError("a mirror needs a non-empty prefix")
        self.prefix = prefix
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()
        self._items: dict[str, Versioned] = {}
        self._sorted: list[str] = []
        self._deleted: dict[str, int] = {}
        self._watch: WatchHandle | None = None
        self._watched_through = 0
        self._synced = False
        self._closed = threading.Event()
        self._resyncing = False
        self._journal: deque[str] = deque(maxlen=JOURNAL)
        self._journal_end = 0

    # --- life ------------------------------------------------------------------------------

    def start(self) -> KeyMirror:
        """Reads the prefix and starts following it; raises ``StoreError`` when it cannot."""
        self._store.add_write_listener(self._on_write)
        try:
            self._sync()
        except BaseException:
            self._store.remove_write_listener(self._on_write)
            raise
        return self

    def close(self) -> None:
        self._closed.set()
        self._store.remove_write_listener(self._on_write)
        with self._lock:
            watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()

    @property
    def synced(self) -> bool:
        """Whether the mirror follows etcd (False while it reads its prefix again)."""
        return self._synced and not self._closed.is_set()

    def covers(self, prefix: str) -> bool:
        """Whether every key under ``prefix`` is under this mirror's prefix."""
        return prefix.startswith(self.prefix)

    # --- reads -----------------------------------------------------------------------------

    def get(self, key: KeyLike) -> Versioned | None:
        with self._lock:
            return self._items.get(str(key))

    def get_prefix(self, prefix: str) -> list[Versioned]:
        """The keys under ``prefix`` (within the mirror's), sorted by key."""
        if not self.covers(prefix):
            raise ValueError(f"{prefix!r} is not under the mirrored prefix {self.prefix!r}")
        with self._lock:
            return [self._items[key] for key in self._keys_under(prefix)]

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def journal_position(self) -> int | None:
        with self._lock:
            return self._journal_end if self._synced and not self._closed.is_set() else None

    def changes_since(self, position: int) -> Changes | None:
        """See ``KeyReader.changes_since`` (for the whole prefix of this mirror)."""
        with self._lock:
            if not self._synced or self._closed.is_set():
                return None
            start = self._journal_end - len(self._journal)
            if position < start or position > self._journal_end:
                return None
            keys = list(itertools.islice(self._journal, position - start, None))
            return Changes(keys, self._journal_end, self._watched_through)

    def _journaled(self, keys: Sequence[str]) -> None:
        """Under the lock: ``keys`` changed."""
        self._journal.extend(keys)
        self._journal_end += len(keys)

    @property
    def watched_through(self) -> int:
        """The highest revision of a change of this prefix applied (or of the last read of
        it): a change written at or below it is in what a read returns from now on."""
        with self._lock:
            return self._watched_through

    # --- following -------------------------------------------------------------------------

    def _sync(self) -> None:
        items, revision = self._store.get_prefix_with_revision(self.prefix)
        changed: list[str] = []
        with self._lock:
            fresh = {item.key: item for item in items}
            for key, held in self._items.items():
                if held.mod_revision > revision:  # an own write newer than the read
                    fresh[key] = held
                elif key not in fresh:
                    changed.append(key)
            for key, item in fresh.items():
                if self._items.get(key) is not item:
                    changed.append(key)
            self._deleted = {k: r for k, r in self._deleted.items() if r > revision}
            for key in self._deleted:
                fresh.pop(key, None)
            self._items = fresh
            self._sorted = sorted(fresh)
            self._watched_through = revision
            self._journaled(changed)
        watch = self._store.watch_prefix(
            self.prefix, self._on_event, start_revision=revision + 1, on_error=self._on_lost
        )
        with self._lock:
            closed = self._closed.is_set()
            if not closed:
                self._watch = watch
        if closed:  # closed while it read again: nothing may follow
            watch.cancel()
            return
        self._synced = True
        self._notify(changed)

    def _on_event(self, event: WatchEvent) -> None:
        kv = event.kv
        with self._lock:
            self._watched_through = max(self._watched_through, kv.mod_revision)
            if event.kind is EventKind.DELETE:
                applied = self._remove(kv.key, kv.mod_revision)
            else:
                applied = self._set(kv)
            if applied:
                self._journaled((kv.key,))
            if self._deleted:
                self._deleted = {
                    k: r for k, r in self._deleted.items() if r > self._watched_through
                }
        if applied:
            self._notify([kv.key])

    def _on_write(self, ops: Sequence[Op], revision: int) -> None:
        changed: list[str] = []
        with self._lock:
            for op in ops:
                if isinstance(op, Put):
                    key = str(op.key)
                    if not self.covers(key):
                        continue
                    held = self._items.get(key)
                    value = op.value
                    if not isinstance(value, bytes):  # the store tells listeners bytes
                        raise TypeError(f"a write listener got an unencoded value for {key}")
                    created = held.create_revision if held is not None else revision
                    lease = op.lease if isinstance(op.lease, int) else None
                    if self._set(Versioned(key, value, revision, created, lease)):
                        changed.append(key)
                elif isinstance(op, Delete):
                    key = str(op.key)
                    if self.covers(key) and self._remove(key, revision):
                        changed.append(key)
                elif isinstance(op, DeletePrefix) and (
                    self.covers(op.prefix) or self.prefix.startswith(op.prefix)
                ):
                    for key in self._keys_under(op.prefix):
                        if self._remove(key, revision):
                            changed.append(key)
            self._journaled(changed)
        self._notify(changed)

    def _keys_under(self, prefix: str) -> list[str]:
        """Under the lock: the held keys under ``prefix``, in order."""
        held = self._sorted
        out = []
        for index in range(bisect.bisect_left(held, prefix), len(held)):
            if not held[index].startswith(prefix):
                break
            out.append(held[index])
        return out

    def _set(self, kv: Versioned) -> bool:
        held = self._items.get(kv.key)
        newest = held.mod_revision if held is not None else self._deleted.get(kv.key, 0)
        if kv.mod_revision <= newest:
            return False
        if held is None:
            bisect.insort(self._sorted, kv.key)
            self._deleted.pop(kv.key, None)
        self._items[kv.key] = kv
        return True

    def _remove(self, key: str, revision: int) -> bool:
        held = self._items.get(key)
        if held is None:
            if revision > self._deleted.get(key, 0):
                self._deleted[key] = revision
            return False
        if revision <= held.mod_revision:
            return False
        del self._items[key]
        del self._sorted[bisect.bisect_left(self._sorted, key)]
        self._deleted[key] = revision
        return True

    def _notify(self, keys: list[str]) -> None:
        if self._on_change is None:
            return
        for key in keys:
            try:
                self._on_change(key)
            except Exception:
                log.exception("mirror of %s: change callback failed on %s", self.prefix, key)

    def _on_lost(self, error: StoreError) -> None:
        """The watch ended for good (compaction, or it could not re-attach): read again."""
        self._synced = False
        self._watch = None
        log.warning("mirror of %s: watch ended (%s); reading the prefix again", self.prefix, error)
        with self._lock:
            if self._resyncing:
                return
            self._resyncing = True
        threading.Thread(target=self._resync, name=f"mirror {self.prefix}", daemon=True).start()

    def _resync(self) -> None:
        delay, ceiling = _RESYNC_BACKOFF
        try:
            while not self._closed.is_set():
                try:
                    self._sync()
                    log.info("mirror of %s: following again", self.prefix)
                    return
                except StoreError as exc:
                    log.warning(
                        "mirror of %s: read failed (retry in %.1fs): %s", self.prefix, delay, exc
                    )
                    self._closed.wait(delay)
                    delay = min(delay * 2, ceiling)
        finally:
            with self._lock:
                self._resyncing = False


class MirroredReads:
    """Reads served by mirrors where one covers the prefix and follows etcd, else by the
    store: a ``KeyReader`` for code written against ``EtcdStore``'s reads."""

    def __init__(self, store: KeyReader, mirrors: Sequence[KeyMirror]) -> None:
        self._store = store
        self._mirrors = list(mirrors)

    @property
    def keys(self) -> KeySpace:
        return self._store.keys

    def _mirror(self, prefix: str) -> KeyMirror | None:
        for mirror in self._mirrors:
            if mirror.covers(prefix) and mirror.synced:
                return mirror
        return None

    def get(self, key: KeyLike) -> Versioned | None:
        mirror = self._mirror(str(key))
        return mirror.get(key) if mirror is not None else self._store.get(key)

    def get_prefix(self, prefix: str) -> list[Versioned]:
        mirror = self._mirror(prefix)
        return mirror.get_prefix(prefix) if mirror is not None else self._store.get_prefix(prefix)

    def applied_through(self, prefix: str) -> int | None:
        mirror = self._mirror(prefix)
        return mirror.watched_through if mirror is not None else None

    def changes_since(self, prefix: str, position: int) -> Changes | None:
        mirror = self._mirror(prefix)
        return mirror.changes_since(position) if mirror is not None else None

    def journal_position(self, prefix: str) -> int | None:
        mirror = self._mirror(prefix)
        return mirror.journal_position() if mirror is not None else None
