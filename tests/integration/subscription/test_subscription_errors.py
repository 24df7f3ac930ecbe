"""Bad requests get the documented status code and a message that names the field."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import pytest
from subscription_helpers import CHANGEFEED, Served, feed, transactions

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.model import TableName
from cdc.subscription import PullSink, SubscriptionClient, SubscriptionRpcError

SHOP = TableName("shop", "orders")


def failure(call: Callable[[], object]) -> SubscriptionRpcError:
    with pytest.raises(SubscriptionRpcError) as caught:
        call()
    return caught.value


@pytest.fixture
def sink(served: Served) -> PullSink:
    return served.open_sink()


def test_unknown_changefeed_is_not_found(served: Served, sink: PullSink) -> None:
    client = SubscriptionClient(served.target, "no-such-feed", "c1", ["shop.*"])
    served.clients.append(client)
    for call in (client.subscribe, lambda: client.get(1, 0), lambda: client.ack(1)):
        error = failure(call)
        assert error.code is grpc.StatusCode.NOT_FOUND
        assert "'no-such-feed' has no pull sink running on this server" in error.details


def test_unknown_client_is_not_found(served: Served, sink: PullSink) -> None:
    client = served.client("never-subscribed")
    for call in (lambda: client.get(1, 0), lambda: client.ack(1), client.rollback):
        error = failure(call)
        assert error.code is grpc.StatusCode.NOT_FOUND
        assert "'never-subscribed' has not subscribed" in error.details
    assert client.unsubscribe() is False


def test_a_bad_filter_rule_is_named(served: Served, sink: PullSink) -> None:
    error = failure(served.client("c1", ["shop.*", "shop"]).subscribe)
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details.startswith("filter_rules[1]: invalid table filter rule 'shop'")
    assert sink.status() == []
    error = failure(served.client("c1", ["db.[a-"]).subscribe)
    assert error.details.startswith("filter_rules[0]: ")


def test_the_first_subscribe_needs_rules(served: Served, sink: PullSink) -> None:
    error = failure(served.client("c1", ()).subscribe)
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details.startswith("filter_rules: client 'c1' subscribes for the first time")
    error = failure(served.client("c1", ["# just a comment"]).subscribe)
    assert error.details.startswith("filter_rules: give at least one table filter rule")


def test_a_resubscribe_with_bad_rules_keeps_the_old_ones(served: Served, sink: PullSink) -> None:
    served.client("c1", ["shop.*"]).subscribe()
    error = failure(served.client("c1", ["/unclosed"]).subscribe)
    assert error.details.startswith("filter_rules[0]: ")
    assert sink.status()[0].rules == ("shop.*",)


@pytest.mark.parametrize(
    ("changefeed_id", "client_id", "field"),
    [
        ("", "c1", "changefeed_id"),
        ("a/b", "c1", "changefeed_id"),
        (CHANGEFEED, "", "client_id"),
        (CHANGEFEED, "a/b", "client_id"),
        (CHANGEFEED, "tab\there", "client_id"),
    ],
)
def test_malformed_ids_are_named(
    served: Served, sink: PullSink, changefeed_id: str, client_id: str, field: str
) -> None:
    client = SubscriptionClient(served.target, changefeed_id, client_id, ["shop.*"])
    served.clients.append(client)
    error = failure(client.subscribe)
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details.startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("max_events", "timeout_ms", "field"),
    [(0, 0, "max_events"), (10_001, 0, "max_events"), (1, 60_001, "timeout_ms")],
)
def test_get_limits_are_named(
    served: Served, sink: PullSink, max_events: int, timeout_ms: int, field: str
) -> None:
    served.client("c1").subscribe()
    with grpc.insecure_channel(served.target) as channel:
        stub = pb_grpc.SubscriptionServiceStub(channel)
        request = pb.GetRequest(
            changefeed_id=CHANGEFEED, client_id="c1", max_events=max_events, timeout_ms=timeout_ms
        )
        with pytest.raises(grpc.RpcError) as caught:
            stub.Get(request, timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(f"{field}: must be ")


def test_bad_batch_ids(served: Served, sink: PullSink) -> None:
    client = served.client("c1", ["shop.*"])
    client.subscribe()
    feed(sink, transactions([SHOP], 6, rows=1))
    for bad in (0, -5):
        error = failure(lambda bad=bad: client.ack(bad))
        assert error.code is grpc.StatusCode.INVALID_ARGUMENT
        assert error.details.startswith("batch_id: ") and "positive" in error.details
    first, second = client.get(1, 0), client.get(1, 0)
    error = failure(lambda: client.ack(second.batch_id + 100))
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT
    assert error.details.startswith("batch_id: ")
    assert f"outstanding batches: {first.batch_id}, {second.batch_id}" in error.details
    error = failure(lambda: client.ack(second.batch_id))
    assert error.code is grpc.StatusCode.FAILED_PRECONDITION
    assert f"ack {first.batch_id} first" in error.details
    client.ack(first.batch_id)
    error = failure(lambda: client.ack(first.batch_id))
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT, "a second ack of one batch"
    assert client.rollback() == 1
    error = failure(lambda: client.ack(second.batch_id))
    assert error.code is grpc.StatusCode.INVALID_ARGUMENT, "voided by the rollback"
    again = client.get(10, 0)
    assert again.batch_id > second.batch_id
    assert again.events[0] == second.events[0]
    client.ack(again.batch_id)


def test_a_closed_sink_is_unavailable(served: Served, sink: PullSink) -> None:
    client = served.client("c1")
    client.subscribe()
    sink.close()
    for call in (client.subscribe, lambda: client.get(1, 0), lambda: client.ack(1)):
        assert failure(call).code is grpc.StatusCode.UNAVAILABLE
