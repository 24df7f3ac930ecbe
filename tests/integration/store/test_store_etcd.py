"""EtcdStore against a real etcd: reads, compare-and-swap writes, leases, watches, outages."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from cdc.playground.ports import free_port
from cdc.store import (
    Absent,
    ConflictError,
    Delete,
    DeletePrefix,
    EtcdConfig,
    EtcdStore,
    EventKind,
    KeepAlive,
    LeaseLost,
    ModRevisionIs,
    Put,
    StoreUnavailable,
    ValueFormatError,
    WatchCompacted,
    WatchEvent,
)

pytestmark = pytest.mark.integration

TTL = 2


def wait_until(condition: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def test_put_get_and_versions(store: EtcdStore) -> None:
    key = store.keys.capture("c1")
    assert store.get(key) is None
    revision = store.put(key, {"addr": "127.0.0.1:8300"})
    got = store.get(key)
    assert got is not None
    assert got.key == str(key)
    assert got.json() == {"addr": "127.0.0.1:8300", "v": 1}
    assert got.mod_revision == got.create_revision == revision
    assert got.lease is None
    later = store.put(key, b"raw")
    again = store.get(key)
    assert again.value == b"raw"
    assert again.mod_revision == later > revision
    assert again.create_revision == revision
    with pytest.raises(ValueFormatError, match=f"at {key} is not JSON"):
        again.json()


def test_get_prefix_reads_every_page_at_one_revision(store: EtcdStore) -> None:
    prefix = store.keys.prefix_of(type(store.keys.snapshot_chunk("cf", "s.t", 0)), "cf", "s.t")
    total = 2150
    for start in range(0, total, 100):
        ops = [
            Put(store.keys.snapshot_chunk("cf", "s.t", n), {"n": n})
            for n in range(start, min(start + 100, total))
        ]
        assert store.txn([], ops)
    store.put(store.keys.snapshot_chunk("cf", "s.t2", 0), {"n": -1})
    items, revision = store.get_prefix_with_revision(prefix)
    assert len(items) == total
    assert sorted(item.json()["n"] for item in items) == list(range(total))
    assert [item.key for item in items] == sorted(item.key for item in items)
    assert revision == store.revision()
    assert store.get_prefix(prefix) == items


def test_every_request_is_counted_in_the_metrics(store: EtcdStore) -> None:
    """``cdc_etcd_requests_total``: what a server costs etcd, watch events excluded."""

    def sent() -> float:
        return REGISTRY.get_sample_value("cdc_etcd_requests_total") or 0.0

    key = store.keys.capture("counted")
    before = sent()
    store.put(key, {"n": 1})
    store.get(key)
    store.delete(key)
    assert sent() - before == 3


def test_keys_are_read_as_they_were_at_one_revision(store: EtcdStore) -> None:
    """A changefeed's info and status written in one transaction are never seen half
    (the owner once saw a pending update with the old rules and added nothing)."""
    info, status = store.keys.changefeed_info("cf"), store.keys.changefeed_status("cf")
    assert store.txn([], [Put(info, {"n": 1}), Put(status, {"n": 1})])
    before = store.revision()
    real_call = store._call
    writes = iter([True])

    def write_between(what: str, fn: Any, lease_id: int | None = None) -> Any:
        result = real_call(what, fn, lease_id)
        if next(writes, False):  # after the first key's read, both change
            assert store.txn([], [Put(info, {"n": 2}), Put(status, {"n": 2})])
        return result

    store._call = write_between  # type: ignore[method-assign]
    try:
        first, second = store.get_at_one_revision(info, status)
    finally:
        store._call = real_call  # type: ignore[method-assign]
    assert first is not None and second is not None
    assert (first.json()["n"], second.json()["n"]) == (1, 1)
    assert store.get_at_one_revision(info, store.keys.changefeed_info("none"))[1] is None
    old, revision = store.get_prefix_with_revision(store.keys.prefix_of(type(info)), at=before)
    assert revision == before and [item.json()["n"] for item in old] == [1]


def test_create_only_once(store: EtcdStore) -> None:
    key = store.keys.changefeed_info("cf1")
    assert store.create(key, {"sink": "a"})
    assert not store.create(key, {"sink": "b"})
    assert store.get(key).json()["sink"] == "a"
    created, holder = store.create_or_get(key, {"sink": "c"})
    assert not created
    assert holder.json()["sink"] == "a"
    other = store.keys.changefeed_info("cf2")
    created, holder = store.create_or_get(other, {"sink": "d"})
    assert created
    assert holder.json()["sink"] == "d"
    assert holder.create_revision == store.get(other).create_revision


def test_compare_and_swap_conflict(store: EtcdStore) -> None:
    key = store.keys.changefeed_status("cf")
    store.put(key, {"checkpoint": 1})
    seen_by_a = store.get(key)
    seen_by_b = store.get(key)
    assert store.compare_and_swap(key, {"checkpoint": 2}, seen_by_a.mod_revision)
    assert not store.compare_and_swap(key, {"checkpoint": 3}, seen_by_b.mod_revision)
    assert store.get(key).json()["checkpoint"] == 2
    absent = store.keys.changefeed_status("new")
    assert store.compare_and_swap(absent, {"checkpoint": 0}, 0)
    assert not store.compare_and_swap(absent, {"checkpoint": 9}, 0)


def test_update_under_concurrent_writers(open_store: Callable[..., EtcdStore]) -> None:
    key = open_store().keys.changefeed_status("counter")
    writers, increments = 4, 25
    calls = [0] * writers
    errors: list[BaseException] = []

    def work(index: int) -> None:
        store = open_store()

        def bump(old: dict | None) -> dict:
            calls[index] += 1
            return {"n": (old or {}).get("n", 0) + 1}

        try:
            for _ in range(increments):
                store.update(key, bump, retries=1000)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert open_store().get(key).json()["n"] == writers * increments
    assert sum(calls) >= writers * increments


def test_update_retries_after_a_conflicting_write(store: EtcdStore) -> None:
    key = store.keys.barrier("cf")
    store.put(key, {"n": 1})
    seen: list[int | None] = []

    def double(old: dict | None) -> dict:
        seen.append(old["n"])
        if len(seen) == 1:
            store.put(key, {"n": 10})  # another writer gets in between read and write
        return {"n": old["n"] * 2}

    assert store.update(key, double) == {"n": 20, "v": 1}
    assert seen == [1, 10]
    assert store.get(key).json() == {"n": 20, "v": 1}


def test_update_gives_up_after_its_retries(store: EtcdStore) -> None:
    key = store.keys.barrier("cf")
    calls = 0

    def always_raced(old: dict | None) -> dict:
        nonlocal calls
        calls += 1
        store.put(key, {"other": calls})
        return {"mine": True}

    with pytest.raises(ConflictError, match="lost the compare-and-swap 3 times"):
        store.update(key, always_raced, retries=2)
    assert calls == 3
    assert "mine" not in store.get(key).json()


def test_update_creates_deletes_and_skips_unchanged(store: EtcdStore) -> None:
    key = store.keys.subscription("cf", "client")
    assert store.update(key, lambda old: None) is None
    assert store.get(key) is None
    assert store.update(key, lambda old: {"ack": 5}) == {"ack": 5, "v": 1}
    before = store.get(key)
    assert store.update(key, lambda old: old) == {"ack": 5, "v": 1}
    assert store.get(key).mod_revision == before.mod_revision
    assert store.update(key, lambda old: None) is None
    assert store.get(key) is None


def test_delete_and_delete_prefix_stay_inside_the_cluster(store: EtcdStore) -> None:
    ks = store.keys
    for table in ("s.a", "s.b", "s.c"):
        store.put(ks.task("cf1", table), {"capture": "c"})
    store.put(ks.task("cf10", "s.a"), {"capture": "c"})
    assert store.delete(ks.task("cf1", "s.a"))
    assert not store.delete(ks.task("cf1", "s.a"))
    assert store.delete_prefix(ks.prefix_of(type(ks.task("x", "s.t")), "cf1")) == 2
    assert [v.key for v in store.get_prefix(ks.prefix_of())] == [str(ks.task("cf10", "s.a"))]
    for outside in ("/", "", ks.prefix, "/other/"):
        with pytest.raises(ValueError, match="only deletes inside its cluster prefix"):
            store.delete_prefix(outside)


def test_txn_is_all_or_nothing(store: EtcdStore) -> None:
    ks = store.keys
    a, b = ks.task("cf", "s.a"), ks.task("cf", "s.b")
    store.put(a, {"capture": "c1"})
    stale = store.get(a).mod_revision
    store.put(a, {"capture": "c2"})
    assert not store.txn([ModRevisionIs(a, stale)], [Put(b, {"capture": "c1"}), Delete(a)])
    assert store.get(b) is None
    assert store.get(a).json()["capture"] == "c2"
    current = store.get(a).mod_revision
    ok = store.txn(
        [ModRevisionIs(a, current), Absent(b)],
        [Put(b, {"capture": "c1"}), DeletePrefix(ks.prefix_of(type(a), "cf") + "s.a")],
    )
    assert ok
    assert store.get(a) is None
    assert store.get(b).json()["capture"] == "c1"


def test_lease_expiry_deletes_keys(store: EtcdStore) -> None:
    lease = store.grant_lease(TTL)
    key = store.keys.capture("short-lived")
    store.put(key, {"addr": "x"}, lease=lease)
    assert store.get(key).lease == lease.id
    assert 0 < lease.remaining_ttl() <= TTL
    assert wait_until(lambda: store.get(key) is None, TTL * 3)
    assert lease.remaining_ttl() == -1
    with pytest.raises(LeaseLost):
        lease.refresh()
    with pytest.raises(LeaseLost, match=f"{lease.id:x}"):
        store.put(key, {"addr": "x"}, lease=lease)
    lease.revoke()  # revoking a lost lease is not an error


def test_keepalive_keeps_keys_and_reports_loss(store: EtcdStore) -> None:
    lease = store.grant_lease(TTL)
    key = store.keys.capture("kept")
    store.put(key, {"addr": "x"}, lease=lease)
    lost = threading.Event()
    with KeepAlive(lease, on_lost=lambda _lease: lost.set()) as keepalive:
        time.sleep(TTL * 2.5)
        assert store.get(key) is not None
        assert not keepalive.lost.is_set()
        store.revoke_lease(lease.id)  # someone else ends the lease
        assert lost.wait(TTL * 2)
        assert keepalive.lost.is_set()
    assert store.get(key) is None


def test_stopped_keepalive_lets_the_lease_expire(store: EtcdStore) -> None:
    lease = store.grant_lease(TTL)
    key = store.keys.capture("abandoned")
    store.put(key, b"x", lease=lease)
    keepalive = KeepAlive(lease).start()
    time.sleep(TTL)
    keepalive.stop()
    assert store.get(key) is not None
    assert wait_until(lambda: store.get(key) is None, TTL * 3)
    assert not keepalive.lost.is_set()


def test_watch_sees_puts_and_deletes(store: EtcdStore) -> None:
    events: list[WatchEvent] = []
    done = threading.Event()
    prefix = store.keys.prefix_of(type(store.keys.task("cf", "s.t")), "cf")

    def collect(event: WatchEvent) -> None:
        events.append(event)
        if len(events) == 4:
            done.set()

    handle = store.watch_prefix(prefix, collect)
    try:
        r1 = store.put(store.keys.task("cf", "s.a"), {"capture": "c1"})
        store.put(store.keys.task("cf10", "s.a"), {"capture": "elsewhere"})
        r2 = store.put(store.keys.task("cf", "s.a"), {"capture": "c2"})
        store.delete(store.keys.task("cf", "s.a"))
        store.txn([], [Put(store.keys.task("cf", "s.b"), b"1")])
        assert done.wait(5)
    finally:
        handle.cancel()
    kinds = [(e.kind, e.kv.key.rsplit("/", 1)[1]) for e in events]
    assert kinds == [
        (EventKind.PUT, "s.a"),
        (EventKind.PUT, "s.a"),
        (EventKind.DELETE, "s.a"),
        (EventKind.PUT, "s.b"),
    ]
    assert events[0].kv.mod_revision == r1
    assert events[1].kv.json()["capture"] == "c2"
    assert events[1].kv.mod_revision == r2
    assert events[1].kv.create_revision == r1
    assert events[2].kv.value == b""
    assert handle.next_revision == events[3].kv.mod_revision + 1


def test_watch_replays_history_from_a_revision_and_stops_on_cancel(store: EtcdStore) -> None:
    key = store.keys.barrier("cf")
    first = store.put(key, {"n": 1})
    store.put(key, {"n": 2})
    seen: list[int] = []
    handle = store.watch_key(key, lambda e: seen.append(e.kv.json()["n"]), start_revision=first)
    assert wait_until(lambda: seen == [1, 2], 5)
    other = store.keys.barrier("cf2")
    store.put(other, {"n": 99})  # another key: not delivered by watch_key
    store.put(key, {"n": 3})
    assert wait_until(lambda: seen == [1, 2, 3], 5)
    handle.cancel()
    store.put(key, {"n": 4})
    time.sleep(0.3)
    assert seen == [1, 2, 3]


def test_a_slow_callback_does_not_hold_up_other_watches(store: EtcdStore) -> None:
    release = threading.Event()
    fast: list[str] = []
    slow = store.watch_key(store.keys.barrier("slow"), lambda e: release.wait(5))
    quick = store.watch_key(store.keys.barrier("fast"), lambda e: fast.append(e.kv.key))
    try:
        store.put(store.keys.barrier("slow"), b"1")
        store.put(store.keys.barrier("fast"), b"1")
        assert wait_until(lambda: len(fast) == 1, 3)
    finally:
        release.set()
        slow.cancel()
        quick.cancel()


def test_a_watch_creation_that_times_out_leaves_no_answer_for_the_next_watch(
    open_store: Callable[..., EtcdStore],
) -> None:
    """etcd answers a watch creation behind the events the connection's stream already
    carries; a process that reads them slower than they come waits longer than its
    deadline. pyetcd then hands that late answer to the next watch created on the
    stream, which receives the first watch's keys instead of its own. Here the first
    connection's deadline for creations is nothing at all, so each one times out."""
    store = open_store()
    client, _ = store._active()
    client.watcher.timeout = 1e-9
    first_key, second_key = str(store.keys.barrier("first")), str(store.keys.barrier("second"))
    first: list[str] = []
    second: list[str] = []
    one = store.watch_key(first_key, lambda e: first.append(e.kv.key))
    two = store.watch_key(second_key, lambda e: second.append(e.kv.key))
    try:
        store.put(first_key, b"1")
        store.put(second_key, b"2")
        assert wait_until(lambda: first == [first_key] and second == [second_key], 5), (
            first,
            second,
        )
    finally:
        one.cancel()
        two.cancel()


def test_unreachable_endpoint_is_a_clear_store_unavailable(etcd_prefix: str) -> None:
    port = free_port()
    config = EtcdConfig(endpoints=(f"127.0.0.1:{port}",), prefix=etcd_prefix, dial_timeout=2.0)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        EtcdStore(config)
    assert time.monotonic() - started < 10
    message = str(info.value)
    assert message.startswith(f"etcd at 127.0.0.1:{port} is unavailable: cannot reach etcd")
    assert "Connection refused" in message
    assert f"check that etcd is running and listening on 127.0.0.1:{port}" in message
    assert info.value.endpoint == f"127.0.0.1:{port}"
    assert "Traceback" not in message and "_InactiveRpcError" not in message


def test_a_dead_endpoint_is_skipped(etcd_server, etcd_prefix: str) -> None:
    dead = f"127.0.0.1:{free_port()}"
    config = EtcdConfig(endpoints=(dead, etcd_server.endpoint), prefix=etcd_prefix)
    with EtcdStore(config) as store:
        store.put(store.keys.capture("c"), b"x")
        assert store.get(store.keys.capture("c")).value == b"x"


def test_store_survives_an_etcd_restart(private_etcd, connect_when_ready) -> None:
    member = private_etcd()
    config = EtcdConfig(endpoints=(member.endpoint,), prefix="/cdc/restart", dial_timeout=2.0)
    store = connect_when_ready(config)
    key = store.keys.barrier("cf")
    seen: list[int] = []
    handle = store.watch_key(key, lambda e: seen.append(e.kv.json()["n"]))
    store.put(key, {"n": 1})
    assert wait_until(lambda: seen == [1], 5)

    member.stop()
    with pytest.raises(StoreUnavailable, match=f"etcd at {member.endpoint} is unavailable"):
        store.put(key, {"n": 2})
    member.start()

    assert wait_until(lambda: _put_ok(store, key, {"n": 3}), 15, step=0.2)
    assert wait_until(lambda: seen[-1:] == [3], 15)
    assert seen == [1, 3]
    handle.cancel()


def _put_ok(store: EtcdStore, key, value: dict) -> bool:
    try:
        store.put(key, value)
    except StoreUnavailable:
        return False
    return True


def test_keepalive_reports_loss_when_etcd_is_gone_for_a_ttl(
    private_etcd, connect_when_ready
) -> None:
    member = private_etcd()
    config = EtcdConfig(endpoints=(member.endpoint,), prefix="/cdc/outage", dial_timeout=1.0)
    store = connect_when_ready(config)
    lease = store.grant_lease(TTL)
    lost = threading.Event()
    with KeepAlive(lease, on_lost=lambda _lease: lost.set()):
        time.sleep(TTL)
        assert not lost.is_set()
        member.stop()
        stopped_at = time.monotonic()
        assert lost.wait(TTL * 3)
        assert time.monotonic() - stopped_at <= TTL + 1.5
    member.start()


def _compact(endpoint: str, revision: int) -> None:
    """Compact etcd's history through its JSON gateway (there is no etcdctl here)."""
    request = urllib.request.Request(
        f"http://{endpoint}/v3/kv/compaction",
        data=json.dumps({"revision": revision, "physical": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        response.read()


def test_a_watch_into_compacted_history_says_so(private_etcd, connect_when_ready) -> None:
    member = private_etcd()
    config = EtcdConfig(endpoints=(member.endpoint,), prefix="/cdc/compact", dial_timeout=1.0)
    store = connect_when_ready(config)
    key = store.keys.barrier("cf")
    first = store.put(key, {"n": 1})
    store.put(key, {"n": 2})
    last = store.put(key, {"n": 3})
    _compact(member.endpoint, last)
    errors: list[Exception] = []
    late = store.watch_key(key, lambda e: None, start_revision=first, on_error=errors.append)
    assert wait_until(lambda: len(errors) == 1, 5)
    assert isinstance(errors[0], WatchCompacted)
    assert str(errors[0]).startswith(f"watch on {key} lost history")
    assert errors[0].compacted_revision == last
    late.cancel()
    seen: list[int] = []
    handle = store.watch_key(key, lambda e: seen.append(e.kv.json()["n"]), start_revision=last)
    assert wait_until(lambda: seen == [3], 5)
    handle.cancel()


def test_requests_move_to_the_next_endpoint_when_one_fails(
    private_etcd, etcd_server, etcd_prefix: str, connect_when_ready
) -> None:
    """Two endpoints; the first dies. (Two separate clusters stand in for two members.)"""
    first = private_etcd()
    config = EtcdConfig(endpoints=(first.endpoint, etcd_server.endpoint), prefix=etcd_prefix)
    store = connect_when_ready(config)
    key = store.keys.capture("c")
    store.put(key, b"on-first")
    first.stop()
    with pytest.raises(StoreUnavailable, match=f"etcd at {first.endpoint} is unavailable"):
        store.get(key)
    assert store.get(key) is None  # now served by the second endpoint
    store.put(key, b"on-second")
    assert store.get(key).value == b"on-second"
    first.start()
