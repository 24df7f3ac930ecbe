"""Pull subscriptions end to end: a pull sink fed like a pipeline, gRPC, real clients, etcd.

Delivery must be at least once and in order per client: after dedupe by
(position, key) every client's stream equals the changes its filter selects,
whatever order of gets, acks, rollbacks, kills and restarts happened.
"""

from __future__ import annotations

import random
import time

import grpc
import pytest
from subscription_helpers import (
    CHANGEFEED,
    Event,
    Served,
    drain,
    feed,
    feed_and_resolve,
    ident,
    pos,
    transactions,
    wait_until,
    wanted,
)

from cdc.model import Op, RowChange, TableName
from cdc.sink.base import SinkError
from cdc.store import EtcdStore
from cdc.subscription import SubscriptionRpcError

SHOP, CRM, OTHER = TableName("shop", "orders"), TableName("crm", "people"), TableName("etc", "x")


def record(store: EtcdStore, client_id: str) -> dict | None:
    found = store.get(store.keys.subscription(CHANGEFEED, client_id))
    return None if found is None else found.json()


def test_two_clients_with_different_filters_get_their_tables_in_order(served: Served) -> None:
    sink = served.open_sink(capacity=16)
    shop, crm = served.client("shop-app", ["shop.*"]), served.client("crm-app", ["crm.*"])
    assert shop.subscribe() is None and crm.subscribe() is None
    txns = transactions([SHOP, CRM, OTHER], 120)
    producer = served.background(feed_and_resolve, sink, txns)
    got: dict[str, list[Event]] = {"shop": [], "crm": []}
    expected = {"shop": wanted(txns, "shop"), "crm": wanted(txns, "crm")}
    deadline = time.monotonic() + 30
    while any(len(got[s]) < len(expected[s]) for s in got):
        assert time.monotonic() < deadline
        for schema, client in (("shop", shop), ("crm", crm)):
            batch = client.get(max_events=7, timeout=0.02)
            if batch:
                got[schema].extend(batch.events)
                client.ack(batch.batch_id)
    producer.join(10)
    assert not producer.is_alive()
    assert got == expected
    assert any(not isinstance(e, RowChange) for e in got["shop"]), "DDL reaches its table's client"
    last = txns[-1][0].position
    assert sink.acked("shop-app") == last and sink.acked("crm-app") == last
    assert sink.flushed == last
    assert record(served.store, "shop-app")["acked"] == last.to_dict()  # type: ignore[index]


def test_random_gets_acks_rollbacks_and_kills_deliver_everything_in_order(served: Served) -> None:
    rng = random.Random(20240607)
    sink = served.open_sink(capacity=8)
    txns = transactions([SHOP, CRM], 150)
    rules = {"a": ["shop.*"], "b": ["*.*"]}
    expected = {"a": wanted(txns, "shop"), "b": [e for txn in txns for e in txn]}
    clients = {cid: served.client(cid, r) for cid, r in rules.items()}
    for client in clients.values():
        client.subscribe()
    producer = served.background(feed_and_resolve, sink, txns)
    received: dict[str, list[Event]] = {cid: [] for cid in rules}
    confirmed: dict[str, list[Event]] = {cid: [] for cid in rules}
    outstanding: dict[str, list] = {cid: [] for cid in rules}
    stale: dict[str, list[int]] = {cid: [] for cid in rules}
    counts = dict.fromkeys(("get", "ack", "out-of-order", "stale", "rollback", "kill"), 0)
    deadline = time.monotonic() + 90
    while any(len(confirmed[c]) < len(expected[c]) for c in rules):
        assert time.monotonic() < deadline, {c: len(confirmed[c]) for c in rules}
        cid = rng.choice(sorted(rules))
        client, handed = clients[cid], outstanding[cid]
        roll = rng.random()
        if roll < 0.45 or not handed:
            batch = client.get(rng.randint(1, 6), timeout=0.02)
            if batch:
                received[cid].extend(batch.events)
                handed.append(batch)
            counts["get"] += 1
        elif roll < 0.75:
            batch = handed.pop(0)
            client.ack(batch.batch_id)
            confirmed[cid].extend(batch.events)
            counts["ack"] += 1
        elif roll < 0.8 and len(handed) > 1:
            with pytest.raises(SubscriptionRpcError) as caught:
                client.ack(handed[1].batch_id)
            assert caught.value.code is grpc.StatusCode.FAILED_PRECONDITION
            assert f"ack {handed[0].batch_id} first" in caught.value.details
            counts["out-of-order"] += 1
        elif roll < 0.85 and stale[cid]:
            with pytest.raises(SubscriptionRpcError) as caught:
                client.ack(rng.choice(stale[cid]))
            assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
            counts["stale"] += 1
        elif roll < 0.93:
            assert client.rollback() == sum(len(b) for b in handed)
            stale[cid].extend(b.batch_id for b in handed)
            handed.clear()
            counts["rollback"] += 1
        else:
            client.close()
            clients[cid] = served.client(cid, ())
            clients[cid].subscribe()
            stale[cid].extend(b.batch_id for b in handed)
            handed.clear()
            counts["kill"] += 1
    producer.join(10)
    assert not producer.is_alive()
    assert all(counts.values()), counts
    for cid in rules:
        assert confirmed[cid] == expected[cid], "acked batches hold every event exactly once"
        first_seen = list(dict.fromkeys(ident(e) for e in received[cid]))
        assert first_seen == [ident(e) for e in expected[cid]]
        keys = [key for key, _ in first_seen]
        assert keys == sorted(keys), "positions never go back once duplicates are dropped"
    assert sink.flushed == txns[-1][0].position


def test_a_killed_client_continues_after_its_last_ack(served: Served) -> None:
    sink = served.open_sink()
    first = served.client("c1", ["shop.*"])
    first.subscribe()
    txns = transactions([SHOP], 10, rows=1)
    feed(sink, txns)
    acked = first.get(3, timeout=1)
    assert first.ack(acked.batch_id) == pos(120)
    lost = first.get(4, timeout=1)
    first.close()
    again = served.client("c1", ())
    assert again.subscribe() == pos(120)
    assert again.rules == ("shop.*",)
    with pytest.raises(SubscriptionRpcError) as caught:
        again.ack(lost.batch_id)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details.startswith("batch_id: ")
    rest = drain(again, 7)
    assert rest[:4] == list(lost.events)
    assert list(acked.events) + rest == [e for txn in txns for e in txn]


def test_server_restart_restores_the_subscription_and_delivers_whatever_is_replayed(
    served: Served,
) -> None:
    sink = served.open_sink()
    client = served.client("c1", ["shop.*"])
    client.subscribe()
    txns = [
        [
            RowChange(SHOP, Op.CREATE, None, {"id": n * 10 + r}, (n, r), pos(100 + n))
            for r in range(3)
        ]
        for n in range(10)
    ]
    feed(sink, txns)
    part = client.get(13, timeout=1)
    assert client.ack(part.batch_id) == pos(103), "one row of the 5th transaction is not enough"
    unacked = client.get(5, timeout=1)
    checkpoint = sink.flushed
    assert checkpoint == pos(103)
    stored = record(served.store, "c1")
    assert stored is not None
    assert stored["acked"] == pos(103).to_dict() and stored["rules"] == ["shop.*"]
    assert stored["client"] == "c1" and stored["updated_at"] > 0 and stored["v"] == 1

    restarted = served.restart(sink)
    assert restarted.flushed == checkpoint, "the restored subscription holds the checkpoint"
    with pytest.raises(SubscriptionRpcError) as caught:
        client.ack(unacked.batch_id)
    assert caught.value.code is grpc.StatusCode.INVALID_ARGUMENT
    assert client.subscribe() == pos(103)
    feed(restarted, txns[2:])
    rest = drain(client, 24)
    assert rest == [e for txn in txns[2:] for e in txn], (
        "what the pipeline replays comes again, acked or not: at least once, since a "
        "table joining behind the stream makes the acked position no filter"
    )
    assert part.events[-1] in rest, "the half-acked transaction comes again, whole"


def test_a_full_ring_blocks_the_pipeline_until_the_client_acks(served: Served) -> None:
    sink = served.open_sink(capacity=4)
    client = served.client("slow", ["shop.*"])
    client.subscribe()
    txns = transactions([SHOP], 10, rows=1)
    producer = served.background(feed, sink, txns)

    def put() -> int:
        return sink.status()[0].cursors.put

    wait_until(lambda: put() == 4, "the ring is full")
    time.sleep(0.3)
    assert producer.is_alive() and put() == 4
    batch = client.get(2, timeout=1)
    time.sleep(0.2)
    assert put() == 4, "handing out frees nothing; acking does"
    client.ack(batch.batch_id)
    wait_until(lambda: put() == 6, "the pipeline resumed")
    assert producer.is_alive()
    rest = drain(client, 8)
    producer.join(5)
    assert not producer.is_alive()
    assert list(batch.events) + rest == [e for txn in txns for e in txn]


def test_flushed_is_the_lowest_acked_position_of_the_subscriptions(served: Served) -> None:
    sink = served.open_sink()
    slow, fast = served.client("slow", ["*.*"]), served.client("fast", ["*.*"])
    slow.subscribe()
    fast.subscribe()
    assert sink.flushed is None
    txns = [[RowChange(SHOP, Op.CREATE, None, {"id": n}, (n,), pos(n))] for n in range(1, 11)]
    feed(sink, txns)
    slow.ack(slow.get(3, timeout=1).batch_id)
    fast.ack(fast.get(6, timeout=1).batch_id)
    assert (sink.acked("slow"), sink.acked("fast")) == (pos(3), pos(6))
    assert sink.flushed == pos(3)
    assert record(served.store, "slow")["acked"] == pos(3).to_dict()  # type: ignore[index]
    assert record(served.store, "fast")["acked"] == pos(6).to_dict()  # type: ignore[index]
    started = time.monotonic()
    assert sink.flush(timeout=0.2) == pos(3), "flush waits for the clients, then tells the truth"
    assert time.monotonic() - started < 2
    assert slow.unsubscribe() is True
    assert record(served.store, "slow") is None
    assert sink.flushed == pos(6)
    assert slow.unsubscribe() is False
    drain(fast, 4)
    assert sink.flushed == pos(9)
    sink.resolve(pos(10))
    assert sink.flush() == pos(10)


def test_without_a_subscriber_the_pipeline_waits_for_the_first(served: Served) -> None:
    sink = served.open_sink()
    txns = transactions([SHOP], 3, rows=2)
    producer = served.background(feed, sink, txns)
    time.sleep(0.3)
    assert producer.is_alive() and sink.flushed is None
    client = served.client("late", ["shop.*"])
    client.subscribe()
    assert drain(client, 4) == [e for txn in txns for e in txn]
    producer.join(5)
    assert not producer.is_alive()


def test_a_client_joining_late_starts_after_the_changes_handed_in(served: Served) -> None:
    sink = served.open_sink()
    early = served.client("early", ["*.*"])
    early.subscribe()
    txns = transactions([SHOP], 6, rows=1)
    feed(sink, txns[:3])
    late = served.client("late", ["*.*"])
    assert late.subscribe() == txns[2][0].position
    feed(sink, txns[3:])
    assert drain(late, 3) == [e for txn in txns[3:] for e in txn]
    assert len(drain(early, 6)) == 6


def test_unsubscribing_a_stuck_client_releases_the_pipeline(served: Served) -> None:
    sink = served.open_sink(capacity=2)
    stuck, alive = served.client("stuck", ["*.*"]), served.client("alive", ["*.*"])
    stuck.subscribe()
    alive.subscribe()
    txns = transactions([SHOP], 6, rows=1)
    producer = served.background(feed, sink, txns)
    time.sleep(0.3)
    assert producer.is_alive()
    assert record(served.store, "stuck") is not None
    assert stuck.unsubscribe() is True
    assert record(served.store, "stuck") is None
    assert drain(alive, 6) == [e for txn in txns for e in txn]
    producer.join(5)
    assert not producer.is_alive()
    with pytest.raises(SubscriptionRpcError) as caught:
        stuck.get(1, timeout=0)
    assert caught.value.code is grpc.StatusCode.NOT_FOUND
    assert "call Subscribe first" in caught.value.details


def test_closing_the_sink_releases_a_blocked_pipeline(served: Served) -> None:
    sink = served.open_sink(capacity=1)
    client = served.client("c1", ["*.*"])
    client.subscribe()
    errors: list[BaseException] = []

    def pipeline() -> None:
        try:
            feed(sink, transactions([SHOP], 3, rows=1))
        except SinkError as exc:
            errors.append(exc)

    producer = served.background(pipeline)
    time.sleep(0.3)
    assert producer.is_alive()
    sink.close()
    producer.join(5)
    assert not producer.is_alive()
    assert len(errors) == 1 and "closed" in str(errors[0])
    with pytest.raises(SubscriptionRpcError) as caught:
        client.get(1, timeout=0)
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE


def test_new_rules_on_resubscribe_are_kept_across_a_restart(served: Served) -> None:
    sink = served.open_sink()
    served.client("c1", ["shop.*"]).subscribe()
    changed = served.client("c1", ["crm.*", "etc.*"])
    changed.subscribe()
    assert changed.rules == ("crm.*", "etc.*")
    assert record(served.store, "c1")["rules"] == ["crm.*", "etc.*"]  # type: ignore[index]
    restarted = served.restart(sink)
    assert restarted.status()[0].rules == ("crm.*", "etc.*")
    feed(restarted, transactions([SHOP, CRM], 4, rows=1))
    got = drain(changed, 2)
    assert {e.table for e in got if isinstance(e, RowChange)} == {CRM}


def test_a_flush_the_sink_closes_under_raises_so_nothing_unacked_becomes_a_checkpoint(
    served: Served,
) -> None:
    sink = served.open_sink()
    client = served.client("c1", ["*.*"])
    client.subscribe()
    feed(sink, transactions([SHOP], 3, rows=1))
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            sink.flush()
        except SinkError as exc:
            errors.append(exc)

    flushing = served.background(flush)
    wait_until(lambda: sink.status()[0].cursors.put == 3, "the changes are in the ring")
    assert flushing.is_alive(), "flush waits for the acks"
    sink.close()
    flushing.join(5)
    assert not flushing.is_alive()
    assert len(errors) == 1 and "closed before its clients acked" in str(errors[0])


def test_a_client_unsubscribing_during_a_flush_ends_the_wait_for_it(served: Served) -> None:
    sink = served.open_sink()
    gone, stays = served.client("gone", ["*.*"]), served.client("stays", ["*.*"])
    gone.subscribe()
    stays.subscribe()
    txns = transactions([SHOP], 3, rows=1)
    feed(sink, txns)
    assert len(drain(stays, 3)) == 3
    flushing = served.background(sink.flush)
    assert gone.unsubscribe() is True
    flushing.join(5)
    assert not flushing.is_alive()
    assert sink.flushed == txns[1][0].position
