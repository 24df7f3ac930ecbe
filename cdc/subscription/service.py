"""The ``cdc.v1.SubscriptionService`` servicer: gRPC in front of the pull sinks of this server.

The server process keeps a :class:`SinkRegistry`; a changefeed running here
with a pull sink registers its :class:`PullSink` on start and unregisters it
on stop. Every request names its changefeed and is served by that sink; the
errors map to status codes as listed in ``cdc.subscription.errors`` and the
proto. ``Get`` holds a server thread while it waits (at most 60 s, and never
past the caller's deadline): size the server's thread pool for the clients.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

import grpc

from cdc.api.gen.cdc.v1 import subscription_pb2 as pb
from cdc.api.gen.cdc.v1 import subscription_pb2_grpc as pb_grpc
from cdc.logs import get_logger
from cdc.store import StoreError
from cdc.store.keys import InvalidKeyError, check_name
from cdc.subscription.codec import CodecError, events_to_batch, position_to_proto
from cdc.subscription.errors import (
    InvalidRequestError,
    SubscriptionClosedError,
    UnknownChangefeedError,
    UnknownClientError,
)
from cdc.subscription.ring import OutOfOrderAckError, UnknownBatchError
from cdc.subscription.sink import MAX_WAIT, PullSink

__all__ = ["SERVICE_NAME", "SinkRegistry", "SubscriptionServicer", "add_subscription_service"]

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["SubscriptionService"].full_name
#: Time kept back from the caller's deadline, so a batch is not handed out too late to arrive.
_DEADLINE_MARGIN = 0.2

log = get_logger(__name__)
R = TypeVar("R")


class SinkRegistry:
    """The pull sinks of the changefeeds running on this server, by changefeed id."""

    def __init__(self) -> None:
        self._sinks: dict[str, PullSink] = {}
        self._lock = threading.Lock()

    def register(self, sink: PullSink) -> None:
        """Serve ``sink``'s changefeed; it replaces a closed sink of the same changefeed."""
        with self._lock:
            current = self._sinks.get(sink.changefeed_id)
            if current is not None and current is not sink and not current.closed:
                raise ValueError(
                    f"changefeed {sink.changefeed_id!r} already has an open pull sink here"
                )
            self._sinks[sink.changefeed_id] = sink

    def unregister(self, sink: PullSink) -> None:
        """Stop serving ``sink`` (nothing happens if another sink took its place)."""
        with self._lock:
            if self._sinks.get(sink.changefeed_id) is sink:
                del self._sinks[sink.changefeed_id]

    def get(self, changefeed_id: str) -> PullSink:
        with self._lock:
            sink = self._sinks.get(changefeed_id)
        if sink is None:
            raise UnknownChangefeedError(changefeed_id)
        return sink


def _status(exc: Exception) -> tuple[grpc.StatusCode, str] | None:
    """The gRPC status of an expected error, or None for a bug."""
    if isinstance(exc, UnknownChangefeedError | UnknownClientError):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, InvalidRequestError):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, UnknownBatchError):
        return grpc.StatusCode.INVALID_ARGUMENT, f"batch_id: {exc}"
    if isinstance(exc, OutOfOrderAckError):
        return grpc.StatusCode.FAILED_PRECONDITION, f"batch_id: {exc}"
    if isinstance(exc, SubscriptionClosedError):
        return grpc.StatusCode.UNAVAILABLE, str(exc)
    if isinstance(exc, StoreError):
        return grpc.StatusCode.UNAVAILABLE, f"cannot record the subscription in etcd: {exc}"
    return None


class SubscriptionServicer(pb_grpc.SubscriptionServiceServicer):
    def __init__(self, registry: SinkRegistry) -> None:
        self.registry = registry

    def _serve(
        self,
        context: grpc.ServicerContext,
        method: str,
        changefeed_id: str,
        call: Callable[[PullSink], R],
    ) -> R:
        try:
            try:
                check_name("changefeed_id", changefeed_id)
            except InvalidKeyError as exc:
                raise InvalidRequestError("changefeed_id", str(exc)) from None
            return call(self.registry.get(changefeed_id))
        except Exception as exc:
            status = _status(exc)
            if status is None:
                log.exception("%s on changefeed %r failed", method, changefeed_id)
                status = (grpc.StatusCode.INTERNAL, f"{method} failed: {exc}")
            context.abort(*status)
            raise AssertionError("context.abort returned") from exc

    def Subscribe(  # gRPC method name
        self, request: pb.SubscribeRequest, context: grpc.ServicerContext
    ) -> pb.SubscribeResponse:
        def call(sink: PullSink) -> pb.SubscribeResponse:
            result = sink.subscribe(request.client_id, list(request.filter_rules))
            response = pb.SubscribeResponse(filter_rules=result.rules, resumed=result.resumed)
            if result.acked is not None:
                position_to_proto(result.acked, response.acked_position)
            return response

        return self._serve(context, "Subscribe", request.changefeed_id, call)

    def Get(  # gRPC method name
        self, request: pb.GetRequest, context: grpc.ServicerContext
    ) -> pb.Batch:
        def call(sink: PullSink) -> pb.Batch:
            if request.timeout_ms > MAX_WAIT * 1000:
                raise InvalidRequestError(
                    "timeout_ms", f"must be 0 .. {MAX_WAIT * 1000:.0f}, not {request.timeout_ms}"
                )
            timeout = request.timeout_ms / 1000
            remaining = context.time_remaining()
            if remaining is not None and timeout > 0:
                timeout = min(timeout, max(0.0, remaining - _DEADLINE_MARGIN))
            batch = sink.get(request.client_id, request.max_events, timeout)
            try:
                return events_to_batch(batch.batch_id, batch.events)
            except CodecError as exc:
                raise RuntimeError(
                    f"batch {batch.batch_id} of client {request.client_id!r} cannot be "
                    f"encoded: {exc}"
                ) from exc

        return self._serve(context, "Get", request.changefeed_id, call)

    def Ack(  # gRPC method name
        self, request: pb.AckRequest, context: grpc.ServicerContext
    ) -> pb.AckResponse:
        def call(sink: PullSink) -> pb.AckResponse:
            acked = sink.ack(request.client_id, request.batch_id)
            response = pb.AckResponse()
            if acked is not None:
                position_to_proto(acked, response.acked_position)
            return response

        return self._serve(context, "Ack", request.changefeed_id, call)

    def Rollback(  # gRPC method name
        self, request: pb.RollbackRequest, context: grpc.ServicerContext
    ) -> pb.RollbackResponse:
        def call(sink: PullSink) -> pb.RollbackResponse:
            return pb.RollbackResponse(redelivered=sink.rollback(request.client_id))

        return self._serve(context, "Rollback", request.changefeed_id, call)

    def Unsubscribe(  # gRPC method name
        self, request: pb.UnsubscribeRequest, context: grpc.ServicerContext
    ) -> pb.UnsubscribeResponse:
        def call(sink: PullSink) -> pb.UnsubscribeResponse:
            return pb.UnsubscribeResponse(removed=sink.unsubscribe(request.client_id))

        return self._serve(context, "Unsubscribe", request.changefeed_id, call)


def add_subscription_service(server: grpc.Server, registry: SinkRegistry) -> str:
    """Serve the subscriptions of ``registry`` on ``server``; the service's full name
    (for reflection and health)."""
    pb_grpc.add_SubscriptionServiceServicer_to_server(SubscriptionServicer(registry), server)
    return SERVICE_NAME
