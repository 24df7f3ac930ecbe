"""Key mirrors on a real etcd: the first read, other writers' changes by watch, the owner's
own writes at once, order against late watch events, and a read again after a lost watch."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from cdc.store import (
    Delete,
    DeletePrefix,
    EtcdStore,
    EventKind,
    KeyMirror,
    MirroredReads,
    Put,
    Versioned,
    WatchCompacted,
    WatchEvent,
)

pytestmark = pytest.mark.integration


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture
def mirrors() -> Iterator[list[KeyMirror]]:
    opened: list[KeyMirror] = []
    yield opened
    for mirror in opened:
        mirror.close()


def values(mirror: KeyMirror, prefix: str) -> dict[str, int]:
    return {item.key.rsplit("/", 1)[1]: item.json()["n"] for item in mirror.get_prefix(prefix)}


def test_a_mirror_reads_once_then_follows_other_writers(
    store: EtcdStore, open_store: Callable[..., EtcdStore], mirrors: list[KeyMirror]
) -> None:
    keys = store.keys
    store.put(keys.task("cf", "db.a"), {"n": 1})
    store.put(keys.task("cf", "db.b"), {"n": 2})
    changed: list[str] = []
    prefix = str(keys.task("cf", "db.a")).rsplit("/", 1)[0] + "/"
    mirror = KeyMirror(store, prefix, changed.append).start()
    mirrors.append(mirror)
    assert mirror.synced and values(mirror, prefix) == {"db.a": 1, "db.b": 2}
    assert sorted(changed) == sorted([str(keys.task("cf", "db.a")), str(keys.task("cf", "db.b"))])

    other = open_store()
    other.put(keys.task("cf", "db.c"), {"n": 3})
    other.put(keys.task("cf", "db.a"), {"n": 10})
    other.delete(keys.task("cf", "db.b"))
    other.put(keys.task("cf2", "db.z"), {"n": 9})  # another prefix: not mirrored
    assert wait_until(lambda: values(mirror, prefix) == {"db.a": 10, "db.c": 3})
    assert mirror.get(keys.task("cf2", "db.z")) is None
    assert len(mirror) == 2


def test_own_writes_are_seen_at_once_and_late_events_do_not_undo_them(
    store: EtcdStore, mirrors: list[KeyMirror]
) -> None:
    """A write through the mirror's store is in the mirror when the call returns, whatever
    the call (put, transaction, delete, delete of a prefix); a watch event older than it,
    arriving after, changes nothing. (The mirror's watch is stopped: the events are the
    test's, delivered as late as it likes.)"""
    keys = store.keys
    a, b = str(keys.task("cf", "db.a")), str(keys.task("cf", "db.b"))
    prefix = a.rsplit("/", 1)[0] + "/"
    mirror = KeyMirror(store, prefix).start()
    mirrors.append(mirror)
    assert mirror._watch is not None
    mirror._watch.cancel()
    first = store.put(a, {"n": 1})
    assert mirror.get(a) is not None and mirror.get(a).mod_revision == first  # type: ignore[union-attr]
    assert store.txn([], [Put(a, {"n": 2}), Put(b, {"n": 5})])
    assert values(mirror, prefix) == {"db.a": 2, "db.b": 5}
    assert store.txn([], [Delete(b)])
    assert values(mirror, prefix) == {"db.a": 2}
    held = mirror.get(a)
    assert held is not None
    mirror._on_event(WatchEvent(EventKind.PUT, Versioned(a, b'{"v":1,"n":1}', first, first)))
    assert values(mirror, prefix) == {"db.a": 2}
    store.delete_prefix(prefix)
    assert values(mirror, prefix) == {}
    mirror._on_event(WatchEvent(EventKind.PUT, held))  # the put before the delete, late
    assert values(mirror, prefix) == {}
    store.txn([], [Put(b, {"n": 6}), DeletePrefix(a)])
    assert values(mirror, prefix) == {"db.b": 6}


def test_a_lost_watch_reads_the_prefix_again(
    store: EtcdStore, open_store: Callable[..., EtcdStore], mirrors: list[KeyMirror]
) -> None:
    """A watch that cannot go on (etcd compacted the history it needs) ends; the mirror reads
    its prefix again and follows from there, and reads go to etcd meanwhile."""
    keys = store.keys
    a, b = str(keys.task("cf", "db.a")), str(keys.task("cf", "db.b"))
    prefix = a.rsplit("/", 1)[0] + "/"
    store.put(a, {"n": 1})
    mirror = KeyMirror(store, prefix).start()
    mirrors.append(mirror)
    reads = MirroredReads(store, [mirror])
    watch = mirror._watch
    assert watch is not None
    watch.cancel()
    other = open_store()
    other.put(b, {"n": 2})
    other.delete(a)
    assert values(mirror, prefix) == {"db.a": 1}  # the cancelled watch saw neither
    mirror._synced = False
    assert [i.key for i in reads.get_prefix(prefix)] == [b]  # not synced: read from etcd
    mirror._on_lost(WatchCompacted(prefix, 1))
    assert wait_until(lambda: mirror.synced)
    assert values(mirror, prefix) == {"db.b": 2}
    other.put(a, {"n": 3})
    assert wait_until(lambda: values(mirror, prefix) == {"db.a": 3, "db.b": 2})


def test_the_journal_tells_what_changed_since_a_position_with_the_revision_applied(
    store: EtcdStore, open_store: Callable[..., EtcdStore], mirrors: list[KeyMirror]
) -> None:
    keys = store.keys
    prefix = str(keys.task("cf", "db.a")).rsplit("/", 1)[0] + "/"
    store.put(keys.task("cf", "db.a"), {"n": 1})
    mirror = KeyMirror(store, prefix).start()
    mirrors.append(mirror)
    reads = MirroredReads(store, [mirror])
    start = reads.journal_position(prefix)
    assert start is not None
    other = open_store()
    written = other.put(keys.task("cf", "db.b"), {"n": 2})
    store.txn([], [Delete(keys.task("cf", "db.a"))])  # an own write, at once
    assert wait_until(lambda: str(keys.task("cf", "db.b")) in mirror.get_prefix(prefix)[0].key)
    changes = reads.changes_since(prefix, start)
    assert changes is not None
    assert set(changes.keys) == {str(keys.task("cf", "db.a")), str(keys.task("cf", "db.b"))}
    assert changes.applied_through >= written
    again = reads.changes_since(prefix, changes.end)
    assert again is not None and again.keys == []
    assert reads.changes_since(prefix, changes.end + 1) is None  # a position it never gave
    other.close()
    mirror.close()
    assert reads.changes_since(prefix, changes.end) is None  # nothing follows: read the prefix
