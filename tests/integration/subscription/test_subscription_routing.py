"""Any capture answers a pull client: two gRPC servers in this process play two captures.

Capture ``cap-a`` serves nothing; ``cap-b`` runs the changefeed's tables and
its pull sink. The changefeed, its tasks and the captures are real etcd keys.
A client that starts at ``cap-a`` is sent to ``cap-b`` (UNAVAILABLE with the
``cdc-serving-address`` trailer) and continues there; ``cdcctl subscription``
lists, queries and removes through either; every case that cannot be served
gets its own status and words.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass

import grpc
import pytest
from subscription_helpers import drain, feed, transactions

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.changefeed import ChangefeedStore, TableTask, TaskState
from cdc.cli.main import main as cdcctl
from cdc.config import ChangefeedConfig
from cdc.model import TableName
from cdc.playground.etcd import EtcdServer
from cdc.store import EtcdStore
from cdc.store.keys import cluster_prefix
from cdc.subscription import (
    PullSink,
    Router,
    SinkRegistry,
    SubscriptionClient,
    SubscriptionRpcError,
    add_subscription_service,
)
from cdc.subscription.service import SERVING_ADDRESS, SERVING_CAPTURE

CF = "feed-r"
SHOP = TableName("shop", "orders")
SOURCE = "mysql://repl@127.0.0.1:3306/?password-env=CDC_SOURCE_PASSWORD"


@dataclass
class Capture:
    capture_id: str
    address: str
    registry: SinkRegistry
    server: grpc.Server


@pytest.fixture
def cluster_id() -> str:
    return f"routing-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(etcd_server: EtcdServer, cluster_id: str) -> Iterator[EtcdStore]:
    """A cluster's own prefix (``/cdc/<id>``), so that cdcctl's --cluster-id reaches it."""
    prefix = cluster_prefix(cluster_id)
    with etcd_server.store(prefix) as opened:
        try:
            yield opened
        finally:
            opened.delete_prefix(prefix + "/")


def _capture(store: EtcdStore, capture_id: str) -> Capture:
    registry = SinkRegistry()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    port = server.add_insecure_port("127.0.0.1:0")
    address = f"127.0.0.1:{port}"
    add_subscription_service(server, registry, Router(store, capture_id, address))
    server.start()
    store.put(store.keys.capture(capture_id), {"id": capture_id, "address": address})
    return Capture(capture_id, address, registry, server)


@pytest.fixture
def captures(store: EtcdStore) -> Iterator[tuple[Capture, Capture]]:
    a, b = _capture(store, "cap-a"), _capture(store, "cap-b")
    sinks: list[PullSink] = []
    try:
        yield a, b
    finally:
        for capture in (a, b):
            for sink in capture.registry.open_sinks():
                sinks.append(sink)
            capture.server.stop(grace=0).wait()
        for sink in sinks:
            sink.close()


def changefeed(store: EtcdStore, cf: str = CF, sink: str = "pull://") -> None:
    config = ChangefeedConfig(cf, SOURCE, sink, rules=("shop.*",), snapshot_mode="never")
    ChangefeedStore(store).create(config)


def run_on(store: EtcdStore, capture_id: str, cf: str = CF, table: str = "shop.orders") -> None:
    store.put(store.keys.task(cf, table), TableTask(capture_id, TaskState.RUN).to_dict())


def serve(store: EtcdStore, capture: Capture, cf: str = CF) -> PullSink:
    sink = PullSink(store, cf, 64)
    capture.registry.register(sink)
    return sink


def test_a_client_is_sent_to_the_capture_serving_the_changefeed(
    store: EtcdStore, captures: tuple[Capture, Capture]
) -> None:
    a, b = captures
    changefeed(store)
    run_on(store, "cap-b")
    sink = serve(store, b)
    with grpc.insecure_channel(a.address) as channel:
        stub = pb_grpc.SubscriptionServiceStub(channel)
        request = pb.SubscribeRequest(changefeed_id=CF, client_id="c1", filter_rules=["shop.*"])
        with pytest.raises(grpc.RpcError) as caught:
            stub.Subscribe(request, timeout=10)
    error = caught.value
    assert error.code() is grpc.StatusCode.UNAVAILABLE
    assert f"served by capture cap-b at {b.address}" in error.details()
    assert dict(error.trailing_metadata()) == {SERVING_CAPTURE: "cap-b", SERVING_ADDRESS: b.address}

    client = SubscriptionClient([a.address], CF, "c1", ["shop.*"])
    try:
        assert client.subscribe() is None
        assert client.target == b.address
        txns = transactions([SHOP], 4, rows=1)
        feed(sink, txns)
        assert drain(client, 4) == [e for txn in txns for e in txn]
    finally:
        client.close()


def test_a_client_that_lost_its_capture_tries_the_next_address(
    store: EtcdStore, captures: tuple[Capture, Capture]
) -> None:
    a, b = captures
    changefeed(store)
    run_on(store, "cap-b")
    serve(store, b)
    gone = _capture(store, "cap-gone")
    gone.server.stop(grace=0).wait()
    client = SubscriptionClient([gone.address, a.address], CF, "c1", ["shop.*"])
    try:
        with pytest.raises(SubscriptionRpcError) as caught:
            client.subscribe()
        assert caught.value.code is grpc.StatusCode.UNAVAILABLE
        assert caught.value.redirect is None and client.target == a.address
        client.subscribe()
        assert client.target == b.address
    finally:
        client.close()


@pytest.mark.parametrize(
    ("setup", "code", "words"),
    [
        ("none", grpc.StatusCode.NOT_FOUND, "no changefeed 'feed-r' in this cluster"),
        (
            "blackhole",
            grpc.StatusCode.FAILED_PRECONDITION,
            "writes to blackhole://, not to pull://",
        ),
        ("paused", grpc.StatusCode.UNAVAILABLE, "is stopped, so no capture serves it now"),
        ("unscheduled", grpc.StatusCode.UNAVAILABLE, "no capture runs changefeed 'feed-r'"),
        ("dead", grpc.StatusCode.UNAVAILABLE, "no capture runs changefeed 'feed-r'"),
        ("starting", grpc.StatusCode.UNAVAILABLE, "is starting on this capture"),
    ],
)
def test_a_changefeed_no_capture_can_serve_says_why(
    store: EtcdStore,
    captures: tuple[Capture, Capture],
    setup: str,
    code: grpc.StatusCode,
    words: str,
) -> None:
    a, _ = captures
    if setup != "none":
        changefeed(store, sink="blackhole://" if setup == "blackhole" else "pull://")
    if setup == "paused":
        ChangefeedStore(store).pause(CF)
    if setup in ("blackhole", "paused"):
        run_on(store, "cap-b")
    if setup == "dead":
        run_on(store, "cap-gone")
    if setup == "starting":
        run_on(store, "cap-a")
    client = SubscriptionClient(a.address, CF, "c1", ["shop.*"])
    try:
        with pytest.raises(SubscriptionRpcError) as caught:
            client.subscribe()
    finally:
        client.close()
    assert caught.value.code is code
    assert words in caught.value.details, caught.value.details
    assert caught.value.redirect is None


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, object, str]:
    code = cdcctl(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else None), err


def test_cdcctl_lists_queries_and_removes_subscriptions_through_any_capture(
    store: EtcdStore,
    captures: tuple[Capture, Capture],
    etcd_server: EtcdServer,
    cluster_id: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = captures
    changefeed(store)
    run_on(store, "cap-b")
    sink = serve(store, b)
    client = SubscriptionClient(b.address, CF, "c1", ["shop.*"])
    try:
        client.subscribe()
        feed(sink, transactions([SHOP], 6, rows=1))
        batch = client.get(2, timeout=1)
        acked = client.ack(batch.batch_id)
        client.get(1, timeout=1)
    finally:
        client.close()

    code, rows, err = cli(capsys, "subscription", "list", "--server", a.address)
    assert code == 0, err
    assert rows == [
        {
            "changefeed": CF,
            "client": "c1",
            "rules": ["shop.*"],
            "acked": str(acked),
            "updated_at": rows[0]["updated_at"],  # type: ignore[index]
            "serving_capture": "cap-b",
            "serving_address": b.address,
            "live": True,
            "unacked": 4,
            "handed_out": 1,
            "outstanding_batches": rows[0]["outstanding_batches"],  # type: ignore[index]
            "capacity": 64,
        }
    ]
    assert len(rows[0]["outstanding_batches"]) == 1  # type: ignore[index]

    code, row, err = cli(capsys, "subscription", "query", "-c", CF, "--client", "c1",
                         "--server", a.address)  # fmt: skip
    assert code == 0 and row["acked"] == str(acked), err  # type: ignore[index]

    code, rows, err = cli(capsys, "subscription", "list", "--etcd", etcd_server.endpoint,
                          "--cluster-id", cluster_id)  # fmt: skip
    assert code == 0, err
    assert rows[0]["live"] is False and rows[0]["serving_capture"] == "cap-b"  # type: ignore[index]
    assert rows[0]["unacked"] is None  # type: ignore[index]

    code, _, err = cli(capsys, "subscription", "query", "-c", CF, "--client", "c9",
                       "--server", a.address)  # fmt: skip
    assert code == 2 and "client 'c9' has no subscription to changefeed 'feed-r'" in err

    changefeed(store, "feed-bh", "blackhole://")
    code, _, err = cli(capsys, "subscription", "list", "-c", "feed-bh", "--server", a.address)
    assert code == 2 and "writes to blackhole://, not to pull://" in err
    code, _, err = cli(capsys, "subscription", "list", "-c", "nope", "--server", a.address)
    assert code == 2 and "no changefeed 'nope'" in err

    code, out, err = cli(capsys, "subscription", "remove", "-c", CF, "--client", "c1",
                         "--server", a.address)  # fmt: skip
    assert code == 0 and out == {"changefeed": CF, "client": "c1", "removed": True}, err
    assert sink.status() == []
    code, _, err = cli(capsys, "subscription", "remove", "-c", CF, "--client", "c1",
                       "--server", a.address)  # fmt: skip
    assert code == 2 and "has no subscription" in err
    code, rows, err = cli(capsys, "subscription", "list", "--server", a.address)
    assert code == 0 and rows == [], err


def test_cdcctl_without_a_server_says_how_to_reach_one(
    store: EtcdStore, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = _capture(store, "cap-gone")
    gone.server.stop(grace=0).wait()
    code, _, err = cli(capsys, "subscription", "list", "--server", gone.address)
    assert code == 3 and "cannot reach the cdc-server" in err
    code, _, err = cli(capsys, "subscription", "list")
    assert code == 2 and "no server: pass --server" in err
