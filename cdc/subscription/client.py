"""A small Python client of ``cdc.v1.SubscriptionService``.

    with SubscriptionClient("127.0.0.1:8300", "orders-feed", "billing", ["shop.*"]) as client:
        while True:
            batch = client.get(max_events=500, timeout=1.0)
            for event in batch.events:
                handle(event)                 # RowChange or DdlEvent, canonical values
            if batch:
                client.ack(batch.batch_id)

Delivery is at least once: after any error (server restart, lost connection,
a deadline) call :meth:`subscribe` again; every batch not acked is handed out
again, so handling an event twice must be harmless (dedupe by position and
key when it is not). Batches are acked in the order they were received.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import grpc

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.model.position import Position
from cdc.subscription.codec import event_from_proto, position_from_proto
from cdc.subscription.subscription import EventBatch

__all__ = ["RPC_TIMEOUT", "SubscriptionClient", "SubscriptionRpcError"]

#: Deadline of every call, on top of a Get's own wait.
RPC_TIMEOUT = 10.0
R = TypeVar("R")


class SubscriptionRpcError(RuntimeError):
    """A call failed; ``code`` is the gRPC status (NOT_FOUND, INVALID_ARGUMENT, ...)."""

    def __init__(self, method: str, code: grpc.StatusCode, details: str) -> None:
        self.method = method
        self.code = code
        self.details = details
        super().__init__(f"{method} failed: {code.name}: {details}")


class SubscriptionClient:
    """One client id's subscription to one changefeed on the server at ``target``.

    ``rules`` are table filter rules (``["shop.*"]``); they are needed the
    first time a client id subscribes and replace its rules when given again.
    Use it as a context manager (subscribes on entry, closes on exit) or
    call :meth:`subscribe` and :meth:`close` yourself.
    """

    def __init__(
        self, target: str, changefeed_id: str, client_id: str, rules: Sequence[str] = ()
    ) -> None:
        self.target = target
        self.changefeed_id = changefeed_id
        self.client_id = client_id
        self.rules = tuple(rules)
        self._channel = grpc.insecure_channel(target)
        self._stub = pb_grpc.SubscriptionServiceStub(self._channel)

    def __enter__(self) -> SubscriptionClient:
        try:
            self.subscribe()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, call: Callable[[], R]) -> R:
        try:
            return call()
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            details = (exc.details() if hasattr(exc, "details") else "") or str(exc)
            raise SubscriptionRpcError(method, code, details) from None

    def subscribe(self) -> Position | None:
        """Subscribe or resume; unacked batches come again. Every event at or before
        the returned position has been acked (None: nothing yet)."""
        request = pb.SubscribeRequest(
            changefeed_id=self.changefeed_id, client_id=self.client_id, filter_rules=self.rules
        )
        response = self._call(
            "Subscribe", lambda: self._stub.Subscribe(request, timeout=RPC_TIMEOUT)
        )
        self.rules = tuple(response.filter_rules)
        if response.HasField("acked_position"):
            return position_from_proto(response.acked_position)
        return None

    def get(self, max_events: int = 100, timeout: float = 1.0) -> EventBatch:
        """Up to ``max_events`` events, waiting up to ``timeout`` seconds for the first;
        the empty batch (id 0, needs no ack) when none came."""
        request = pb.GetRequest(
            changefeed_id=self.changefeed_id,
            client_id=self.client_id,
            max_events=max_events,
            timeout_ms=round(timeout * 1000),
        )
        reply = self._call("Get", lambda: self._stub.Get(request, timeout=timeout + RPC_TIMEOUT))
        return EventBatch(reply.batch_id, tuple(event_from_proto(e) for e in reply.events))

    def ack(self, batch_id: int) -> Position | None:
        """Confirm a batch (the oldest not yet acked); the acked position after it."""
        request = pb.AckRequest(
            changefeed_id=self.changefeed_id, client_id=self.client_id, batch_id=batch_id
        )
        response = self._call("Ack", lambda: self._stub.Ack(request, timeout=RPC_TIMEOUT))
        if response.HasField("acked_position"):
            return position_from_proto(response.acked_position)
        return None

    def rollback(self) -> int:
        """Have every batch not acked handed out again; how many events that is."""
        request = pb.RollbackRequest(changefeed_id=self.changefeed_id, client_id=self.client_id)
        response = self._call("Rollback", lambda: self._stub.Rollback(request, timeout=RPC_TIMEOUT))
        return response.redelivered

    def unsubscribe(self) -> bool:
        """End the subscription for good (its acked position is forgotten)."""
        request = pb.UnsubscribeRequest(changefeed_id=self.changefeed_id, client_id=self.client_id)
        response = self._call(
            "Unsubscribe", lambda: self._stub.Unsubscribe(request, timeout=RPC_TIMEOUT)
        )
        return response.removed

    def close(self) -> None:
        """Close the channel; the subscription stays (unacked batches come again)."""
        self._channel.close()
