"""A pull sink as cdc-server runs it (``PullHost``): the owner's DDL, the lease, the stop.

The DDL log and the barrier are real etcd keys, written here as the owner
writes them; the sinks are served by a real gRPC server of this process.
"""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from subscription_helpers import CHANGEFEED, Served, drain, pos, transactions, wait_until

from cdc.changefeed import Barrier, BarrierKind
from cdc.model import DdlEvent, DdlKind, Op, Position, RowChange, TableName
from cdc.sink.base import SinkError
from cdc.store import EtcdStore
from cdc.subscription import PullHost, PullSink, SubscriptionRpcError
from cdc.subscription.ddl_log import DdlLog
from cdc.subscription.ring import CHECK_INTERVAL

SHOP = TableName("shop", "orders")


def row(offset: int, key: int = 1) -> RowChange:
    return RowChange(SHOP, Op.CREATE, None, {"id": key}, (key,), pos(offset))


def ddl(offset: int, column: str = "c") -> DdlEvent:
    statement = f"ALTER TABLE orders ADD {column} INT"
    return DdlEvent(pos(offset), "shop", (SHOP,), DdlKind.ADD_COLUMN, statement)


def barrier(store: EtcdStore, limit: Position, kind: BarrierKind = BarrierKind.RESOLVED) -> None:
    store.put(store.keys.barrier(CHANGEFEED), Barrier(kind, limit).to_dict())


def host_sink(served: Served, host: PullHost, writable: object = None) -> PullSink:
    """A sink the host opens, served by the test's gRPC server."""
    alive = writable if callable(writable) else None
    sink = host.open(CHANGEFEED, alive)
    assert isinstance(sink, PullSink)
    served.registry.register(sink)
    served.sinks.append(sink)
    return sink


def test_the_owners_ddl_comes_before_the_rows_after_it(served: Served) -> None:
    host = PullHost(served.store, capacity=64)
    sink = host_sink(served, host)
    client = served.client("c1", ["shop.*"])
    client.subscribe()
    barrier(served.store, pos(99), BarrierKind.DDL)
    sink.write_rows([row(90), row(95, 2)])
    first = ddl(100)
    host.record_ddl(CHANGEFEED, first)  # the owner, all rows before 100 acked
    assert drain(client, 2) == [row(90), row(95, 2)]
    barrier(served.store, pos(200))
    sink.write_rows([row(110, 3)])
    assert drain(client, 2) == [first, row(110, 3)]

    # Without rows after it, the next flush (every checkpoint interval) hands it in.
    second = ddl(210, "d")
    barrier(served.store, pos(209), BarrierKind.DDL)
    host.record_ddl(CHANGEFEED, second)
    barrier(served.store, pos(300))
    flushing = served.background(sink.flush)
    assert drain(client, 1) == [second]
    flushing.join(5)
    assert not flushing.is_alive()

    # A deposed owner's late write moves nothing back; a new sink hands in the last again.
    host.record_ddl(CHANGEFEED, first)
    assert DdlLog(served.store, CHANGEFEED).read()[1] == second
    restarted = host_sink(served, host)
    assert sink.closed, "the new sink replaced the old one"
    again = served.client("c1", ["shop.*"])
    again.subscribe()
    restarted.write_rows([row(250, 4)])
    assert drain(again, 2) == [second, row(250, 4)]


def test_a_ddl_log_that_cannot_be_read_fails_the_write(served: Served) -> None:
    host = PullHost(served.store, capacity=64)
    sink = host_sink(served, host)
    served.client("c1", ["shop.*"]).subscribe()
    served.store.put(served.store.keys.subscription_ddl(CHANGEFEED), {"v": 1, "ddl": {}})
    with pytest.raises(SinkError, match="rows after a DDL could overtake it"):
        sink.write_rows([row(10)])


def test_a_capture_that_lost_its_lease_hands_in_and_out_nothing(served: Served) -> None:
    alive = threading.Event()
    alive.set()
    host = PullHost(served.store, capacity=2)
    sink = host_sink(served, host, alive.is_set)
    client = served.client("c1", ["shop.*"])
    client.subscribe()
    errors: list[BaseException] = []

    def pipeline() -> None:
        try:
            for txn in transactions([SHOP], 5, rows=1):
                sink.write_rows([e for e in txn if isinstance(e, RowChange)])
        except SinkError as exc:
            errors.append(exc)

    producer = served.background(pipeline)
    wait_until(lambda: sink.status()[0].cursors.put == 2, "the ring is full")
    alive.clear()
    producer.join(60 * CHECK_INTERVAL)
    assert not producer.is_alive(), "a blocked write gives up once the lease is not known alive"
    assert len(errors) == 1 and "lease is not known to be alive" in str(errors[0])
    with pytest.raises(SubscriptionRpcError) as caught:
        client.get(1, timeout=0)
    assert caught.value.code is grpc.StatusCode.UNAVAILABLE
    assert "no longer serves changefeed" in caught.value.details
    with pytest.raises(SinkError, match="lease is not known to be alive"):
        sink.flush()


def test_a_stop_closes_the_sinks_whose_clients_do_not_ack(served: Served) -> None:
    host = PullHost(served.store, capacity=1)
    sink = host_sink(served, host)
    served.client("c1", ["shop.*"]).subscribe()
    blocked: list[BaseException] = []

    def pipeline() -> None:
        try:
            sink.write_rows([row(1), row(2, 2)])
        except SinkError as exc:
            blocked.append(exc)

    producer = served.background(pipeline)
    wait_until(lambda: sink.status()[0].cursors.put == 1, "the ring is full")
    with host.closing_after(0.5):
        producer.join(30)
    assert not producer.is_alive() and sink.closed
    assert len(blocked) == 1 and "closed" in str(blocked[0])
    assert served.registry.find(CHANGEFEED) is None

    fresh = host_sink(served, host)
    with host.closing_after(0.5):
        pass
    time.sleep(1.0)  # past the grace: a stop that ended in time closes nothing after it
    assert not fresh.closed
